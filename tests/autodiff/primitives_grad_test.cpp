// primitives_grad_test.cpp — finite-difference checks of the derivative rule of every
// differentiable primitive (Add, Mul, Neg, Recip, Sin, Exp2, Log2, Sqrt, Cast, Max, Mod,
// Where, Reduce add/max/mul, Copy, Take, View in all its forms) and of grad()'s plumbing.
#include "tests/autodiff/gradcheck.h"

namespace lathe {
namespace {

using namespace lathe::testing;
using V = std::vector<Tensor>;

auto positive = [](double v) { return 0.5 + std::fabs(v); };

Tensor P(Op op, const Tensor& x) { return Tensor(prim::unary(op, x.node())); }
Tensor P(Op op, const Tensor& a, const Tensor& b) { return Tensor(prim::binary(op, a.node(), b.node())); }

TEST(GradPrimitives, Unary) {
  gradcheck("Neg", {{{3, 2}}}, [](const V& x) { return P(Op::Neg, x[0]); });
  gradcheck("Recip", {{{5}, positive}}, [](const V& x) { return P(Op::Recip, x[0]); });
  gradcheck("Sin", {{{5}}}, [](const V& x) { return P(Op::Sin, x[0]); });
  gradcheck("Exp2", {{{5}}}, [](const V& x) { return P(Op::Exp2, x[0]); });
  gradcheck("Log2", {{{5}, positive}}, [](const V& x) { return P(Op::Log2, x[0]); });
  gradcheck("Sqrt", {{{5}, positive}}, [](const V& x) { return P(Op::Sqrt, x[0]); });
  gradcheck("Copy", {{{2, 3}}}, [](const V& x) { return Tensor(prim::copy(x[0].node())); });
  // Cast: central differences through f32 rounding are noise, so check the rule exactly:
  // d/dx sum(f32(x) * 3) = 3, delivered back in x's dtype.
  Tensor x = input("x", {2}, DType::F64);
  auto g = grad(sum(to(x, DType::F32) * 3.0), {x});
  EXPECT_EQ(g[0].dtype(), DType::F64);
  EXPECT_EQ(values(run1(g[0], {{"x", host(DType::F64, {2}, {0.1, -2})}})), (std::vector<double>{3, 3}));
}

TEST(GradPrimitives, Binary) {
  gradcheck("Add", {{{2, 3}}, {{2, 3}}}, [](const V& x) { return P(Op::Add, x[0], x[1]); });
  gradcheck("Mul", {{{2, 3}}, {{2, 3}}}, [](const V& x) { return P(Op::Mul, x[0], x[1]); });
  gradcheck("Max", {{{6}}, {{6}}}, [](const V& x) { return P(Op::Max, x[0], x[1]); });
  gradcheck("Mod", {{{5}, [](double v) { return 3 * v; }}, {{5}, positive}},
            [](const V& x) { return P(Op::Mod, x[0], x[1]); });
  gradcheck("same input twice", {{{4}}}, [](const V& x) { return P(Op::Mul, x[0], x[0]); });
}

TEST(GradPrimitives, MaxTiesSplitHalf) {
  Tensor a = input("a", {1}, DType::F64);
  Tensor y = maximum(a, a * 1.0);  // a == a: a tie
  auto g = grad(sum(Tensor(prim::binary(Op::Max, a.node(), zeros({1}, DType::F64).node()))), {a});
  HostTensor r = run1(g[0], {{"a", host(DType::F64, {1}, {0})}});
  EXPECT_DOUBLE_EQ(r.get_f64(0), 0.5);
  (void)y;
}

TEST(GradPrimitives, Where) {
  gradcheck("Where", {{{6}}, {{6}}, {{6}}},
            [](const V& x) { return where(gt(x[0], 0.0), x[1] * x[0], x[2]); });
}

TEST(GradPrimitives, Reduce) {
  gradcheck("Reduce add", {{{2, 3, 4}}}, [](const V& x) { return sum(x[0], {0, 2}, true); });
  gradcheck("Reduce max", {{{3, 4}}}, [](const V& x) { return max(x[0], {1}); });
  gradcheck("Reduce mul", {{{3, 4}}}, [](const V& x) { return prod(x[0], {1}); });
  // one zero in a row and two zeros in another: exact rule, checked by hand
  Tensor x = input("x", {2, 3}, DType::F64);
  auto g = grad(sum(prod(x, {1})), {x});
  HostTensor r = run1(g[0], {{"x", host(DType::F64, {2, 3}, {2, 0, 3, 0, 5, 0})}});
  EXPECT_EQ(values(r), (std::vector<double>{0, 6, 0, 0, 0, 0}));
}

TEST(GradPrimitives, ViewsOfEveryKind) {
  gradcheck("permute", {{{2, 3, 4}}}, [](const V& x) { return permute(x[0], {2, 0, 1}); });
  gradcheck("expand", {{{3, 1}}}, [](const V& x) { return expand(x[0], {2, 3, 4}); });
  gradcheck("shrink", {{{4, 5}}}, [](const V& x) { return narrow(narrow(x[0], 0, 1, 2), 1, 2, 3); });
  gradcheck("pad", {{{2, 3}}}, [](const V& x) { return pad(x[0], {{1, 2}, {0, 1}}); });
  gradcheck("pad value", {{{2, 3}}}, [](const V& x) { return pad(x[0], {{1, 0}, {1, 1}}, 2.5); });
  gradcheck("flip", {{{3, 4}}}, [](const V& x) { return flip(x[0], {0, 1}); });
  gradcheck("reshape", {{{2, 6}}}, [](const V& x) { return reshape(x[0], {3, 2, 2}); });
  gradcheck("reshape of permute", {{{2, 3}}}, [](const V& x) { return reshape(transpose(x[0], 0, 1), {6}); });
  gradcheck("strided slice", {{{9}}}, [](const V& x) { return slice(x[0], 0, 1, 8, 3); });
  gradcheck("negative step", {{{3, 7}}}, [](const V& x) { return slice(x[0], 1, 6, 0, -2); });
  gradcheck("overlapping windows", {{{1, 1, 5, 5}}}, [](const V& x) {
    ViewSpec v;
    v.shape = {1, 1, 3, 3, 3, 3};
    v.strides = {25, 25, 5, 1, 5, 1};
    return Tensor(prim::view(x[0].node(), v));
  });
}

TEST(GradPrimitives, Take) {
  gradcheck("Take", {{{3, 4}}, {{3, 5}, {}, false, DType::I64, {0, 3, 3, -1, 1, 2, 2, 2, 0, 1, 1, 0, 3, 2, 1}}},
            [](const V& x) { return Tensor(prim::take(x[0].node(), x[1].node(), 1)); });
}

TEST(GradPrimitives, UnrelatedParamGetsZerosAndIntPathsStop) {
  Tensor a = input("a", {2}, DType::F64), b = input("b", {2}, DType::F64);
  Tensor loss = sum(to(to(a, DType::I32), DType::F64) + a * 2.0);
  auto g = grad(loss, {a, b});
  auto r = run_all(g, {{"a", host(DType::F64, {2}, {1.5, 2})}, {"b", host(DType::F64, {2}, {0, 0})}});
  EXPECT_EQ(values(r[0]), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 0}));
}

