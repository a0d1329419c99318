// conv_transpose_test.cpp — ONNX ConvTranspose against a host reference (the scatter
// definition: y[n, m, i·s + a·d − pad] += x[n, c, i] · w[c, m, a]) at odd channel counts,
// prime spatial sizes, 1-D / 2-D / 3-D, batch 1, 3 and 64, with and without bias; and the
// kernel == stride case (a UNet's 2×2 stride-2 up-convolution) imported as a 1×1
// convolution into M·A channels plus a depth-to-space permute: C products per output, not
// the C·A of the zero-upsampled convolution (lower_nn.cpp, conv_transpose_by_tiles).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <random>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using test::attr_i;
using test::attr_ints;
using test::randt;

struct Case {
  std::vector<int64_t> in;       // spatial sizes
  int64_t N, C, M;
  std::vector<int64_t> kernel, strides, pads;  // pads: begins…, ends… (empty: zeros)
  bool bias = true;
};

std::vector<int64_t> out_sizes(const Case& c) {
  std::vector<int64_t> o;
  size_t k = c.in.size();
  for (size_t i = 0; i < k; ++i) {
    int64_t pb = c.pads.empty() ? 0 : c.pads[i], pe = c.pads.empty() ? 0 : c.pads[i + k];
    o.push_back((c.in[i] - 1) * c.strides[i] + c.kernel[i] - pb - pe);
  }
  return o;
}

// the scatter definition, in doubles
HostTensor reference(const Case& c, const HostTensor& x, const HostTensor& w, const HostTensor* b) {
  size_t k = c.in.size();
  std::vector<int64_t> o = out_sizes(c), yshape{c.N, c.M};
  yshape.insert(yshape.end(), o.begin(), o.end());
  HostTensor y(DType::F32, yshape);
  int64_t I = 1, O = 1, A = 1;
  for (size_t i = 0; i < k; ++i) I *= c.in[i], O *= o[i], A *= c.kernel[i];
  std::vector<double> acc(c.N * c.M * O, 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t ii = 0; ii < I; ++ii)
        for (int64_t m = 0; m < c.M; ++m)
          for (int64_t a = 0; a < A; ++a) {
            // unflatten ii and a (row-major), the output position per dim
            int64_t rest_i = ii, rest_a = a, flat = 0;
            bool inside = true;
            std::vector<int64_t> pi(k), pa(k);
            for (size_t d = k; d-- > 0;) {
              pi[d] = rest_i % c.in[d], rest_i /= c.in[d];
              pa[d] = rest_a % c.kernel[d], rest_a /= c.kernel[d];
            }
            for (size_t d = 0; d < k; ++d) {
              int64_t pos = pi[d] * c.strides[d] + pa[d] - (c.pads.empty() ? 0 : c.pads[d]);
              if (pos < 0 || pos >= o[d]) inside = false;
              flat = flat * o[d] + pos;
            }
            if (!inside) continue;
            acc[(n * c.M + m) * O + flat] += x.get_f64((n * c.C + ch) * I + ii) * w.get_f64((ch * c.M + m) * A + a);
          }
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t p = 0; p < O; ++p)
        y.set_f64((n * c.M + m) * O + p, acc[(n * c.M + m) * O + p] + (b ? b->get_f64(m) : 0.0));
  return y;
}

struct Built {
  Graph g;
  HostTensor x, w, b;
};

Built build(const Case& c, std::mt19937& rng) {
  std::vector<int64_t> xs{c.N, c.C}, ws{c.C, c.M};
  xs.insert(xs.end(), c.in.begin(), c.in.end());
  ws.insert(ws.end(), c.kernel.begin(), c.kernel.end());
  HostTensor x = randt(xs, rng, 1.0), w = randt(ws, rng), b = randt({c.M}, rng);
  test::OnnxBuilder m(14);
  m.input("x", xs);
  m.init("w", w);
  std::vector<std::string> ins{"x", "w"};
  if (c.bias) {
    m.init("b", b);
    ins.push_back("b");
  }
  auto* n = m.node("ConvTranspose", ins, {"y"});
  attr_ints(n, "kernel_shape", c.kernel);
  attr_ints(n, "strides", c.strides);
  if (!c.pads.empty()) attr_ints(n, "pads", c.pads);
  return {m.load("convtranspose.onnx"), x, w, b};
}

// the largest number of products summed into one output by any Reduce in the graph
int64_t products_per_output(const Graph& g) {
  int64_t most = 0;
  for (NodeRef n : g.toposort()) {
    if (n->op != Op::Reduce) continue;
    int64_t p = 1;
    for (int a : n->attrs.axes) p *= n->inputs[0]->shape[a].value();
    most = std::max(most, p);
  }
  return most;
}

void check(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Built t = build(c, rng);
  TensorMap out = interpret(t.g, {{"x", t.x}});
  HostTensor ref = reference(c, t.x, t.w, c.bias ? &t.b : nullptr);
  std::string why;
  EXPECT_TRUE(allclose(out.at("y"), ref, 1e-4, 1e-5, &why)) << why;
}

TEST(OnnxConvTranspose, KernelEqualsStrideMatchesTheScatterDefinition) {
  check({{7, 11}, 1, 5, 3, {2, 2}, {2, 2}}, 1);            // odd channels, prime sizes, batch 1
  check({{5, 3}, 3, 4, 7, {3, 2}, {3, 2}, {}, false}, 2);  // asymmetric kernel, no bias, batch 3
  check({{13}, 64, 3, 2, {4}, {4}}, 3);                    // 1-D, batch 64
  check({{3, 2, 5}, 2, 2, 3, {2, 2, 2}, {2, 2, 2}}, 4);     // 3-D
  check({{6, 6}, 1, 1, 1, {1, 1}, {1, 1}}, 5);             // 1 × 1, stride 1: a 1 × 1 convolution
}

TEST(OnnxConvTranspose, OtherShapesKeepTheGeneralPathAndMatch) {
  check({{5, 7}, 2, 3, 5, {3, 3}, {2, 2}, {1, 1, 1, 1}}, 6);  // overlapping taps, cropped
  check({{7, 5}, 1, 5, 3, {2, 2}, {3, 3}}, 7);               // kernel < stride: gaps (bias only)
  check({{4, 4}, 1, 3, 2, {2, 2}, {2, 2}, {1, 0, 0, 1}}, 8);  // kernel == stride but padded
}

TEST(OnnxConvTranspose, KernelEqualsStrideSumsOnlyTheInputChannels) {
  std::mt19937 rng(9);
  // 2 × 2 stride 2 from 12 channels: 12 products per output, where the zero-upsampled
  // convolution sums 12 · 4 (three quarters of them zeros)
  EXPECT_EQ(products_per_output(build({{8, 8}, 1, 12, 6, {2, 2}, {2, 2}}, rng).g), 12);
  EXPECT_EQ(products_per_output(build({{8, 8}, 1, 12, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}}, rng).g), 12 * 9);
}

}  // namespace
}  // namespace lathe
