// movement_test.cpp — sources and movement in the interpreter: Const, Index, View
// (permute, expand, shrink, pad with mask, flip, reshape, compositions), Take, Copy.
#include "helpers.h"

namespace lathe::test {
namespace {

NodeRef view_of(NodeRef x, const ViewSpec& v) { return prim::view(x, v); }
ViewSpec base(const Shape& s) { return ViewSpec::contiguous(s); }

// x = [[0, 1, 2], [3, 4, 5]] as f32
HostTensor iota23() { return tensor(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5}); }

TEST(Movement, ConstScalarAndTensorLiteral) {
  expect_values(run(prim::constant(2.5, DType::F32, S({2, 2}))), {2.5, 2.5, 2.5, 2.5});
  EXPECT_EQ(ivalues(run(prim::constant_int(-3, DType::I8, S({3})))), (std::vector<int64_t>{-3, -3, -3}));
  expect_values(run(prim::constant(kNaN, DType::F64, S({1}))), {kNaN});
  expect_values(run(prim::constant(1.0 / 3, DType::F16, S({}))), {double(f16_to_f32(f32_to_f16(1.0f / 3)))});
  auto lit = tensor(DType::I16, {2, 2}, {1, -2, 3, -4});
  auto y = run(prim::constant_tensor(lit));
  EXPECT_EQ(ivalues(y), (std::vector<int64_t>{1, -2, 3, -4}));
  EXPECT_NE(y.data(), lit.data());  // the caller gets its own buffer
  EXPECT_EQ(run(prim::constant(1, DType::F32, S({0, 4}))).numel(), 0);
}

TEST(Movement, IndexGivesPositionAlongAxis) {
  expect_values(run(prim::index(DType::I32, S({2, 3}), 1)), {0, 1, 2, 0, 1, 2});
  expect_values(run(prim::index(DType::F32, S({2, 3}), 0)), {0, 0, 0, 1, 1, 1});
  expect_values(run(prim::index(DType::I64, S({4}), 0)), {0, 1, 2, 3});
  EXPECT_EQ(ivalues(run(prim::index(DType::I8, S({130}), 0))).back(), -127);  // 129 wraps in i8
  EXPECT_EQ(run(prim::index(DType::I32, S({3, 0}), 0)).numel(), 0);
}

TEST(Movement, PermuteExpandShrinkFlip) {
  NodeRef x = prim::input("x", DType::F32, S({2, 3}));
  TensorMap in{{"x", iota23()}};
  expect_values(run(view_of(x, view_permute(base(x->shape), {1, 0})), in), {0, 3, 1, 4, 2, 5});
  expect_values(run(view_of(x, view_flip(base(x->shape), {1})), in), {2, 1, 0, 5, 4, 3});
  expect_values(run(view_of(x, view_flip(base(x->shape), {0, 1})), in), {5, 4, 3, 2, 1, 0});
  expect_values(run(view_of(x, view_shrink(base(x->shape), {{1, 2}, {1, 3}})), in), {4, 5});
  NodeRef col = prim::input("c", DType::F32, S({2, 1}));
  expect_values(run(view_of(col, view_expand(base(col->shape), S({2, 3}))), {{"c", tensor(DType::F32, {2, 1}, {7, 8})}}),
                {7, 7, 7, 8, 8, 8});
  // Reshape of a contiguous tensor is a view too.
  auto r = view_reshape(base(x->shape), S({3, 2}));
  ASSERT_TRUE(r.has_value());
  auto y = run(view_of(x, *r), in);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 2}));
  expect_values(y, {0, 1, 2, 3, 4, 5});
}

TEST(Movement, PadIsAMaskAndReadsZero) {
  NodeRef x = prim::input("x", DType::I32, S({3}));
  auto xv = itensor(DType::I32, {3}, {5, 6, 7});
  auto y = run(view_of(x, view_pad(base(x->shape), {{1, 2}})), {{"x", xv}});
  EXPECT_EQ(ivalues(y), (std::vector<int64_t>{0, 5, 6, 7, 0, 0}));
  // 2-D pad of every side, then flipped, then shrunk: one composed view or a chain.
  NodeRef m = prim::input("m", DType::F32, S({2, 3}));
  ViewSpec v = view_pad(base(m->shape), {{1, 0}, {0, 1}});  // [3, 4]
  NodeRef padded = view_of(m, v);
  expect_values(run(padded, {{"m", iota23()}}), {0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 0});
  NodeRef flipped = view_of(padded, view_flip(ViewSpec::contiguous(padded->shape), {0, 1}));
  expect_values(run(flipped, {{"m", iota23()}}), {0, 5, 4, 3, 0, 2, 1, 0, 0, 0, 0, 0});
  NodeRef cut = view_of(flipped, view_shrink(ViewSpec::contiguous(flipped->shape), {{1, 3}, {0, 2}}));
  expect_values(run(cut, {{"m", iota23()}}), {0, 2, 0, 0});
}

TEST(Movement, BroadcastThroughViewsFeedsBinaryOps) {
  // y = x + b where b:[3] is expanded to [2, 3] (the frontend's broadcasting).
  NodeRef x = prim::input("x", DType::F32, S({2, 3}));
  NodeRef b = prim::input("b", DType::F32, S({3}));
  auto b13 = view_reshape(base(b->shape), S({1, 3}));
  NodeRef bb = view_of(b, view_expand(*b13, S({2, 3})));
  auto y = run(prim::binary(Op::Add, x, bb), {{"x", iota23()}, {"b", tensor(DType::F32, {3}, {10, 20, 30})}});
  expect_values(y, {10, 21, 32, 13, 24, 35});
}