TEST(GradPrimitives, BackwardProvenance) {
  Tensor a = input("a", {3});
  Tensor y;
  {
    ProvenanceScope ps("layer");
    y = sum(sin(a));
  }
  auto g = grad(y, {a});
  EXPECT_TRUE(g[0].node()->prov.backward);
  EXPECT_EQ(g[0].node()->prov.path.rfind("grad/", 0), 0u) << g[0].node()->prov.path;
  EXPECT_TRUE(current_provenance().stack.empty());
  EXPECT_FALSE(current_provenance().backward);
}

TEST(GradPrimitives, Errors) {
  Tensor i = input("i", {2}, DType::I32);
  EXPECT_THROW(grad(sum(i), {i}), UserError);
  Tensor a = input("a", {2});
  EXPECT_THROW(sgd_update(a * 2.0, a, 0.1), UserError);
  EXPECT_THROW(sgd_update(a, input("g", {3}), 0.1), UserError);
}

TEST(Sgd, AssignUpdatesTheParameter) {
  Tensor w = input("w", {2});
  Tensor loss = sum(w * w);
  auto g = grad(loss, {w});
  Tensor upd = sgd_update(w, g[0], 0.25);
  Graph gr = Graph::from_outputs({{"w.new", upd.node()}});
  TensorMap updated;
  TensorMap out = interpret(gr, {{"w", host_f32({2}, {1, -2})}}, &updated);
  EXPECT_EQ(values(out.at("w.new")), (std::vector<double>{0.5, -1}));
  EXPECT_EQ(values(updated.at("w")), (std::vector<double>{0.5, -1}));
}

}  // namespace
}  // namespace lathe
