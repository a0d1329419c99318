// batch64_test.cpp — small whole networks at batch 64 against the interpreter on the backend
// under test (the models are benchmarked at batch 1; the blocking, the job splits, the shared
// packs and the fused kernels see a batch of 64 only here): a ResNet-like convolution block
// (a 1x1, a 3x3, a strided 3x3, a depthwise 3x3, a strided 1x1 shortcut and the residual sum,
// max and global average pooling, a classifier) and a transformer block (layer norms, causal
// multi-head attention, a GELU MLP, two residual sums), with tiny odd channel counts and
// constant weights (as an ONNX model's).
#include <cmath>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

// constant weights of `shape` scaled by 1 / sqrt(fan_in) (the rest of the dims after the first;
// `fan_in` overrides), so the activations keep their size through the layers
Tensor weights(std::vector<int64_t> shape, double seed, int64_t fan_in = 0) {
  HostTensor t = test::sin_weights(shape, seed, 0.37);
  if (fan_in == 0) {
    fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  }
  const double s = 1.0 / std::sqrt(static_cast<double>(fan_in));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, t.get_f64(i) * s);
  return from_host(t);
}

Tensor conv(const Tensor& x, int64_t k, int64_t r, int64_t stride, int64_t groups, double seed) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {r / 2, r / 2};
  o.groups = groups;
  const int64_t c = x.shape()[1].value();
  return conv2d(x, weights({k, c / groups, r, r}, seed), weights({k}, seed + 0.5, 1), o);
}

// x [64, 5, 15, 15] -> [64, 10]
Graph conv_block() {
  Tensor x = input("x", {64, 5, 15, 15});
  Tensor a = relu(conv(x, 7, 1, 1, 1, 1.0));     // 1x1, 5 -> 7
  Tensor b = relu(conv(a, 9, 3, 1, 1, 2.0));     // 3x3, 7 -> 9, 15 x 15
  Tensor c = relu(conv(b, 12, 3, 2, 1, 3.0));    // strided 3x3: 8 x 8
  Tensor d = relu(conv(c, 12, 3, 1, 12, 4.0));   // depthwise 3x3
  Tensor s = conv(x, 12, 1, 2, 1, 5.0);           // strided 1x1 shortcut: 8 x 8
  Tensor e = relu(d + s);
  Pool2dOptions p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.padding = {1, 1};
  Tensor m = max_pool2d(e, p);                    // 4 x 4
  Tensor f = relu(conv(m, 11, 3, 1, 1, 6.0));     // 3x3 at 4 x 4, 12 -> 11
  Tensor g = reshape(global_avg_pool2d(f), {64, 11});
  Tensor y = linear(g, weights({10, 11}, 7.0), weights({10}, 7.5, 1));
  return Graph::from_outputs({{"y", y.node()}, {"e", e.node()}});
}

// x [64, 9, 24] (24 wide, 3 heads of 8) -> the same shape
Graph transformer_block() {
  const int64_t B = 64, T = 9, D = 24, F = 37;
  Tensor x = input("x", {B, T, D});
  Tensor h = layer_norm(x, 1, weights({D}, 1.0, 1), weights({D}, 1.5, 1));
  Tensor att = multi_head_attention(h, weights({D, 3 * D}, 2.0, D), weights({3 * D}, 2.5, 1), weights({D, D}, 3.0, D),
                                    weights({D}, 3.5, 1), 3, true);
  Tensor r = x + att;
  Tensor h2 = layer_norm(r, 1, weights({D}, 4.0, 1), weights({D}, 4.5, 1));
  Tensor m = linear(gelu(linear(h2, weights({F, D}, 5.0), weights({F}, 5.5, 1))), weights({D, F}, 6.0), weights({D}, 6.5, 1));
  return Graph::from_outputs({{"y", (r + m).node()}});
}

TEST(Batch64, ConvBlockMatchesInterpreter) {
  test::DiffBatch batch;
  // every convolution but the depthwise one, and the classifier: packed GEMMs over the batch
  EXPECT_EQ(test::count_kind(build_program(conv_block()), "matmul"), 6);
  batch.add("conv block, batch 64", conv_block());
  EXPECT_EQ(batch.run(), 0);
}

TEST(Batch64, TransformerBlockMatchesInterpreter) {
  test::DiffBatch batch;
  // at least the four projections (qkv, out, the MLP's two) as packed GEMMs
  EXPECT_GE(test::count_kind(build_program(transformer_block()), "matmul"), 4);
  batch.add("transformer block, batch 64", transformer_block());
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
