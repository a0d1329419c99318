// upsample_conv_test.cpp — a 1×1 Conv of an upsampling Resize is imported as the
// convolution at the input resolution followed by the resampling (lower_nn.cpp,
// pointwise_before_upsampling; Folder::resamplings): the same values as the Resize alone
// followed by the 1×1 convolution on the host, for nearest / linear, integer and
// non-integer ratios, scales and sizes, 1-D and 2-D, odd channel counts, batch 1, 3 and 64,
// with and without bias; the products run at the low resolution; and where it does not
// apply (a downsampling Resize, fewer than 4 input channels) the convolution stays after.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <random>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using test::attr_s;
using test::randt;

struct Case {
  std::vector<int64_t> xshape;  // [N, C, spatial…]
  int64_t M;
  std::string mode, coord;
  std::vector<float> scales;    // or
  std::vector<int64_t> sizes;
  bool bias = true;
};

// the Resize node (and, with conv, the 1×1 Conv after it) as a model
Graph model(const Case& c, const HostTensor& w, const HostTensor& b, bool conv) {
  test::OnnxBuilder m(14);
  m.input("x", c.xshape);
  test::resize_node(m, "x", "up", false, c.mode, c.coord, c.scales, c.sizes);
  if (conv) {
    m.init("w", w);
    std::vector<std::string> cin{"up", "w"};
    if (c.bias) {
      m.init("b", b);
      cin.push_back("b");
    }
    m.node("Conv", cin, {"y"});
  } else {
    m.g()->add_output()->set_name("up");
  }
  return m.load("resize_conv.onnx");
}

// y[n, m, p] = Σ_c w[m, c] · up[n, c, p] (+ b[m])
HostTensor conv1x1(const HostTensor& up, const HostTensor& w, const HostTensor* b) {
  std::vector<int64_t> ys = up.shape();
  int64_t N = ys[0], C = ys[1], M = w.shape()[0], P = 1;
  for (size_t i = 2; i < ys.size(); ++i) P *= ys[i];
  ys[1] = M;
  HostTensor y(DType::F32, ys);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t p = 0; p < P; ++p) {
        double s = b ? b->get_f64(m) : 0.0;
        for (int64_t ch = 0; ch < C; ++ch) s += w.get_f64(m * C + ch) * up.get_f64((n * C + ch) * P + p);
        y.set_f64((n * M + m) * P + p, s);
      }
  return y;
}

// the most elements any Reduce (the convolution's sum) produces
int64_t largest_reduce(const Graph& g) {
  int64_t most = 0;
  for (NodeRef n : g.toposort())
    if (n->op == Op::Reduce) {
      int64_t e = 1;
      for (const SymInt& d : n->shape) e *= d.value();
      most = std::max(most, e);
    }
  return most;
}

struct Result {
  Graph g;
  int64_t low_area = 1, high_area = 1;
};

Result check(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t C = c.xshape[1];
  std::vector<int64_t> ws{c.M, C};
  for (size_t i = 2; i < c.xshape.size(); ++i) ws.push_back(1);
  HostTensor x = randt(c.xshape, rng, 1.0), w = randt(ws, rng), b = randt({c.M}, rng);
  HostTensor up = interpret(model(c, w, b, false), {{"x", x}}).at("up");
  Result r{model(c, w, b, true)};
  TensorMap out = interpret(r.g, {{"x", x}});
  std::string why;
  EXPECT_TRUE(allclose(out.at("y"), conv1x1(up, w, c.bias ? &b : nullptr), 1e-4, 1e-5, &why)) << why;
  for (size_t i = 2; i < c.xshape.size(); ++i) r.low_area *= c.xshape[i], r.high_area *= up.shape()[i];
  return r;
}

TEST(OnnxUpsampleConv, OneByOneConvolutionMovesBeforeTheUpsampling) {
  const std::vector<Case> cases = {
      {{1, 5, 7, 11}, 3, "linear", "half_pixel", {1, 1, 2, 2}},               // odd channels, prime sizes
      {{3, 4, 5, 3}, 7, "nearest", "asymmetric", {1, 1, 3, 2}, {}, false},    // odd ratios, batch 3, no bias
      {{64, 6, 5, 3}, 2, "linear", "align_corners", {}, {64, 6, 13, 5}},       // sizes, non-integer, batch 64
      {{2, 9, 17}, 4, "linear", "pytorch_half_pixel", {1, 1, 2}},             // 1-D
      {{1, 8, 4, 4}, 8, "nearest", "half_pixel", {1, 1, 2, 1}},               // one axis only
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    Result r = check(c, seed++);
    // the convolution's sums are over the input positions: N · M · (low-resolution area)
    EXPECT_EQ(largest_reduce(r.g), c.xshape[0] * c.M * r.low_area);
  }
}

TEST(OnnxUpsampleConv, DownsamplingOrFewChannelsKeepTheConvolutionAfter) {
  const std::vector<Case> cases = {
      {{1, 6, 8, 10}, 3, "linear", "half_pixel", {1, 1, 0.5f, 0.5f}},  // shrinks
      {{2, 3, 4, 5}, 5, "nearest", "asymmetric", {1, 1, 2, 2}},        // C = 3 < 4
  };
  uint32_t seed = 11;
  for (const Case& c : cases) {
    Result r = check(c, seed++);
    EXPECT_EQ(largest_reduce(r.g), c.xshape[0] * c.M * r.high_area);
  }
}

}  // namespace
}  // namespace lathe
