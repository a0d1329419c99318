// reduce_shape_test.cpp — reductions (axes, keepdim, dtypes) and shape ops (reshape,
// permute, expand, slice, pad, concat, split, flip, gather, one_hot, tril, repeat, cumsum)
// against values written out by hand or computed with direct loops.
#include "core/frontend/tensor.h"
#include "core/ir/diag.h"
#include "tests/frontend/test_util.h"

namespace lathe {
namespace {

using namespace lathe::testing;

// x = [[0, 1, 2], [3, 4, 5]] as f32
Tensor x23() { return reshape(arange(6, DType::F32), {2, 3}); }

TEST(Reduce, SumMeanMaxMinProdWithAxes) {
  Tensor x = x23();
  auto r = run_all({sum(x), sum(x, {0}), sum(x, {-1}, true), mean(x, {1}), max(x, {0}), min(x, {1}, true),
                    prod(x + 1.0, {1}), amax(x), sum(to(gt(x, 1.5), DType::Bool))});
  EXPECT_EQ(values(r[0]), (std::vector<double>{15}));
  EXPECT_EQ(dims(r[0]), (std::vector<int64_t>{}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{3, 5, 7}));
  EXPECT_EQ(dims(r[2]), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{3, 12}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{1, 4}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{0, 3}));
  EXPECT_EQ(values(r[6]), (std::vector<double>{6, 120}));
  EXPECT_EQ(values(r[7]), (std::vector<double>{5}));
  EXPECT_EQ(r[8].dtype(), DType::I64);
  EXPECT_EQ(values(r[8]), (std::vector<double>{4}));
}

TEST(Reduce, VarStdArgmaxLogsumexp) {
  Tensor x = input("x", {2, 4});
  HostTensor xv = host_f32({2, 4}, {1, 5, 5, 2, -1, -3, -3, 0});
  auto r = run_all({var(x, {1}), var(x, {1}, 0), std_dev(x, {1}), argmax(x, 1), argmin(x, 1), argmax(x),
                    logsumexp(x, {1}), min(to(x, DType::I32), {1}), min(to(x, DType::U8), {1})},
                   {{"x", xv}});
  // row 0: mean 3.25, squared deviations 5.0625 3.0625 3.0625 1.5625 = 12.75
  // row 1: mean -1.75, squared deviations 0.5625 1.5625 1.5625 3.0625 = 6.75
  expect_close(r[0], {12.75 / 3, 6.75 / 3});
  expect_close(r[1], {12.75 / 4, 6.75 / 4});
  expect_close(r[2], {std::sqrt(12.75 / 3), std::sqrt(6.75 / 3)});
  EXPECT_EQ(values(r[3]), (std::vector<double>{1, 3}));  // first maximum
  EXPECT_EQ(values(r[4]), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{1}));
  EXPECT_EQ(r[3].dtype(), DType::I64);
  double l0 = std::log(std::exp(1) + 2 * std::exp(5) + std::exp(2)), l1 = std::log(std::exp(-1) + 2 * std::exp(-3) + 1);
  expect_close(r[6], {l0, l1});
  EXPECT_EQ(values(r[7]), (std::vector<double>{1, -3}));
  // u8 casts of negatives saturate to 0
  EXPECT_EQ(values(r[8]), (std::vector<double>{1, 0}));
}

TEST(Reduce, AnyAllCumsum) {
  Tensor b = input("b", {2, 3}, DType::Bool);
  HostTensor bv = host(DType::Bool, {2, 3}, {0, 1, 0, 1, 1, 1});
  Tensor x = input("x", {2, 5});
  std::vector<double> xs{1, 2, 3, 4, 5, -1, 0.5, 2, 0, 3};
  auto r = run_all({any(b, {1}), all(b, {1}), cumsum(x, 1), cumsum(x, 0)}, {{"b", bv}, {"x", host_f32({2, 5}, xs)}});
  EXPECT_EQ(values(r[0]), (std::vector<double>{1, 1}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 1}));
  expect_close(r[2], {1, 3, 6, 10, 15, -1, -0.5, 1.5, 1.5, 4.5});
  expect_close(r[3], {1, 2, 3, 4, 5, 0, 2.5, 5, 4, 8});
}

TEST(Reduce, SymbolicCumsumAndMean) {
  Tensor x = input("x", {SymInt::var("N")});
  auto r = run_all({cumsum(x, 0), mean(x)}, {{"x", host_f32({4}, {1, 2, 3, 4})}});
  expect_close(r[0], {1, 3, 6, 10});
  expect_close(r[1], {2.5});
}

