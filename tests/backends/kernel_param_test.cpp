// kernel_param_test.cpp — kernels equal up to shape constants share one generic code
// (backends/kernel_param.h): the plan is exact (each member is the generic code with its
// values substituted), short trip counts stay constants unless asked, and the shared code
// runs each layer on its own shape (llvm, LATHE_LLVM_SHAPE_PARAMS).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

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


// Size classes (the llvm default): depthwise layers of one spatial size and other channel
// counts share a code; another spatial size (other short trip counts) does not.
Tensor depthwise(const Tensor& x, int64_t c, double seed) {
  Conv2dOptions o;
  o.padding = {1, 1};
  o.groups = c;
  return relu(conv2d(x, from_host(values({c, 1, 3, 3}, seed)), from_host(values({c}, seed + 1)), o));
}
const loop::LoopFunc* only_kernel(const Program& p) {
  auto fs = distinct_funcs(p);
  EXPECT_EQ(fs.size(), 1u) << test::loop_ir_of(p);
  return fs.empty() ? nullptr : fs[0];
}
Program depthwise_program(int64_t n, int64_t c, int64_t h) {
  Tensor x = input("x", {SymInt(n), SymInt(c), SymInt(h), SymInt(h)});
  return build_program(Graph::from_outputs({{"y", depthwise(x, c, 0.5).node()}}));
}

bool is_param(const loop::ExprRef& e) { return e && e->kind == loop::ExprKind::Var && e->name.rfind("sp$", 0) == 0; }
// Parameters in e other than a per-task base offset (a parameter times a variable that is no
// serial loop's)
int loose_params(const loop::ExprRef& e, const std::set<std::string>& serial) {
  if (!e) return 0;
  if (is_param(e)) return 1;
  if (e->kind == loop::ExprKind::Binary && e->op == Op::Mul && e->args.size() == 2)
    for (size_t k = 0; k < 2; ++k)
      if (is_param(e->args[k]) && e->args[1 - k]->kind == loop::ExprKind::Var && !serial.count(e->args[1 - k]->name))
        return loose_params(e->args[1 - k], serial);
  int n = 0;
  for (auto& a : e->args) n += loose_params(a, serial);
  return n;
}
bool has_loop(const std::vector<loop::Stmt>& body) {
  for (auto& s : body)
    if (s.kind == loop::StmtKind::For || has_loop(s.body) || has_loop(s.else_body)) return true;
  return false;
}
int params_in_innermost_loops(const std::vector<loop::Stmt>& body, bool inner, std::set<std::string> serial = {}) {
  int n = 0;
  for (auto& s : body) {
    if (inner)
      n += loose_params(s.extent, serial) + loose_params(s.cond, serial) + loose_params(s.index, serial) +
           loose_params(s.value, serial);
    bool in = inner || (s.kind == loop::StmtKind::For && !s.annot.parallel && !has_loop(s.body));
    std::set<std::string> sv = serial;
    if (s.kind == loop::StmtKind::For && !s.annot.parallel) sv.insert(s.var);
    n += params_in_innermost_loops(s.body, in, sv) + params_in_innermost_loops(s.else_body, in, sv);
  }
  return n;
}

TEST(KernelParam, SizeClassesShareOnlyAlikeLoops) {
  for (int64_t n : {1, 64}) {
    Program a = depthwise_program(n, 5, 29), b = depthwise_program(n, 11, 29), c = depthwise_program(n, 5, 13);
    const loop::LoopFunc *fa = only_kernel(a), *fb = only_kernel(b), *fc = only_kernel(c);
    ASSERT_TRUE(fa && fb && fc);
    EXPECT_EQ(shape_param_key(*fa, kShapeParamClasses), shape_param_key(*fb, kShapeParamClasses))
        << "N=" << n << ": same rows, other channel counts share\n" << loop::print_loop(*fa) << loop::print_loop(*fb);
    EXPECT_NE(shape_param_key(*fa, kShapeParamClasses), shape_param_key(*fc, kShapeParamClasses)) << "N=" << n;
    // with every trip count free the small layer would join them
    EXPECT_EQ(shape_param_key(*fa, INT64_MIN), shape_param_key(*fc, INT64_MIN)) << "N=" << n;
    ShapeParamPlan plan = plan_shape_params({fa, fb, fc}, 2, kShapeParamClasses);
    EXPECT_EQ(plan.codes.size(), 2u);
    EXPECT_EQ(plan.code[0], plan.code[1]);
    EXPECT_NE(plan.code[0], plan.code[2]);
    // the shared code's innermost loops are the members' own: no parameter inside them but
    // per-task base offsets (the batch stride at N=64)
    const loop::LoopFunc& g = plan.codes[plan.code[0]];
    EXPECT_GT(g.dims.size(), fa->dims.size()) << "no parameters";
    EXPECT_EQ(params_in_innermost_loops(g.body, false), 0) << loop::print_loop(g);
  }
}

