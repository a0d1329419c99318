// llvm_diff_test.cpp — the llvm backend against the interpreter on the fused patterns that
// matter for speed (elementwise chains, softmax, layernorm, matmul) and on f16/bf16, which
// the c backend does not claim. The full op × dtype matrix and the random corpus run on
// llvm through tests/backends (LATHE_TEST_BACKEND=llvm).
#include <cmath>

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

// f32 -> u8 / i8 (QuantizeLinear's last step, the int8 GEMMs' requant epilogue): NaN -> 0,
// truncation toward zero, saturation at the type's ends (infinities, huge values, the edges
// 0/255 and -128/127 and just past them), on vector bodies and scalar tails (odd sizes), and
// the requant form round-then-cast with a zero point at either end.
TEST(LlvmDiff, FloatToInt8Casts) {
  const float nan = std::nanf(""), inf = INFINITY;
  const std::vector<float> special = {nan, -nan, inf, -inf, 0.0f, -0.0f, 0.5f, -0.5f, 0.99f, -0.99f, 1.0f, -1.0f,
                                      126.9f, 127.0f, 127.5f, 128.0f, -127.9f, -128.0f, -128.5f, -129.0f, 254.9f,
                                      255.0f, 255.5f, 256.0f, 300.0f, -300.0f, 1e10f, -1e10f, 3e38f, -3e38f, 1e-40f,
                                      2147483648.0f, -2147483904.0f, 4194304.0f, 12582912.0f, 65535.5f, 65536.0f};
  DiffBatch B("llvm");
  for (int64_t n : {1, 7, 8, 16, 37, 1031}) {
    HostTensor x(DType::F32, {n});
    for (int64_t i = 0; i < n; ++i)
      x.set_f64(i, i % 3 == 2 ? static_cast<float>((i * 7919) % 811) * 0.37f - 20.0f : special[(i * 5) % special.size()]);
    for (DType dt : {DType::U8, DType::I8}) {
      NodeRef in = prim::input("x", DType::F32, {n});
      B.add("cast-" + std::to_string(n), Graph::from_outputs({{"y", prim::cast(in, dt)}}), TensorMap{{"x", x}});
      // round half to even by 1.5 * 2^23, then a zero point at the type's end, then the cast
      for (double zp : dt == DType::U8 ? std::vector<double>{0, 255} : std::vector<double>{-128, 127}) {
        NodeRef s = prim::binary(Op::Mul, in, prim::constant(0.73, DType::F32, {n}));
        NodeRef r = prim::binary(Op::Add, prim::binary(Op::Max, s, prim::constant(-4194304.0, DType::F32, {n})),
                                 prim::constant(12582912.0, DType::F32, {n}));
        r = prim::binary(Op::Add, prim::binary(Op::Add, r, prim::constant(-12582912.0, DType::F32, {n})),
                         prim::constant(zp, DType::F32, {n}));
        B.add("requant-" + std::to_string(n), Graph::from_outputs({{"y", prim::cast(r, dt)}}), TensorMap{{"x", x}});
      }
    }
  }
  EXPECT_EQ(B.run(), 0);
}

}  // namespace
}  // namespace lathe
