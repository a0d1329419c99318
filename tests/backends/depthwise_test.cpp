// depthwise_test.cpp — the direct depthwise convolution nest (core/loop/lower_depthwise.h):
// 3x3 and 5x5 windows (and grouped convolutions with one output per group), stride 1, 2 and 3, dilation, padding wider than the window's reach,
// odd and prime sizes, channels 7, 13 and 96, batch 1 and 64, with and without the fused
// BatchNorm + ReLU6 epilogue, constant (ONNX-style) and input weights, against the
// interpreter on the backend under test; and that the default schedule takes the path.
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower_depthwise.h"
#include "diff_util.h"

namespace lathe {
namespace {

Graph one(const Tensor& y) { return Graph::from_outputs({{"y", y.node()}}); }

int direct_kernels(const Program& p) {
  int n = 0;
  for (auto& f : p.funcs) n += loop::is_depthwise(f);
  return n;
}

struct Case {
  int64_t n, c, h, w, k, stride, pad, dil;
};

Tensor dw_conv(const Case& t, bool epilogue, bool const_weights, uint64_t seed) {
  Conv2dOptions o;
  o.stride = {t.stride, t.stride};
  o.padding = {t.pad, t.pad};
  o.dilation = {t.dil, t.dil};
  o.groups = t.c;
  Tensor x = input("x", {t.n, t.c, t.h, t.w});
  Tensor w = const_weights ? from_host(random_tensor(DType::F32, {t.c, 1, t.k, t.k}, seed))
                           : input("w", {t.c, 1, t.k, t.k});
  Tensor b = from_host(random_tensor(DType::F32, {t.c}, seed + 1));
  Tensor y = conv2d(x, w, b, o);
  if (!epilogue) return y;
  Tensor scale = input("scale", {t.c, 1, 1}), shift = input("shift", {t.c, 1, 1});
  return clamp(y * scale + shift, Scalar(0.0), Scalar(6.0));  // BatchNorm + ReLU6
}

const std::vector<Case> kCases = {
    {1, 7, 9, 11, 3, 1, 1, 1},     // odd sizes, 7 channels
    {1, 13, 17, 13, 3, 2, 1, 1},   // stride 2, prime sizes
    {64, 7, 5, 7, 3, 1, 1, 1},     // batch 64, tiny planes
    {2, 96, 14, 14, 3, 1, 1, 1},   // MobileNet's late shapes
    {1, 96, 15, 15, 3, 2, 1, 1},   // stride 2 on an odd plane
    {1, 13, 11, 19, 5, 1, 2, 1},   // 5x5
    {3, 7, 12, 23, 5, 2, 2, 1},    // 5x5 stride 2
    {1, 7, 13, 29, 3, 1, 2, 2},    // dilation 2
    {1, 7, 7, 7, 3, 3, 1, 1},      // stride 3
    {1, 13, 6, 5, 5, 1, 4, 1},     // padding wider than the window reaches (all-zero rows)
    {1, 7, 10, 3, 3, 1, 0, 1},     // no padding, a row narrower than a vector
    {2, 7, 9, 131, 3, 2, 1, 1},    // rows of several vectors
    {1, 3, 150, 170, 3, 1, 1, 1},  // a plane larger than one band
};

TEST(Depthwise, TakesTheDirectPath) {
  for (bool ep : {false, true}) {
    Program p = build_program(one(dw_conv(kCases[1], ep, true, 3)));
    EXPECT_EQ(direct_kernels(p), 1) << test::loop_ir_of(p);
    EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);  // the epilogue stays fused
  }
  // the plain loops (p:kernel(i):reset(true)) are still the reduction
  BuildOptions o;
  o.default_schedule = false;
  EXPECT_EQ(direct_kernels(build_program(one(dw_conv(kCases[0], true, true, 3)), o)), 0);
}

TEST(Depthwise, MatchesInterpreter) {
  test::DiffBatch batch;
  int i = 0;
  for (auto& t : kCases)
    for (bool ep : {false, true}) {
      Graph g = one(dw_conv(t, ep, i % 2 == 0, 10 + i));
      EXPECT_EQ(direct_kernels(build_program(g)), 1) << "case " << i << "\n" << test::loop_ir_of(build_program(g));
      batch.add("depthwise " + std::to_string(i++), g);
    }
  EXPECT_EQ(batch.run(), 0);
}

// grouped convolutions with one output channel per group: each output reads C/groups planes
TEST(Depthwise, GroupedWithOneOutputPerGroup) {
  test::DiffBatch batch;
  for (auto [n, c, g, h, w, k, s] : std::vector<std::array<int64_t, 7>>{
           {1, 14, 7, 9, 11, 3, 1}, {2, 26, 13, 13, 17, 3, 2}, {64, 6, 2, 5, 7, 3, 1}, {1, 12, 6, 11, 13, 5, 2}}) {
    Conv2dOptions o;
    o.stride = {s, s};
    o.padding = {k / 2, k / 2};
    o.groups = g;
    Tensor x = input("x", {n, c, h, w});
    Tensor wt = from_host(random_tensor(DType::F32, {g, c / g, k, k}, static_cast<uint64_t>(c * 100 + k)));
    Graph gr = one(clamp(conv2d(x, wt, input("b", {g}), o), Scalar(0.0), Scalar(6.0)));
    EXPECT_EQ(direct_kernels(build_program(gr)), 1) << test::loop_ir_of(build_program(gr));
    batch.add("grouped " + std::to_string(c) + "/" + std::to_string(g), gr);
  }
  EXPECT_EQ(batch.run(), 0);
}

// 1-D depthwise (conv1d with groups = channels) and windows of one row or one column
TEST(Depthwise, OneDimensionalAndThinWindows) {
  test::DiffBatch batch;
  Tensor x1 = input("x", {2, 13, 37});
  batch.add("conv1d depthwise", one(relu(conv1d(x1, input("w", {13, 1, 5}), std::nullopt, 2, 2, 1, 13))));
  for (auto [r, s] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {7, 1}, {1, 1}}) {
    Conv2dOptions o;
    o.padding = {r / 2, s / 2};
    o.groups = 7;
    Tensor x = input("x", {1, 7, 11, 19});
    batch.add("depthwise " + std::to_string(r) + "x" + std::to_string(s), one(conv2d(x, input("w", {7, 1, r, s}), std::nullopt, o)));
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