TEST(Shape, ReshapePermuteExpandSqueeze) {
  Tensor x = x23();
  auto r = run_all({reshape(x, {3, -1}), transpose(x, 0, 1), expand(reshape(arange(3, DType::F32), {3, 1}), {2, 3, 2}),
                    squeeze(unsqueeze(x, 1)), flatten(permute(x, {1, 0})), reshape(transpose(x, 0, 1), {2, 3})});
  EXPECT_EQ(dims(r[0]), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(dims(r[3]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{0, 3, 1, 4, 2, 5}));  // needed a Copy
  EXPECT_THROW(reshape(x, {4, -1}), UserError);
  EXPECT_THROW(expand(x, {2, 4}), UserError);
  EXPECT_THROW(permute(x, {0, 0}), UserError);
}

TEST(Shape, SliceNarrowSelect) {
  Tensor v = arange(10, DType::F32);
  auto r = run_all({slice(v, 0, 2, 8, 3), slice(v, 0, -3, std::nullopt), slice(v, 0, std::nullopt, std::nullopt, -1),
                    slice(v, 0, 7, 1, -2), slice(v, 0, 20, 30), select(x23(), 1, -1), narrow(x23(), 1, 1, 2)});
  EXPECT_EQ(values(r[0]), (std::vector<double>{2, 5}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{7, 5, 3}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{2, 5}));
  EXPECT_EQ(values(r[6]), (std::vector<double>{1, 2, 4, 5}));
}

TEST(Shape, PadConcatStackSplitFlip) {
  Tensor x = x23();
  auto parts = split(x, std::vector<int64_t>{1, 2}, 1);
  auto r = run_all({pad(x, {{1, 0}, {0, 1}}), pad(x, {{0, 0}, {1, 1}}, -1.5), pad(x, {{0, 0}, {-1, 0}}),
                    concat({x, x * 10.0}, 1), stack({arange(2, DType::F32), arange(2, DType::F32) + 5.0}, 1), parts[1],
                    flip(x, {1}), concat({to(gt(x, 2.0), DType::Bool), to(lt(x, 1.0), DType::Bool)}, 0)});
  EXPECT_EQ(values(r[0]), (std::vector<double>{0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 0}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{-1.5, 0, 1, 2, -1.5, -1.5, 3, 4, 5, -1.5}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{0, 1, 2, 0, 10, 20, 3, 4, 5, 30, 40, 50}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{0, 5, 1, 6}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(values(r[6]), (std::vector<double>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values(r[7]), (std::vector<double>{0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(chunk(arange(7), 3).size(), 3u);
  EXPECT_THROW(split(x, std::vector<int64_t>{1, 1}, 1), UserError);
  EXPECT_THROW(concat({x, arange(3, DType::F32)}, 0), UserError);
}

TEST(Shape, GatherIndexSelectEmbeddingOneHot) {
  Tensor x = x23();
  Tensor idx = from_host(host(DType::I64, {2, 2}, {2, 0, -1, 1}));
  Tensor w = reshape(arange(8, DType::F32), {4, 2});
  Tensor tok = from_host(host(DType::I32, {3}, {3, 0, 3}));
  auto r = run_all({gather(x, 1, idx), index_select(x, 1, from_host(host(DType::I64, {2}, {2, 2}))), embedding(tok, w),
                    one_hot(tok, 4)});
  EXPECT_EQ(values(r[0]), (std::vector<double>{2, 0, 5, 4}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{2, 2, 5, 5}));
  EXPECT_EQ(dims(r[2]), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{6, 7, 0, 1, 6, 7}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_THROW(gather(x, 1, arange(2)), UserError);
}

TEST(Shape, TrilTriuRepeatTile) {
  Tensor m = ones({3, 3});
  auto r = run_all({tril(m), triu(m, 1), repeat(arange(2, DType::F32), {2, 2}), tile(x23(), {2}),
                    repeat_interleave(arange(3, DType::F32), 2, 0)});
  EXPECT_EQ(values(r[0]), (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{0, 0, 1, 1, 2, 2}));
}

TEST(Shape, AxisErrorsAreUserErrors) {
  Tensor x = x23();
  EXPECT_THROW(sum(x, {2}), UserError);
  EXPECT_THROW(sum(x, {0, -2}), UserError);
  EXPECT_THROW(transpose(x, 0, 5), UserError);
  EXPECT_THROW(slice(x, 0, 0, 1, 0), UserError);
}

}  // namespace
}  // namespace lathe
