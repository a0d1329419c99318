// composites_grad_test.cpp — finite-difference checks of grad() through the main
// composites: softmax, log_softmax, layer_norm, matmul, linear, conv2d (stride, padding,
// dilation, groups), pooling, gelu (both forms), attention, cross_entropy, gather/embedding
// and concat, plus a two-layer MLP loss.
#include "core/frontend/nn.h"
#include "tests/autodiff/gradcheck.h"

namespace lathe {
namespace {

using namespace lathe::testing;
using V = std::vector<Tensor>;

TEST(GradComposites, ElementwiseActivations) {
  gradcheck("gelu", {{{7}}}, [](const V& x) { return gelu(x[0]); });
  gradcheck("gelu tanh", {{{7}}}, [](const V& x) { return gelu(x[0], "tanh"); });
  gradcheck("sigmoid*tanh", {{{6}}}, [](const V& x) { return sigmoid(x[0]) * tanh(x[0]); });
  gradcheck("exp/log", {{{5}, [](double v) { return 0.5 + std::fabs(v); }}},
            [](const V& x) { return log(x[0]) + exp(x[0]) * 0.1; });
  gradcheck("silu softplus", {{{6}}}, [](const V& x) { return silu(x[0]) + softplus(x[0] * 3.0); });
  gradcheck("div", {{{4}}, {{4}, [](double v) { return 1 + std::fabs(v); }}}, [](const V& x) { return x[0] / x[1]; });
}

TEST(GradComposites, SoftmaxAndNorms) {
  gradcheck("softmax", {{{3, 5}}}, [](const V& x) { return softmax(x[0], -1); });
  gradcheck("log_softmax axis 0", {{{3, 4}}}, [](const V& x) { return log_softmax(x[0], 0); });
  gradcheck("layer_norm", {{{2, 5}}, {{5}}, {{5}}}, [](const V& x) { return layer_norm(x[0], 1, x[1], x[2]); });
  gradcheck("rms_norm", {{{2, 4}}, {{4}}}, [](const V& x) { return rms_norm(x[0], 1, x[1]); });
  gradcheck("var/std", {{{3, 4}}}, [](const V& x) { return var(x[0], {1}, 1, true) + std_dev(x[0], {1}, 0, true); });
}

TEST(GradComposites, MatmulLinear) {
  gradcheck("matmul", {{{3, 4}}, {{4, 2}}}, [](const V& x) { return matmul(x[0], x[1]); });
  gradcheck("batched broadcast matmul", {{{2, 2, 3}}, {{3, 2}}}, [](const V& x) { return matmul(x[0], x[1]); });
  gradcheck("vec matmul", {{{3}}, {{3, 2}}}, [](const V& x) { return matmul(x[0], x[1]); });
  gradcheck("linear", {{{2, 3}}, {{4, 3}}, {{4}}}, [](const V& x) { return linear(x[0], x[1], x[2]); });
}

TEST(GradComposites, Conv2dAndPooling) {
  Conv2dOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  gradcheck("conv2d stride+pad", {{{1, 2, 4, 4}}, {{2, 2, 3, 3}}, {{2}}},
            [&](const V& x) { return conv2d(x[0], x[1], x[2], o); });
  Conv2dOptions d;
  d.dilation = {2, 2};
  d.groups = 2;
  gradcheck("conv2d dilation+groups", {{{1, 2, 5, 5}}, {{2, 1, 2, 2}}},
            [&](const V& x) { return conv2d(x[0], x[1], std::nullopt, d); });
  Pool2dOptions p;
  p.kernel = {2, 2};
  gradcheck("max_pool2d", {{{1, 1, 4, 4}}}, [&](const V& x) { return max_pool2d(x[0], p); });
  Pool2dOptions q;
  q.kernel = {3, 3};
  q.stride = {2, 2};
  q.padding = {1, 1};
  gradcheck("avg_pool2d overlapping", {{{1, 1, 5, 5}}}, [&](const V& x) { return avg_pool2d(x[0], q); });
}

TEST(GradComposites, AttentionAndLosses) {
  gradcheck("attention causal", {{{2, 3, 4}}, {{2, 3, 4}}, {{2, 3, 4}}},
            [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], std::nullopt, true); });
  gradcheck("cross_entropy", {{{3, 4}}}, [](const V& x) {
    return cross_entropy(x[0], from_host(host(DType::I64, {3}, {1, 3, 0})));
  });
  gradcheck("mse", {{{2, 3}}, {{2, 3}}}, [](const V& x) { return mse_loss(x[0], x[1]); });
}

TEST(GradComposites, GathersAndConcat) {
  gradcheck("embedding", {{{4, 3}}}, [](const V& x) {
    return embedding(from_host(host(DType::I32, {2, 2}, {3, 0, 3, 1})), x[0]);
  });
  gradcheck("gather", {{{2, 4}}}, [](const V& x) {
    return gather(x[0], 1, from_host(host(DType::I64, {2, 3}, {0, 0, 3, 2, 1, 2})));
  });
  gradcheck("concat", {{{2, 2}}, {{2, 3}}}, [](const V& x) { return concat({x[0], x[1] * 2.0}, 1); });
  gradcheck("cumsum", {{{6}}}, [](const V& x) { return cumsum(x[0], 0); });
}

TEST(GradComposites, TwoLayerMlpLoss) {
  gradcheck("mlp", {{{4, 3}}, {{3, 5}}, {{5}}, {{5, 2}}}, [](const V& x) {
    Tensor h = relu(matmul(x[0], x[1]) + x[2]);
    return cross_entropy(matmul(h, x[3]), from_host(host(DType::I64, {4}, {0, 1, 1, 0})));
  });
}

}  // namespace
}  // namespace lathe
