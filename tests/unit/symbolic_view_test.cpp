// Unit tests for symbolic dims, views and dtypes.
#include <gtest/gtest.h>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/ir/symbolic.h"
#include "core/ir/view.h"

using namespace lathe;

TEST(Symbolic, CanonicalEquality) {
  SymInt b = SymInt::var("B");
  EXPECT_EQ(b * 784, SymInt(784) * b);
  EXPECT_EQ((b + 0), b);
  EXPECT_EQ((b * 1), b);
  EXPECT_EQ(floordiv(b * 4, 4), b);
  EXPECT_EQ((b * 2 * 3).to_string(), "B*6");
  EXPECT_EQ((b - 1).to_string(), "B-1");
}

// Found by the ONNX loader fuzzer: a Reshape whose dims multiply past 64 bits was
// undefined behaviour (and could wrap into a small, plausible element count).
TEST(Symbolic, ConstantOverflowIsAUserError) {
  SymInt big(int64_t(1) << 40);
  EXPECT_THROW(big * big, UserError);
  EXPECT_THROW(SymInt(INT64_MAX) + SymInt(1), UserError);
  EXPECT_THROW(SymInt::var("B") * big * big, UserError);  // folding (B*c1)*c2
  EXPECT_THROW(SymInt(INT64_MIN) - SymInt(1), UserError);
  EXPECT_THROW((SymInt::var("B") * big).eval({{"B", int64_t(1) << 30}}), UserError);
  EXPECT_EQ((big * 2).value(), int64_t(1) << 41);
}

TEST(Symbolic, ParseEvalRoundTrip) {
  for (std::string s : {"B", "B*784", "(T+1)/2", "max(B,1)", "B-1", "B*T*12"}) {
    auto v = SymInt::parse(s);
    ASSERT_TRUE(v) << s;
    auto again = SymInt::parse(v->to_string());
    ASSERT_TRUE(again);
    EXPECT_EQ(*v, *again) << s;
  }
  auto e = SymInt::parse("(T+1)/2");
  EXPECT_EQ(e->eval({{"T", 7}}), 4);
  EXPECT_FALSE(e->eval({}));
  size_t pos = 0;
  EXPECT_FALSE(SymInt::parse("B*", &pos));
  EXPECT_EQ(pos, 2u);
}

static std::vector<double> materialize(const ViewSpec& v, const std::vector<double>& in) {
  ConcreteView c = view_eval(v, {});
  std::vector<double> out;
  int64_t n = 1;
  for (auto d : c.shape) n *= d;
  std::vector<int64_t> idx(c.shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t r = k;
    for (size_t d = c.shape.size(); d-- > 0;) { idx[d] = r % c.shape[d]; r /= c.shape[d]; }
    int64_t off = c.index_of(idx);
    out.push_back(off < 0 ? 0.0 : in.at(off));
  }
  return out;
}

TEST(View, ComposeMatchesSequentialApplication) {
  std::vector<double> data(24);
  for (int i = 0; i < 24; ++i) data[i] = i + 1;
  ViewSpec base = ViewSpec::contiguous({4, 6});
  std::vector<ViewSpec> firsts = {
      view_permute(base, {1, 0}), view_shrink(base, {{1, 3}, {2, 6}}), view_flip(base, {1}),
      view_pad(base, {{1, 0}, {0, 2}}), *view_reshape(base, {2, 2, 6})};
  for (auto& inner : firsts) {
    std::vector<double> mid = materialize(inner, data);
    ViewSpec ib = ViewSpec::contiguous(inner.shape);
    std::vector<ViewSpec> seconds = {view_flip(ib, {0}), view_shrink(ib, [&] {
                                       std::vector<std::pair<SymInt, SymInt>> r;
                                       for (auto& d : inner.shape) r.push_back({d.value() > 1 ? 1 : 0, d});
                                       return r;
                                     }())};
    if (inner.shape.size() == 2) seconds.push_back(view_permute(ib, {1, 0}));
    for (auto& outer : seconds) {
      auto want = materialize(outer, mid);
      auto c = view_compose(inner, outer);
      if (!c) continue;
      EXPECT_EQ(materialize(*c, data), want) << inner.to_string() << " then " << outer.to_string();
    }
  }
}

TEST(View, ReshapeOfTransposeNeedsCopy) {
  ViewSpec t = view_permute(ViewSpec::contiguous({4, 6}), {1, 0});
  EXPECT_FALSE(view_reshape(t, {24}));
  EXPECT_TRUE(view_reshape(ViewSpec::contiguous({4, 6}), {2, 12}));
}

TEST(Build, BinaryShapeMismatchIsUserError) {
  auto a = prim::input("a", DType::F32, {4, 3});
  auto b = prim::input("b", DType::F32, {4});
  EXPECT_THROW(prim::binary(Op::Add, a, b), UserError);
  auto c = prim::input("c", DType::I32, {4, 3});
  EXPECT_THROW(prim::binary(Op::Add, a, c), UserError);
}

TEST(Build, HashConsing) {
  auto a = prim::input("a", DType::F32, {4, 3});
  auto x = prim::binary(Op::Add, a, a);
  auto y = prim::binary(Op::Add, a, a);
  EXPECT_EQ(x, y);
  EXPECT_NE(prim::constant(1.0, DType::F32), prim::constant(2.0, DType::F32));
}

TEST(DType, HalfRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-5f, 3.14159f})
    EXPECT_NEAR(f16_to_f32(f32_to_f16(f)), f, std::abs(f) * 1e-3 + 1e-7);
  EXPECT_EQ(promote(DType::U8, DType::I8), DType::I16);
  EXPECT_EQ(promote(DType::F16, DType::BF16), DType::F32);
  EXPECT_EQ(promote(DType::I32, DType::F16), DType::F16);
}

TEST(DType, UnsignedPromotion) {
  EXPECT_EQ(promote(DType::U16, DType::I16), DType::I32);
  EXPECT_EQ(promote(DType::U16, DType::I64), DType::I64);
  EXPECT_EQ(promote(DType::U32, DType::I8), DType::I64);
  EXPECT_EQ(promote(DType::U64, DType::I32), DType::I64);
  EXPECT_EQ(promote(DType::U8, DType::U32), DType::U32);
  EXPECT_EQ(promote(DType::U64, DType::U16), DType::U64);
  EXPECT_EQ(promote(DType::U32, DType::F16), DType::F16);
  EXPECT_EQ(promote(DType::Bool, DType::U16), DType::U16);
  EXPECT_EQ(promote(DType::U8, DType::I8), DType::I16);  // unchanged
  EXPECT_EQ(dtype_size(DType::U64), 8u);
  EXPECT_EQ(dtype_from_name("uint32"), DType::U32);
  EXPECT_EQ(dtype_name(DType::U16), "u16");
  EXPECT_TRUE(is_unsigned_int(DType::U8) && !is_unsigned_int(DType::Bool) && !is_signed(DType::U64));
}
