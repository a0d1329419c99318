// llvm_diff_test.cpp — the llvm backend against the interpreter on the fused patterns that
// matter for speed (elementwise chains, softmax, layernorm, matmul) and on f16/bf16, which
// the c backend does not claim. The full op × dtype matrix and the random corpus run on
// llvm through tests/backends (LATHE_TEST_BACKEND=llvm).
#include "core/frontend/frontend.h"
#include "core/ir/build.h"
#include "../backends/diff_util.h"

namespace lathe {
namespace {

using test::DiffBatch;

Graph one(const Tensor& t) { return Graph::from_outputs({{"y", t.node()}}); }

TEST(LlvmDiff, FusedPatterns) {
  DiffBatch B("llvm");
  Tensor a = input("a", {37, 129});
  Tensor b = input("b", {37, 129});
  Tensor c = input("c", {129});
  B.add("eltwise", one(exp(relu(a * b + c) * 0.5)));
  B.add("softmax", one(softmax(a, -1)));
  B.add("layernorm", one(layer_norm(a, 1, std::nullopt, std::nullopt, 1e-5)));
  Tensor w = input("w", {129, 67});
  B.add("matmul", one(matmul(a, w)));
  Tensor big = input("m", {96, 256});
  Tensor wb = input("wb", {256, 160});
  B.add("matmul-big", one(matmul(big, wb)));
  B.add("log-sin-sqrt", one(log(abs(a) + 1.0) + sin(a) + sqrt(abs(b))));
  EXPECT_EQ(B.run(), 0);
}

TEST(LlvmDiff, HalfPrecision) {
  DiffBatch B("llvm");
  for (DType dt : {DType::F16, DType::BF16}) {
    NodeRef x = prim::input("x", dt, {5, 33});
    NodeRef y = prim::input("y", dt, {5, 33});
    B.add("add", Graph::from_outputs({{"y", prim::binary(Op::Add, x, y)}}));
    B.add("mul-exp", Graph::from_outputs({{"y", prim::unary(Op::Exp2, prim::binary(Op::Mul, x, y))}}));
    B.add("sum", Graph::from_outputs({{"y", prim::reduce(ReduceOp::Add, x, {1})}}));
    B.add("cast", Graph::from_outputs({{"y", prim::cast(x, DType::F32)}}));
  }
  EXPECT_EQ(B.run(), 0);
}

TEST(LlvmDiff, IntegerEdgeCases) {
  DiffBatch B("llvm");
  for (DType dt : {DType::I8, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64}) {
    NodeRef x = prim::input("x", dt, {64});
    NodeRef y = prim::input("y", dt, {64});
    B.add("idiv", Graph::from_outputs({{"y", prim::binary(Op::IDiv, x, y)}}));
    B.add("mod", Graph::from_outputs({{"y", prim::binary(Op::Mod, x, y)}}));
    B.add("max", Graph::from_outputs({{"y", prim::binary(Op::Max, x, y)}}));
    B.add("lt", Graph::from_outputs({{"y", prim::binary(Op::CmpLT, x, y)}}));
  }
  EXPECT_EQ(B.run(), 0);
}

}  // namespace
}  // namespace lathe