TEST(KernelParam, SizeClassedCodesMatchTheInterpreter) {
  std::string backend = test::test_backend();
  if (backend != "llvm") GTEST_SKIP() << "llvm only";
  unsetenv("LATHE_LLVM_SHAPE_PARAMS");  // the default: size classes
  for (int64_t n : {1, 3, 64}) {
    Tensor x = input("x", {SymInt(n), SymInt(5), SymInt(29), SymInt(29)});
    Tensor z = input("z", {SymInt(n), SymInt(11), SymInt(29), SymInt(29)});
    Tensor w = input("w", {SymInt(n), SymInt(7), SymInt(13), SymInt(13)});
    Graph g = Graph::from_outputs({{"a", depthwise(x, 5, 0.5).node()}, {"b", depthwise(z, 11, 1.5).node()},
                                   {"c", depthwise(w, 7, 2.5).node()}});
    Program p = build_program(g);
    size_t distinct = distinct_funcs(p).size();
    CompileOptions o;
    o.use_cache = false;
    auto compiled = get_backend("llvm").compile(p, o);
    EXPECT_EQ(compiled->codes_compiled, static_cast<int>(distinct) - 1) << "N=" << n << "\n" << test::loop_ir_of(p);
    Executable exe(std::move(p), compiled, "llvm");
    TensorMap in = random_inputs(g, 7);
    EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in)), "") << "N=" << n;
  }
}

// LATHE_LLVM_SHAPE_PARAMS=hoist: GEMM convolutions of other channel counts (other K blocks, a
// literal the micro-kernel only multiplies a panel index by: K 64 and 96 here) share a code
// that class keeps apart, and every layer still matches the interpreter (odd channel counts,
// prime sizes, batch 1 and 3).
Graph pointwise_chain(int64_t n, int64_t h) {
  Tensor y = input("x", {SymInt(n), SymInt(37), SymInt(h), SymInt(h)});
  std::vector<std::pair<std::string, NodeRef>> outs;
  int64_t c = 37;
  int l = 0;
  for (int64_t co : {64, 96, 144, 53}) {
    y = relu(conv2d(y, from_host(values({co, c, 1, 1}, l)), from_host(values({co}, 20 + l)), Conv2dOptions{}));
    outs.push_back({"y" + std::to_string(l++), y.node()});
    c = co;
  }
  return Graph::from_outputs(outs);
}

TEST(KernelParam, HoistSharesGemmsOfOtherChannelCounts) {
  std::string backend = test::test_backend();
  if (backend != "llvm") GTEST_SKIP() << "llvm only";
  for (int64_t n : {1, 3}) {
    for (int64_t h : {17, 31}) {
      Graph g = pointwise_chain(n, h);
      TensorMap in = random_inputs(g, 11);
      TensorMap ref = interpret(g, in);
      std::map<std::string, int> codes;
      for (const char* mode : {"class", "hoist"}) {
        setenv("LATHE_LLVM_SHAPE_PARAMS", mode, 1);
        Program p = build_program(g);
        CompileOptions o;
        o.use_cache = false;
        auto compiled = get_backend("llvm").compile(p, o);
        codes[mode] = compiled->codes_compiled;
        Executable exe(std::move(p), compiled, "llvm");
        EXPECT_EQ(test::compare_outputs(exe.run(in), ref), "") << mode << " N=" << n << " H=" << h;
      }
      // (at batch 3 the two GEMMs' job splits differ in structure, not only in constants)
      if (n == 1) EXPECT_LT(codes["hoist"], codes["class"]) << "N=" << n << " H=" << h;
      else EXPECT_LE(codes["hoist"], codes["class"]) << "N=" << n << " H=" << h;
    }
  }
  unsetenv("LATHE_LLVM_SHAPE_PARAMS");
}

}  // namespace
}  // namespace lathe
