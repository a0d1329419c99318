// builtin_rules_test.cpp — before -> after for every kind of built-in rule (C++ mirrors of
// assets/rules/*.lua in builtin_mirror.h). Hash-consing makes "after" exact: the expected
// graph is built with prim:: and compared by pointer.
#include <gtest/gtest.h>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/build.h"
#include "core/rewrite/session.h"
#include "tests/rules/builtin_mirror.h"

namespace lathe {
namespace {

using test::blas_rules;
using test::fold_rules;
using test::simplify_rules;
using test::views_rules;

NodeRef run_rules(NodeRef y, std::vector<Ruleset> rules, bool check = true) {
  SessionOptions o;
  o.check = check;
  RewriteSession s(Graph::from_outputs({{"y", y}}), std::move(rules), o);
  s.run();
  return s.graph().output("y");
}

NodeRef cf(double v, Shape s = {4}) { return prim::constant(v, DType::F32, std::move(s)); }
NodeRef ci(int64_t v, Shape s = {4}) { return prim::constant_int(v, DType::I32, std::move(s)); }

TEST(Simplify, Identities) {
  NodeRef x = prim::input("x", DType::F32, {4});
  NodeRef k = prim::input("k", DType::I32, {4});
  NodeRef b = prim::input("b", DType::Bool, {4});
  auto S = [](NodeRef y) { return run_rules(y, {simplify_rules()}); };
  EXPECT_EQ(S(prim::binary(Op::Add, cf(0), x)), x);
  EXPECT_EQ(S(prim::binary(Op::Mul, x, cf(1))), x);
  EXPECT_EQ(S(prim::unary(Op::Neg, prim::unary(Op::Neg, x))), x);
  EXPECT_EQ(S(prim::unary(Op::Recip, prim::unary(Op::Recip, x))), x);
  EXPECT_EQ(S(prim::binary(Op::Max, x, x)), x);
  EXPECT_EQ(S(prim::where(b, x, x)), x);
  EXPECT_EQ(S(prim::where(prim::constant(1, DType::Bool, {4}), x, cf(5))), x);
  EXPECT_EQ(S(prim::where(prim::constant(0, DType::Bool, {4}), x, cf(5))), cf(5));
  EXPECT_EQ(S(prim::binary(Op::IDiv, k, ci(1))), k);
  EXPECT_EQ(S(prim::binary(Op::And, b, b)), b);
  EXPECT_EQ(S(prim::binary(Op::Xor, k, k)), ci(0));
  EXPECT_EQ(S(prim::copy(prim::copy(x))), prim::copy(x));
  // integer-only identities: applied to i32, left alone for f32 (NaN*0, inf-inf)
  EXPECT_EQ(S(prim::binary(Op::Mul, k, ci(0))), ci(0));
  EXPECT_EQ(S(prim::binary(Op::Add, k, prim::unary(Op::Neg, k))), ci(0));
  NodeRef fx0 = prim::binary(Op::Mul, x, cf(0));
  EXPECT_EQ(S(fx0), fx0);
  // f16: Recip(Recip(x)) kept
  NodeRef h = prim::input("h", DType::F16, {4});
  NodeRef rr = prim::unary(Op::Recip, prim::unary(Op::Recip, h));
  EXPECT_EQ(S(rr), rr);
}

TEST(Simplify, CascadesToAFixpoint) {
  NodeRef x = prim::input("x", DType::F32, {4});
  NodeRef y = prim::binary(Op::Mul, prim::unary(Op::Neg, prim::unary(Op::Neg, prim::binary(Op::Add, x, cf(0)))), cf(1));
  EXPECT_EQ(run_rules(y, {simplify_rules()}), x);
}

TEST(Fold, ScalarConstants) {
  auto F = [](NodeRef y) { return run_rules(y, {fold_rules()}); };
  EXPECT_EQ(F(prim::binary(Op::Add, cf(2), cf(3))), cf(5));
  EXPECT_EQ(F(prim::binary(Op::Mul, cf(2), cf(3))), cf(6));
  EXPECT_EQ(F(prim::binary(Op::Max, cf(2), cf(3))), cf(3));
  EXPECT_EQ(F(prim::binary(Op::IDiv, ci(-7), ci(2))), ci(-3));
  EXPECT_EQ(F(prim::binary(Op::IDiv, ci(7), ci(0))), ci(0));
  EXPECT_EQ(F(prim::binary(Op::Mod, ci(-7), ci(2))), ci(-1));
  EXPECT_EQ(F(prim::binary(Op::CmpLT, cf(2), cf(3))), prim::constant(1, DType::Bool, {4}));
  EXPECT_EQ(F(prim::unary(Op::Neg, cf(2))), cf(-2));
  EXPECT_EQ(F(prim::unary(Op::Sqrt, cf(4))), cf(2));
  // wraps like the integer op: i32 max + 1
  EXPECT_EQ(F(prim::binary(Op::Add, ci(2147483647), ci(1))), ci(-2147483648LL));
  // a scalar-shaped result is broadcast to the root's shape; nested folds cascade
  NodeRef y = prim::binary(Op::Add, prim::binary(Op::Mul, cf(2, {2, 3}), cf(3, {2, 3})), cf(1, {2, 3}));
  EXPECT_EQ(F(y), cf(7, {2, 3}));
}

TEST(Views, ViewOfViewIsRefoldedAfterARewrite) {
  NodeRef x = prim::input("x", DType::F32, {2, 3});
  ViewSpec perm = view_permute(ViewSpec::contiguous({2, 3}), {1, 0});
  NodeRef t = prim::view(x, perm);                        // [3, 2]
  NodeRef mid = prim::binary(Op::Add, t, cf(0, {3, 2}));  // add-zero will remove it
  NodeRef back = prim::view(mid, view_permute(ViewSpec::contiguous({3, 2}), {1, 0}));
  NodeRef y = prim::binary(Op::Mul, back, cf(2, {2, 3}));
  NodeRef after = run_rules(y, {simplify_rules(), views_rules()});
  EXPECT_EQ(after, prim::binary(Op::Mul, x, cf(2, {2, 3})));  // transpose of transpose is gone
  // without the views set the double view stays
  NodeRef after2 = run_rules(y, {simplify_rules()});
  EXPECT_EQ(after2->inputs[0]->op, Op::View);
  EXPECT_EQ(after2->inputs[0]->inputs[0]->op, Op::View);
}

TEST(Blas, FrontendMatmulBecomesSgemmAndKeepsItsValue) {
  Tensor a = input("a", {4, 5}), b = input("b", {5, 3});
  NodeRef y = matmul(a, b).node();
  NodeRef after = run_rules(y, {blas_rules(), views_rules()}, /*check=*/true);
  ASSERT_EQ(after->op, Op::Extern) << describe_node(after);
  EXPECT_EQ(after->attrs.ints, (std::vector<int64_t>{4, 3, 5, 0, 0}));
  EXPECT_EQ(after->inputs[0], a.node());
  EXPECT_EQ(after->inputs[1], b.node());
}

TEST(Blas, TransposedWeightOfLinear) {
  Tensor x = input("x", {4, 5}), w = input("w", {3, 5});
  NodeRef y = linear(x, w, std::nullopt).node();
  NodeRef after = run_rules(y, {blas_rules(), views_rules()}, /*check=*/true);
  ASSERT_EQ(after->op, Op::Extern) << describe_node(after);
  EXPECT_EQ(after->attrs.ints, (std::vector<int64_t>{4, 3, 5, 0, 1}));
  EXPECT_EQ(after->inputs[1], w.node());
}

TEST(Blas, LeavesOtherReductionsAlone) {
  NodeRef x = prim::input("x", DType::F32, {4, 3, 5});
  NodeRef r = prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, x, x), {2});
  EXPECT_EQ(run_rules(r, {blas_rules()}), r);
}

}  // namespace
}  // namespace lathe
