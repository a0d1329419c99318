// elementwise_test.cpp — unary, binary, ternary and Cast ops in the interpreter, with the
// edge cases README.md promises: NaN/inf, integer division and modulo signs, wrapping
// overflow, f16/bf16 rounding, saturating casts, and every dtype.
#include "helpers.h"

namespace lathe::test {
namespace {

HostTensor bin(Op op, const HostTensor& a, const HostTensor& b) {
  Shape s = shape_from(a.shape());
  NodeRef x = prim::input("a", a.dtype(), s), y = prim::input("b", b.dtype(), s);
  return run(prim::binary(op, x, y), {{"a", a}, {"b", b}});
}
HostTensor un(Op op, const HostTensor& a) {
  return run(prim::unary(op, prim::input("a", a.dtype(), shape_from(a.shape()))), {{"a", a}});
}
HostTensor cast(const HostTensor& a, DType to) {
  return run(prim::cast(prim::input("a", a.dtype(), shape_from(a.shape())), to), {{"a", a}});
}

TEST(Elementwise, FloatAddMulWithInfAndNaN) {
  auto a = tensor(DType::F32, {5}, {1.5, kInf, -kInf, kNaN, 0.1});
  auto b = tensor(DType::F32, {5}, {2, 1, kInf, 1, 0.2});
  expect_values(bin(Op::Add, a, b), {3.5, kInf, kNaN, kNaN, double(0.1f + 0.2f)});
  expect_values(bin(Op::Mul, a, b), {3, kInf, -kInf, kNaN, double(0.1f * 0.2f)});
  auto z = tensor(DType::F32, {2}, {kInf, 0});
  expect_values(bin(Op::Mul, z, tensor(DType::F32, {2}, {0, -1})), {kNaN, 0});
}

TEST(Elementwise, IntegerAddMulWrap) {
  EXPECT_EQ(ivalues(bin(Op::Add, itensor(DType::I8, {2}, {127, -128}), itensor(DType::I8, {2}, {1, -1}))),
            (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(ivalues(bin(Op::Add, itensor(DType::U8, {1}, {255}), itensor(DType::U8, {1}, {1}))), (std::vector<int64_t>{0}));
  int64_t imax = std::numeric_limits<int64_t>::max(), imin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ivalues(bin(Op::Add, itensor(DType::I64, {1}, {imax}), itensor(DType::I64, {1}, {1}))),
            (std::vector<int64_t>{imin}));
  EXPECT_EQ(ivalues(bin(Op::Add, itensor(DType::I32, {1}, {2147483647}), itensor(DType::I32, {1}, {1}))),
            (std::vector<int64_t>{-2147483648LL}));
  EXPECT_EQ(ivalues(bin(Op::Mul, itensor(DType::I16, {1}, {300}), itensor(DType::I16, {1}, {300}))),
            (std::vector<int64_t>{24464}));  // 90000 mod 2^16
  EXPECT_EQ(ivalues(bin(Op::Mul, itensor(DType::I32, {1}, {65536}), itensor(DType::I32, {1}, {65536}))),
            (std::vector<int64_t>{0}));
  EXPECT_EQ(ivalues(bin(Op::Mul, itensor(DType::I64, {1}, {imax}), itensor(DType::I64, {1}, {2}))),
            (std::vector<int64_t>{-2}));
  EXPECT_EQ(ivalues(un(Op::Neg, itensor(DType::I8, {2}, {-128, 5}))), (std::vector<int64_t>{-128, -5}));
  EXPECT_EQ(ivalues(un(Op::Neg, itensor(DType::U8, {2}, {1, 0}))), (std::vector<int64_t>{255, 0}));
}

TEST(Elementwise, IntegerDivisionTruncatesAndDivByZeroIsZero) {
  auto a = itensor(DType::I32, {7}, {7, -7, 7, -7, 5, -2147483648LL, 0});
  auto b = itensor(DType::I32, {7}, {2, 2, -2, -2, 0, -1, 3});
  EXPECT_EQ(ivalues(bin(Op::IDiv, a, b)), (std::vector<int64_t>{3, -3, -3, 3, 0, -2147483648LL, 0}));
  EXPECT_EQ(ivalues(bin(Op::Mod, a, b)), (std::vector<int64_t>{1, -1, 1, -1, 0, 0, 0}));
  auto c = itensor(DType::I8, {2}, {-128, -128}), d = itensor(DType::I8, {2}, {-1, 0});
  EXPECT_EQ(ivalues(bin(Op::IDiv, c, d)), (std::vector<int64_t>{-128, 0}));
  int64_t imin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ivalues(bin(Op::IDiv, itensor(DType::I64, {1}, {imin}), itensor(DType::I64, {1}, {-1}))),
            (std::vector<int64_t>{imin}));
  EXPECT_EQ(ivalues(bin(Op::IDiv, itensor(DType::U8, {2}, {200, 9}), itensor(DType::U8, {2}, {7, 0}))),
            (std::vector<int64_t>{28, 0}));
}

TEST(Elementwise, FloatModIsFmod) {
  auto a = tensor(DType::F32, {5}, {7.5, -7.5, 7.5, 5, kInf});
  auto b = tensor(DType::F32, {5}, {2, 2, -2, 0, 1});
  expect_values(bin(Op::Mod, a, b), {1.5, -1.5, 1.5, kNaN, kNaN});
  expect_values(bin(Op::Mod, tensor(DType::F64, {1}, {1e300}), tensor(DType::F64, {1}, {3})), {std::fmod(1e300, 3.0)});
}

TEST(Elementwise, MaxPropagatesNaN) {
  auto a = tensor(DType::F32, {4}, {1, kNaN, 3, -kInf});
  auto b = tensor(DType::F32, {4}, {kNaN, 2, 2, -5});
  expect_values(bin(Op::Max, a, b), {kNaN, kNaN, 3, -5});
  EXPECT_EQ(ivalues(bin(Op::Max, itensor(DType::I8, {2}, {-3, 4}), itensor(DType::I8, {2}, {-4, 5}))),
            (std::vector<int64_t>{-3, 5}));
  EXPECT_EQ(ivalues(bin(Op::Max, itensor(DType::Bool, {2}, {0, 1}), itensor(DType::Bool, {2}, {0, 0}))),
            (std::vector<int64_t>{0, 1}));
}

TEST(Elementwise, ComparisonsWithNaN) {
  auto a = tensor(DType::F32, {4}, {1, kNaN, 2, -0.0});
  auto b = tensor(DType::F32, {4}, {2, 1, kNaN, 0.0});
  EXPECT_EQ(ivalues(bin(Op::CmpLT, a, b)), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(ivalues(bin(Op::CmpNE, a, b)), (std::vector<int64_t>{1, 1, 1, 0}));
  auto n = tensor(DType::F64, {1}, {kNaN});
  EXPECT_EQ(ivalues(bin(Op::CmpNE, n, n)), (std::vector<int64_t>{1}));
  EXPECT_EQ(ivalues(bin(Op::CmpLT, itensor(DType::U8, {2}, {1, 200}), itensor(DType::U8, {2}, {200, 1}))),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(bin(Op::CmpLT, n, n).dtype(), DType::Bool);
}

TEST(Elementwise, LogicalForBoolBitwiseForInts) {
  auto p = itensor(DType::Bool, {4}, {0, 0, 1, 1}), q = itensor(DType::Bool, {4}, {0, 1, 0, 1});
  EXPECT_EQ(ivalues(bin(Op::And, p, q)), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(ivalues(bin(Op::Or, p, q)), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(ivalues(bin(Op::Xor, p, q)), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(ivalues(un(Op::Not, p)), (std::vector<int64_t>{1, 1, 0, 0}));
  auto a = itensor(DType::I32, {2}, {12, -1}), b = itensor(DType::I32, {2}, {10, 255});
  EXPECT_EQ(ivalues(bin(Op::And, a, b)), (std::vector<int64_t>{8, 255}));
  EXPECT_EQ(ivalues(bin(Op::Or, a, b)), (std::vector<int64_t>{14, -1}));
  EXPECT_EQ(ivalues(bin(Op::Xor, a, b)), (std::vector<int64_t>{6, -256}));
  EXPECT_EQ(ivalues(un(Op::Not, a)), (std::vector<int64_t>{-13, 0}));
  EXPECT_EQ(ivalues(un(Op::Not, itensor(DType::U8, {2}, {0, 15}))), (std::vector<int64_t>{255, 240}));
}

TEST(Elementwise, FloatUnaryEdgeCases) {
  auto x = tensor(DType::F32, {6}, {0, -0.0, 4, -1, kInf, kNaN});
  expect_values(un(Op::Recip, x), {kInf, -kInf, 0.25, -1, 0, kNaN});
  expect_values(un(Op::Sqrt, x), {0, 0, 2, kNaN, kInf, kNaN});
  expect_values(un(Op::Log2, x), {-kInf, -kInf, 2, kNaN, kInf, kNaN});
  expect_values(un(Op::Exp2, tensor(DType::F32, {4}, {3, -kInf, kInf, 200})), {8, 0, kInf, kInf});
  expect_values(un(Op::Sin, tensor(DType::F32, {3}, {0, kInf, kNaN})), {0, kNaN, kNaN});
  expect_values(un(Op::Sin, tensor(DType::F32, {1}, {1})), {double(std::sin(1.0f))});
  expect_values(un(Op::Sin, tensor(DType::F64, {1}, {1})), {std::sin(1.0)});
  EXPECT_TRUE(std::signbit(un(Op::Neg, tensor(DType::F32, {1}, {0})).get_f64(0)));
}

TEST(Elementwise, HalfPrecisionRoundsToNearestEven) {
  // f16 has 10 mantissa bits: 1 + 2^-11 is a tie that goes to even (1), 1 + 3·2^-11 to 1 + 2^-9.
  auto one = tensor(DType::F16, {3}, {1, 1, 60000});
  auto tiny = tensor(DType::F16, {3}, {std::ldexp(1.0, -11), 3 * std::ldexp(1.0, -11), 60000});
  expect_values(bin(Op::Add, one, tiny), {1, 1 + std::ldexp(1.0, -9), kInf});
  // bf16 has 7: 256 + 1 is a tie that goes to 256; 256 + 3 -> 260.
  expect_values(bin(Op::Add, tensor(DType::BF16, {2}, {256, 256}), tensor(DType::BF16, {2}, {1, 3})), {256, 260});
  expect_values(un(Op::Sqrt, tensor(DType::F16, {1}, {2})), {double(f16_to_f32(f32_to_f16(std::sqrt(2.0f))))});
}

TEST(Elementwise, CastFloatToIntTruncatesAndSaturates) {
  auto x = tensor(DType::F32, {7}, {3.7, -3.7, 300, -300, kNaN, kInf, -kInf});
  EXPECT_EQ(ivalues(cast(x, DType::I8)), (std::vector<int64_t>{3, -3, 127, -128, 0, 127, -128}));
  EXPECT_EQ(ivalues(cast(x, DType::U8)), (std::vector<int64_t>{3, 0, 255, 0, 0, 255, 0}));
  EXPECT_EQ(ivalues(cast(tensor(DType::F64, {2}, {3e9, -3e9}), DType::I32)),
            (std::vector<int64_t>{2147483647, -2147483648LL}));
  EXPECT_EQ(ivalues(cast(tensor(DType::F32, {2}, {1e30, -1e30}), DType::I64)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(ivalues(cast(tensor(DType::F32, {4}, {0, -0.0, 0.5, kNaN}), DType::Bool)), (std::vector<int64_t>{0, 0, 1, 1}));
}

TEST(Elementwise, CastBetweenIntsWrapsAndToFloatRounds) {
  EXPECT_EQ(ivalues(cast(itensor(DType::I32, {3}, {300, -129, 255}), DType::I8)), (std::vector<int64_t>{44, 127, -1}));
  EXPECT_EQ(ivalues(cast(itensor(DType::I8, {1}, {-1}), DType::U8)), (std::vector<int64_t>{255}));
  EXPECT_EQ(ivalues(cast(itensor(DType::I32, {3}, {0, 5, -1}), DType::Bool)), (std::vector<int64_t>{0, 1, 1}));
  expect_values(cast(itensor(DType::Bool, {2}, {1, 0}), DType::F32), {1, 0});
  expect_values(cast(itensor(DType::I64, {1}, {(1 << 24) + 1}), DType::F32), {double(1 << 24)});
  expect_values(cast(itensor(DType::I32, {1}, {70000}), DType::F16), {kInf});
}

TEST(Elementwise, CastF64ToF16RoundsOnce) {
  // 1 + 2^-11 + 2^-40 is just above the f16 tie: correctly rounded it goes up; rounding
  // through a plain float first would lose 2^-40 and round the tie down to 1.
  double d = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  expect_values(cast(tensor(DType::F64, {1}, {d}), DType::F16), {1 + std::ldexp(1.0, -10)});
  expect_values(cast(tensor(DType::F64, {3}, {kNaN, 1e10, -kInf}), DType::BF16), {kNaN, double(bf16_to_f32(f32_to_bf16(1e10f))), -kInf});
  expect_values(cast(tensor(DType::F32, {2}, {1e5, 65504}), DType::F16), {kInf, 65504});
}

TEST(Elementwise, CastEveryPairRoundTripsSmallIntegers) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      auto x = itensor(from, {3}, {0, 1, from == DType::Bool ? 1 : 5});
      auto y = cast(x, to);
      EXPECT_EQ(y.dtype(), to);
      EXPECT_EQ(ivalues(y), (std::vector<int64_t>{0, 1, to == DType::Bool || from == DType::Bool ? 1 : 5}))
          << dtype_name(from) << " -> " << dtype_name(to);
    }
}

TEST(Elementwise, WhereSelectsForEveryDType) {
  auto c = itensor(DType::Bool, {3}, {1, 0, 1});
  for (DType dt : kAllDTypes) {
    Shape s = S({3});
    NodeRef cn = prim::input("c", DType::Bool, s), a = prim::input("a", dt, s), b = prim::input("b", dt, s);
    auto av = itensor(dt, {3}, {1, 1, 1}), bv = itensor(dt, {3}, {0, 0, 0});
    auto y = run(prim::where(cn, a, b), {{"c", c}, {"a", av}, {"b", bv}});
    EXPECT_EQ(ivalues(y), (std::vector<int64_t>{1, 0, 1})) << dtype_name(dt);
  }
}

TEST(Elementwise, AddAndCompareEveryDType) {
  for (DType dt : kAllDTypes) {
    auto a = itensor(dt, {2}, {0, 1}), b = itensor(dt, {2}, {1, 1});
    auto sum = bin(Op::Add, a, b);
    EXPECT_EQ(ivalues(sum), (std::vector<int64_t>{1, dt == DType::Bool ? 1 : 2})) << dtype_name(dt);
    EXPECT_EQ(ivalues(bin(Op::CmpLT, a, b)), (std::vector<int64_t>{1, 0})) << dtype_name(dt);
    EXPECT_EQ(ivalues(bin(Op::Mul, a, b)), (std::vector<int64_t>{0, 1})) << dtype_name(dt);
  }
}

TEST(Elementwise, SizeZeroAndScalarShapes) {
  auto e = HostTensor(DType::F32, {0, 3});
  EXPECT_EQ(bin(Op::Add, e, e).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(cast(e, DType::I8).shape(), (std::vector<int64_t>{0, 3}));
  auto s = tensor(DType::F64, {}, {2});
  expect_values(bin(Op::Mul, s, s), {4});
  expect_values(un(Op::Recip, tensor(DType::F32, {1, 1}, {4})), {0.25});
}

TEST(Elementwise, RejectsWrongDTypesClearly) {
  // A node made without the builders' checks must give a UserError, not a crash.
  NodeRef x = prim::input("x", DType::F32, S({2}));
  NodeRef bad = make_node(Op::IDiv, DType::F32, S({2}), {x, x});
  auto xv = tensor(DType::F32, {2}, {1, 2});
  try {
    run(bad, {{"x", xv}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("IDiv"), std::string::npos) << e.what();
    EXPECT_EQ(e.diag().node, static_cast<int>(bad->id));
  }
}

}  // namespace
}  // namespace lathe::test