TEST(Movement, ViewsOfEveryDType) {
  for (DType dt : kAllDTypes) {
    NodeRef x = prim::input("x", dt, S({2, 2}));
    auto xv = itensor(dt, {2, 2}, {0, 1, 1, 0});
    auto y = run(view_of(x, view_pad(view_permute(base(x->shape), {1, 0}), {{0, 1}, {0, 0}})), {{"x", xv}});
    EXPECT_EQ(ivalues(y), (std::vector<int64_t>{0, 1, 1, 0, 0, 0})) << dtype_name(dt);
  }
}

TEST(Movement, SizeZeroAndSizeOneViews) {
  NodeRef x = prim::input("x", DType::F32, S({0, 3}));
  auto y = run(view_of(x, view_permute(base(x->shape), {1, 0})), {{"x", HostTensor(DType::F32, {0, 3})}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 0}));
  NodeRef one = prim::input("o", DType::F32, S({1}));
  auto e = run(view_of(one, view_expand(base(one->shape), S({4}))), {{"o", tensor(DType::F32, {1}, {9})}});
  expect_values(e, {9, 9, 9, 9});
  auto p = run(view_of(x, view_pad(base(x->shape), {{1, 1}, {0, 0}})), {{"x", HostTensor(DType::F32, {0, 3})}});
  expect_values(p, {0, 0, 0, 0, 0, 0});
}

// The view read element by element through ConcreteView::index_of (the definition).
std::vector<double> reference_view(const HostTensor& x, const ViewSpec& spec) {
  ConcreteView v = view_eval(spec, {});
  std::vector<double> out;
  std::vector<int64_t> idx(v.shape.size(), 0);
  int64_t n = 1;
  for (auto d : v.shape) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = v.index_of(idx);
    out.push_back(at < 0 ? 0 : x.get_f64(at));
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(Movement, ComposedViewsMatchTheDefinition) {
  std::vector<double> vals;
  for (int i = 0; i < 2 * 3 * 4; ++i) vals.push_back(i + 1);
  auto xv = tensor(DType::F64, {2, 3, 4}, vals);
  NodeRef x = prim::input("x", DType::F64, S({2, 3, 4}));
  ViewSpec c = base(x->shape);
  std::vector<ViewSpec> specs = {
      *view_reshape(c, S({2, 1, 3, 1, 4})),
      view_pad(*view_reshape(c, S({2, 1, 3, 1, 4})), {{0, 0}, {1, 1}, {0, 0}, {0, 0}, {2, 0}}),
      view_permute(c, {2, 0, 1}),
      view_flip(view_pad(c, {{1, 0}, {0, 2}, {1, 1}}), {0, 2}),
      view_shrink(view_pad(c, {{0, 0}, {1, 1}, {0, 0}}), {{0, 2}, {0, 1}, {0, 4}}),  // only padding
      view_expand(*view_reshape(c, S({1, 2, 3, 4})), S({3, 2, 3, 4})),
      view_shrink(view_permute(c, {1, 2, 0}), {{1, 3}, {1, 3}, {0, 2}}),
  };
  for (const ViewSpec& v : specs) {
    NodeRef y = prim::view(x, v);
    expect_values(run(y, {{"x", xv}}), reference_view(xv, v));
  }
}

TEST(Movement, SymbolicViewOutOfBoundsIsAUserError) {
  // The builder cannot check a symbolic view; the interpreter checks it once bound.
  NodeRef x = prim::input("x", DType::F32, {SymInt::var("N")});
  ViewSpec v;
  v.shape = {SymInt::var("N") + 1};
  v.strides = {1};
  NodeRef y = prim::view(x, v);
  try {
    run(y, {{"x", tensor(DType::F32, {3}, {1, 2, 3})}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("outside its input"), std::string::npos) << e.what();
  }
}

TEST(Movement, TakeGathersWithNegativeAndOutOfRangeIndices) {
  NodeRef x = prim::input("x", DType::F32, S({5}));
  NodeRef i = prim::input("i", DType::I64, S({6}));
  auto y = run(prim::take(x, i, 0), {{"x", tensor(DType::F32, {5}, {10, 11, 12, 13, 14})},
                                     {"i", itensor(DType::I64, {6}, {-1, 0, 4, 5, -6, -5})}});
  expect_values(y, {14, 10, 14, 0, 0, 10});
}

TEST(Movement, TakeAlongInnerAxis) {
  // out[r, j] = x[r, idx[r, j]]
  NodeRef x = prim::input("x", DType::F32, S({2, 3}));
  NodeRef i = prim::input("i", DType::I32, S({2, 4}));
  auto y = run(prim::take(x, i, 1), {{"x", iota23()}, {"i", itensor(DType::I32, {2, 4}, {2, 0, -1, 1, 0, 0, 1, -3})}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 4}));
  expect_values(y, {2, 0, 2, 1, 3, 3, 4, 3});
  // along axis 0 with u8 indices
  NodeRef j = prim::input("j", DType::U8, S({1, 3}));
  expect_values(run(prim::take(x, j, 0), {{"x", iota23()}, {"j", itensor(DType::U8, {1, 3}, {1, 0, 1})}}), {3, 1, 5});
}

TEST(Movement, CopyIsTheIdentityInAFreshBuffer) {
  NodeRef x = prim::input("x", DType::BF16, S({2}));
  auto xv = tensor(DType::BF16, {2}, {1.5, -2});
  auto y = run(prim::copy(x), {{"x", xv}});
  expect_values(y, {1.5, -2});
  EXPECT_NE(y.data(), xv.data());
}

}  // namespace
}  // namespace lathe::test
