// reduce_stash_test.cpp — the lowering of fused reductions that share an expensive
// subexpression with the kernel's output (softmax's exp(x - max)): the reduction loop
// stores it into the output row and the output loop reads it back, so each element
// computes one exp. Checks the loop IR (one Exp2, two stores) and the results against the
// interpreter on odd sizes, rows of length 1, symbolic dims, other dtypes and the cases
// where the stash must not be used.
#include "core/frontend/frontend.h"
#include "core/ir/build.h"
#include "core/schedule/memory_plan.h"
#include "diff_util.h"

namespace lathe {
namespace {

using test::DiffBatch;

Graph one(const Tensor& t) { return Graph::from_outputs({{"y", t.node()}}); }

int count_ops(const loop::Expr& e, Op op) {
  int n = e.kind == loop::ExprKind::Unary && e.op == op;
  for (auto& a : e.args) n += count_ops(*a, op);
  return n;
}

// Exp2 nodes and Store statements in every kernel's loop IR.
struct Census {
  int exp2 = 0, stores = 0, loads_of_out = 0;
};
Census census(const Program& p) {
  Census c;
  for (auto& f : p.funcs) {
    loop::walk(f.body, [&](const loop::Stmt& s) {
      c.stores += s.kind == loop::StmtKind::Store;
      return true;
    });
    std::function<void(const loop::ExprRef&)> outs = [&](const loop::ExprRef& e) {
      c.loads_of_out += e->kind == loop::ExprKind::Load && e->buffer == 0;
      for (auto& a : e->args) outs(a);
    };
    loop::walk_exprs(f.body, [&](const loop::ExprRef& e) {
      c.exp2 += count_ops(*e, Op::Exp2);
      outs(e);
    });
  }
  return c;
}

TEST(ReduceStash, SoftmaxComputesOneExpPerElement) {
  for (auto shape : std::vector<std::vector<int64_t>>{{64, 1000}, {7, 3, 129}}) {
    Tensor x = input("x", Shape(shape.begin(), shape.end()));
    Program p = build_program(one(softmax(x, -1)));
    ASSERT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
    Census c = census(p);
    EXPECT_EQ(c.exp2, 1) << test::loop_ir_of(p);
    EXPECT_EQ(c.stores, 2) << test::loop_ir_of(p);        // the stash, then the result
    EXPECT_EQ(c.loads_of_out, 1) << test::loop_ir_of(p);  // read back once
  }
}

TEST(ReduceStash, CheapSharedWorkIsRecomputed) {
  // layernorm shares x - mean between the variance and the output: cheap, no stash
  Tensor x = input("x", {16, 300});
  Program p = build_program(one(layer_norm(x, 1, std::nullopt, std::nullopt, 1e-5)));
  Census c = census(p);
  EXPECT_EQ(c.stores, 1) << test::loop_ir_of(p);
  EXPECT_EQ(c.loads_of_out, 0) << test::loop_ir_of(p);
}

TEST(ReduceStash, StashKernelIsNotComputedInPlace) {
  // z is an intermediate whose life ends at the softmax kernel: writing the stash into an
  // output that shared z's memory would clobber z before the row is done
  Tensor a = input("a", {24, 40}), w = input("w", {40, 33});
  Program p = build_program(one(softmax(matmul(a, w), -1)));
  MemoryPlan plan = plan_memory(p.kg, p.funcs, {});
  for (auto& f : p.funcs) {
    int stores = 0;
    loop::walk(f.body, [&](const loop::Stmt& s) { stores += s.kind == loop::StmtKind::Store; return true; });
    if (stores > 1) {
      EXPECT_EQ(plan.in_place_of[f.buffers[0].buffer], -1) << loop::print_loop(f);
    }
  }
}

TEST(ReduceStash, MatchesInterpreter) {
  DiffBatch B;
  for (auto shape : std::vector<std::vector<int64_t>>{{1, 1}, {5, 1}, {1, 7}, {3, 17}, {37, 129}, {2, 3, 31}, {130, 1000}}) {
    Tensor x = input("x", Shape(shape.begin(), shape.end()));
    std::string s;
    for (auto d : shape) s += std::to_string(d) + "x";
    B.add("softmax " + s, one(softmax(x, -1)));
    B.add("log_softmax " + s, one(log_softmax(x, -1)));
  }
  Tensor x = input("x", {9, 65});
  // the stashed value used twice more in the output, and next to a second reduction
  Tensor m = max(x, {1}, true);
  Tensor e = exp(x - m);
  Tensor s = sum(e, {1}, true);
  B.add("exp used thrice", one(e / s + e * 0.5));
  B.add("two sums of exp", one(e / s + sum(e * e, {1}, true)));
  // exp read transposed by the output: no stash (a square row/column mix-up would be wrong)
  Tensor q = input("q", {33, 33});
  Tensor eq = exp(q - max(q, {1}, true));
  B.add("transposed read", one(eq / sum(eq, {1}, true) + transpose(eq, 0, 1)));
  // softmax over a middle axis, of a permuted view, and of an expression
  Tensor t = input("t", {4, 13, 6});
  B.add("middle axis", one(softmax(t, 1)));
  B.add("permuted", one(softmax(transpose(t, 1, 2), -1)));
  B.add("of expression", one(softmax(t * 2.0 + 1.0, -1) * t));
  EXPECT_EQ(B.run(), 0);
}

TEST(ReduceStash, OtherDtypes) {
  if (test::test_backend() != "llvm") GTEST_SKIP() << "f16/bf16 are claimed by llvm only";
  DiffBatch B;
  for (DType dt : {DType::F64, DType::F16, DType::BF16}) {
    Tensor x = input("x", {6, 77}, dt);
    B.add(std::string("softmax ") + std::string(dtype_name(dt)), one(softmax(x, -1)));
  }
  EXPECT_EQ(B.run(), 0);
}

TEST(ReduceStash, SymbolicDims) {
  Tensor x = input("x", {SymInt::var("B"), SymInt::var("N")});
  Graph g = one(softmax(x, -1));
  Program p = build_program(g);
  EXPECT_EQ(census(p).exp2, 1) << test::loop_ir_of(p);
  Executable exe = compile_graph(g, test::test_backend());
  for (auto [b, n] : std::vector<std::pair<int64_t, int64_t>>{{5, 8}, {3, 1}, {1, 1}, {11, 257}}) {
    TensorMap in{{"x", random_tensor(DType::F32, {b, n}, static_cast<uint64_t>(b * 1000 + n))}};
    EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in)), "") << b << "x" << n;
  }
}

}  // namespace
}  // namespace lathe
