// fused_test.cpp — the interpreter's one-pass Reduce(Mul(View a, View b)) (matmul and conv
// as expand-multiply-sum) must give exactly what the unfused nodes give, for every dtype,
// with permuted, expanded and padded operands; and sgemm agrees with it.
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "helpers.h"

namespace lathe::test {
namespace {

struct Matmul {
  NodeRef a, b, prod, out;
};

// out[m, n] = Σ_k a[m, k] · b[k, n] as the frontend writes it: a -> [M, N, K] by
// reshape+expand, b -> permuted to [N, K] then expanded to [M, N, K], Mul, Reduce{add}.
Matmul matmul(DType dt, int64_t M, int64_t N, int64_t K, ReduceOp op = ReduceOp::Add) {
  Matmul r;
  r.a = prim::input("a", dt, S({M, K}));
  r.b = prim::input("b", dt, S({K, N}));
  auto a3 = view_expand(*view_reshape(ViewSpec::contiguous(r.a->shape), S({M, 1, K})), S({M, N, K}));
  auto bt = view_permute(ViewSpec::contiguous(r.b->shape), {1, 0});
  auto b3 = view_expand(*view_reshape(bt, S({1, N, K})), S({M, N, K}));
  r.prod = prim::binary(Op::Mul, prim::view(r.a, a3), prim::view(r.b, b3));
  r.out = prim::reduce(op, r.prod, {2});
  return r;
}

TEST(Fused, MatmulMatchesUnfusedBitForBitEveryDType) {
  for (DType dt : kAllDTypes)
    for (ReduceOp op : {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul}) {
      Matmul m = matmul(dt, 5, 4, 7, op);
      TensorMap in{{"a", random_tensor(dt, {5, 7}, 1)}, {"b", random_tensor(dt, {7, 4}, 2)}};
      auto fused = interpret(Graph::from_outputs({{"y", m.out}}), in).at("y");
      // Making the product an output too keeps it from being fused.
      auto plain = interpret(Graph::from_outputs({{"y", m.out}, {"p", m.prod}}), in).at("y");
      EXPECT_EQ(fused.shape(), (std::vector<int64_t>{5, 4, 1}));
      EXPECT_TRUE(fused.same_content(plain)) << dtype_name(dt) << " " << reduce_op_name(op);
    }
}

TEST(Fused, TheProductAndViewsAreNeverMaterialized) {
  Matmul m = matmul(DType::F32, 3, 3, 3);
  std::vector<NodeTiming> timings;
  InterpOptions o;
  o.timings = &timings;
  interpret(Graph::from_outputs({{"y", m.out}}),
            {{"a", random_tensor(DType::F32, {3, 3}, 1)}, {"b", random_tensor(DType::F32, {3, 3}, 2)}}, o);
  ASSERT_EQ(timings.size(), 1u);  // only the Reduce runs
  EXPECT_EQ(timings[0].node, m.out);
}

TEST(Fused, HalfProductsAreRoundedBeforeSumming) {
  // 1.001 * 1.001 rounds in f16 before the sum; the fused kernel must round it too.
  Matmul m = matmul(DType::F16, 1, 1, 2);
  TensorMap in{{"a", tensor(DType::F16, {1, 2}, {1.001, 3.3})}, {"b", tensor(DType::F16, {2, 1}, {1.001, 7.7})}};
  auto fused = interpret(Graph::from_outputs({{"y", m.out}}), in).at("y");
  auto plain = interpret(Graph::from_outputs({{"y", m.out}, {"p", m.prod}}), in).at("y");
  EXPECT_TRUE(fused.same_content(plain));
}

TEST(Fused, AgreesWithSgemm) {
  Matmul m = matmul(DType::F32, 6, 5, 9);
  NodeRef c = prim::extern_call("sgemm", {m.a, m.b}, DType::F32, S({6, 5}), {6, 5, 9, 0, 0});
  TensorMap in{{"a", random_tensor(DType::F32, {6, 9}, 3)}, {"b", random_tensor(DType::F32, {9, 5}, 4)}};
  auto out = interpret(Graph::from_outputs({{"y", m.out}, {"c", c}}), in);
  // sgemm sums exact products; Mul rounds each product to f32 first: close, not equal.
  std::string why;
  EXPECT_TRUE(allclose(out.at("y").reshaped({6, 5}), out.at("c"), 1e-6, 1e-6, &why)) << why;
}

TEST(Fused, PaddedOperandAndSharedView) {
  // A masked (padded) view is materialized but the Mul is still fused; a view read twice
  // by the same Mul is read in place.
  NodeRef x = prim::input("x", DType::F32, S({3}));
  NodeRef padded = prim::view(x, view_pad(ViewSpec::contiguous(x->shape), {{1, 1}}));  // [5]
  NodeRef flipped = prim::view(x, view_pad(view_flip(ViewSpec::contiguous(x->shape), {0}), {{1, 1}}));
  NodeRef dot = prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, padded, flipped), {0});
  NodeRef sq = prim::view(x, view_flip(ViewSpec::contiguous(x->shape), {0}));
  NodeRef norm = prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, sq, sq), {0});
  auto out = interpret(Graph::from_outputs({{"dot", dot}, {"norm", norm}}), {{"x", tensor(DType::F32, {3}, {1, 2, 3})}});
  expect_values(out.at("dot"), {1 * 3 + 2 * 2 + 3 * 1});
  expect_values(out.at("norm"), {14});
}

TEST(Fused, ProductWithOtherReadersIsNotFusedButStillCorrect) {
  NodeRef x = prim::input("x", DType::I32, S({2, 2}));
  NodeRef p = prim::binary(Op::Mul, x, x);
  NodeRef s = prim::reduce(ReduceOp::Add, p, {0, 1});
  NodeRef t = prim::binary(Op::Add, p, p);
  auto out = interpret(Graph::from_outputs({{"s", s}, {"t", t}}), {{"x", itensor(DType::I32, {2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(ivalues(out.at("s")), (std::vector<int64_t>{30}));
  EXPECT_EQ(ivalues(out.at("t")), (std::vector<int64_t>{2, 8, 18, 32}));
}

TEST(Fused, SymbolicViewOutOfBoundsIsStillAUserError) {
  NodeRef x = prim::input("x", DType::F32, {SymInt::var("N")});
  ViewSpec v;
  v.shape = {SymInt::var("N") + 1};
  v.strides = {1};
  NodeRef y = prim::view(x, v);
  NodeRef r = prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, y, y), {0});
  EXPECT_THROW(run(r, {{"x", tensor(DType::F32, {3}, {1, 2, 3})}}), UserError);
}

TEST(Fused, SizeZeroReducedAxis) {
  Matmul m = matmul(DType::F32, 2, 3, 0);
  auto y = interpret(Graph::from_outputs({{"y", m.out}}), {{"a", HostTensor(DType::F32, {2, 0})}, {"b", HostTensor(DType::F32, {0, 3})}}).at("y");
  expect_values(y, {0, 0, 0, 0, 0, 0});
}

}  // namespace
}  // namespace lathe::test
