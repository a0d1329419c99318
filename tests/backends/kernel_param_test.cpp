// kernel_param_test.cpp — kernels equal up to shape constants share one generic code
// (backends/kernel_param.h): the plan is exact (each member is the generic code with its
// values substituted), short trip counts stay constants unless asked, and the shared code
// runs each layer on its own shape (llvm, LATHE_LLVM_SHAPE_PARAMS).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "backends/backend.h"
#include "backends/kernel_dedup.h"
#include "backends/kernel_param.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/loop/loop_print.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "diff_util.h"

namespace lathe {
namespace {

HostTensor values(std::vector<int64_t> shape, double seed) {
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 0.3 * std::sin(seed + 0.37 * static_cast<double>(i)));
  return t;
}

// Conv + ReLU layers over several spatial sizes (odd channels, prime sizes), then 2x2
// max-pools between them: the same kernels at other shapes.
Graph pyramid(int64_t n, int64_t c, int64_t h) {
  Tensor x = input("x", {SymInt(n), SymInt(c), SymInt(h), SymInt(h)});
  Tensor y = x;
  std::vector<std::pair<std::string, NodeRef>> outs;
  for (int l = 0; l < 3; ++l) {
    Conv2dOptions o;
    o.padding = {1, 1};
    y = relu(conv2d(y, from_host(values({c, c, 3, 3}, l)), from_host(values({c}, 10 + l)), o));
    outs.push_back({"y" + std::to_string(l), y.node()});
    Pool2dOptions p;
    p.kernel = {2, 2};
    p.stride = {2, 2};
    y = max_pool2d(y, p);
  }
  return Graph::from_outputs(outs);
}

std::vector<const loop::LoopFunc*> distinct_funcs(const Program& p) {
  std::vector<const loop::LoopFunc*> fs, out;
  for (auto& f : p.funcs)
    if (f.kind != "extern") fs.push_back(&f);
  SameCode same = same_code(fs);
  for (size_t i = 0; i < fs.size(); ++i)
    if (same.is_first(i)) out.push_back(fs[i]);
  return out;
}

// Replaces variables by constants without simplifying (the builders would fold them).
loop::ExprRef put_values(const loop::ExprRef& e, const std::map<std::string, int64_t>& v) {
  if (!e) return e;
  if (e->kind == loop::ExprKind::Var)
    if (auto it = v.find(e->name); it != v.end()) {
      auto c = std::make_shared<loop::Expr>(*loop::const_int(it->second));
      return c;
    }
  auto n = std::make_shared<loop::Expr>(*e);
  for (auto& a : n->args) a = put_values(a, v);
  return n;
}
void put_values(std::vector<loop::Stmt>& body, const std::map<std::string, int64_t>& v) {
  for (auto& s : body) {
    s.extent = put_values(s.extent, v);
    s.cond = put_values(s.cond, v);
    s.index = put_values(s.index, v);
    s.value = put_values(s.value, v);
    put_values(s.body, v);
    put_values(s.else_body, v);
  }
}

// print_loop without the local arrays' sizes (the generic code takes the largest) and the
// comments (the schedule's notes name the first member's sizes)
std::string without_alloc_sizes(std::string s) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t e = s.find('\n', pos);
    if (e == std::string::npos) e = s.size();
    std::string line = s.substr(pos, e - pos);
    if (size_t c = line.find('#'); c != std::string::npos) line.resize(c);
    if (line.find("alloc ") == std::string::npos) out += line + "\n";
    pos = e + 1;
  }
  return out;
}

TEST(KernelParam, EachMemberIsTheGenericCodeWithItsValues) {
  for (int64_t n : {1, 3}) {
    Program p = build_program(pyramid(n, 5, 67));
    auto fs = distinct_funcs(p);
    ShapeParamPlan plan = plan_shape_params(fs, 2, INT64_MIN);
    ASSERT_EQ(plan.code.size(), fs.size());
    EXPECT_LT(plan.codes.size(), fs.size()) << "nothing shared:\n" << test::loop_ir_of(p);
    EXPECT_GE(plan.grouped(), 2u);
    for (size_t i = 0; i < fs.size(); ++i) {
      const loop::LoopFunc& g = plan.codes[plan.code[i]];
      size_t first = plan.first_param[plan.code[i]];
      ASSERT_EQ(g.dims.size(), first + plan.values[i].size());
      loop::LoopFunc back = g;
      std::map<std::string, int64_t> v;
      for (size_t k = 0; k < plan.values[i].size(); ++k) v[g.dims[first + k]] = plan.values[i][k];
      put_values(back.body, v);
      back.dims.resize(first);
      back.name = fs[i]->name;
      EXPECT_TRUE(without_alloc_sizes(loop::print_loop(back)) == without_alloc_sizes(loop::print_loop(*fs[i])))
          << "N=" << n << " " << fs[i]->name;
      // bounds cover every member's values
      for (size_t k = 0; k < plan.values[i].size(); ++k) {
        EXPECT_LE(plan.bounds[plan.code[i]][k].first, plan.values[i][k]);
        EXPECT_GE(plan.bounds[plan.code[i]][k].second, plan.values[i][k]);
      }
    }
  }
}

TEST(KernelParam, ShortTripCountsAndOtherCodeStayApart) {
  // The default keeps serial trip counts under 32 constant: every size here has rows < 32
  // after the first pool, so fewer kernels share than with every trip count free.
  Program p = build_program(pyramid(1, 5, 67));
  auto fs = distinct_funcs(p);
  ShapeParamPlan all = plan_shape_params(fs, 2, INT64_MIN), longer = plan_shape_params(fs, 2);
  EXPECT_LE(all.codes.size(), longer.codes.size());
  EXPECT_EQ(plan_shape_params(fs, SIZE_MAX).codes.size(), fs.size()) << "off: one code per kernel";
  // different ops never share, whatever the shapes
  Tensor x = input("x", {SymInt(7), SymInt(9)});
  Tensor z = input("z", {SymInt(11), SymInt(13)});
  Graph g = Graph::from_outputs({{"a", exp(x).node()}, {"b", tanh(z).node()}, {"c", (exp(z) + 1.0).node()}});
  Program q = build_program(g);
  auto qs = distinct_funcs(q);
  EXPECT_EQ(plan_shape_params(qs, 2, INT64_MIN).codes.size(), qs.size()) << test::loop_ir_of(q);
}

TEST(KernelParam, SharedCodeRunsEveryLayerAtItsShape) {
  std::string backend = test::test_backend();
  if (backend != "llvm") GTEST_SKIP() << "llvm only";
  for (const char* mode : {"all", "1"}) {
    setenv("LATHE_LLVM_SHAPE_PARAMS", mode, 1);
    for (int64_t n : {1, 2}) {
      for (int64_t h : {67, 41}) {
        Graph g = pyramid(n, 7, h);
        Program p = build_program(g);
        size_t distinct = distinct_funcs(p).size();
        CompileOptions o;
        o.use_cache = false;
        auto compiled = get_backend("llvm").compile(p, o);
        EXPECT_GE(compiled->codes_compiled, 1);
        if (std::string(mode) == "all") EXPECT_LT(compiled->codes_compiled, static_cast<int>(distinct)) << "N=" << n << " H=" << h;
        else EXPECT_LE(compiled->codes_compiled, static_cast<int>(distinct));
        Executable exe(std::move(p), compiled, "llvm");
        TensorMap in = random_inputs(g, 5);
        EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in)), "") << mode << " N=" << n << " H=" << h;
      }
    }
  }
  unsetenv("LATHE_LLVM_SHAPE_PARAMS");
}

}  // namespace
}  // namespace lathe
