// quant_info_test.cpp — describe_quantization (core/rewrite/quant_info.h) reads the scale,
// zero point and integer tensor of quantization sites back out of the primitive graph:
// the quantize pass's three modes, ONNX QuantizeLinear / DequantizeLinear as imported
// (plain, with zero points; per channel), and nothing on float graphs that only look alike
// (an index cast to float and scaled).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/import/onnx_import.h"
#include "core/rewrite/quant_info.h"
#include "core/rewrite/quantize.h"
#include "core/runtime/host_tensor.h"

#ifndef QDQ_RULES_DIR
#error "QDQ_RULES_DIR must point at tests/quant/qdq_rules"
#endif

namespace lathe {
namespace {

HostTensor random_weight(int64_t k, int64_t n, uint32_t seed) {
  HostTensor w(DType::F32, {k, n});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 1);
  for (int64_t i = 0; i < w.numel(); ++i) w.ptr<float>()[i] = d(rng);
  return w;
}

// x [rows, 37] · W [37, 53] (constant)
Graph mlp(int64_t rows) {
  Tensor x = input("x", {rows, 37});
  Tensor y = matmul(x, from_host(random_weight(37, 53, 7)));
  return Graph::from_outputs({{"y", y.node()}});
}

struct Found {
  std::vector<QuantSite> sites;
  std::string text;
};

// Every site near any node of g, joined as text.
Found all_sites(const Graph& g) {
  auto users = g.users();
  UsersFn fn = [&](NodeRef n) {
    auto it = users.find(n);
    return it == users.end() ? std::vector<NodeRef>{} : it->second;
  };
  Found f;
  for (NodeRef n : g.toposort())
    for (QuantSite& s : describe_quantization(n, fn, 8))
      if (std::none_of(f.sites.begin(), f.sites.end(), [&](const QuantSite& o) { return o.site == s.site; })) {
        for (auto& l : s.lines()) f.text += l + "\n";
        f.sites.push_back(s);
      }
  return f;
}

TEST(QuantInfo, DynamicPerChannel) {
  QuantizeOptions o;
  o.mode = QuantMode::Dynamic;
  o.per_channel = true;
  Graph q = quantize_graph(mlp(5), o).graph;
  Found f = all_sites(q);
  ASSERT_FALSE(f.sites.empty()) << q.toposort().size();
  const QuantSite* deq = nullptr;
  for (auto& s : f.sites)
    if (s.kind == QuantSite::Kind::Dequantize && s.contraction) deq = &s;
  ASSERT_NE(deq, nullptr) << f.text;
  EXPECT_EQ(deq->integer->dtype, DType::I32) << f.text;
  bool channel = false, runtime = false;
  for (auto& sc : deq->scales) {
    if (sc.constant && sc.count == 53) channel = sc.min > 0 && sc.max >= sc.min;
    if (!sc.constant) runtime = true;
  }
  EXPECT_TRUE(channel) << f.text;   // one weight scale per output channel
  EXPECT_TRUE(runtime) << f.text;   // the activation's per-row scale
  // the activation rows are stored + 128 as u8: the sums' zero point is the folded
  // 128 · Σ_k w, one per output channel (53, padded to 64)
  ASSERT_NE(deq->zero_point, nullptr) << f.text;
  EXPECT_NE(f.text.find(": 64 values in ["), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("53 values in ["), std::string::npos) << f.text;
  // the activation is quantized at run time: a Cast to i8 with its (run-time) scale is not
  // a constant-scale quantize site, so none is reported for it
}

TEST(QuantInfo, WeightInt8PerTensor) {
  QuantizeOptions o;
  o.mode = QuantMode::WeightInt8;
  o.per_channel = false;
  Graph q = quantize_graph(mlp(64), o).graph;
  Found f = all_sites(q);
  ASSERT_EQ(f.sites.size(), 1u) << f.text;
  const QuantSite& s = f.sites[0];
  EXPECT_EQ(s.kind, QuantSite::Kind::Dequantize);
  EXPECT_EQ(s.integer->dtype, DType::I8) << f.text;
  ASSERT_EQ(s.scales.size(), 1u) << f.text;
  EXPECT_TRUE(s.scales[0].constant);
  EXPECT_EQ(s.scales[0].count, 1);
  EXPECT_GT(s.scales[0].min, 0.0);
  EXPECT_NE(f.text.find("per tensor, "), std::string::npos) << f.text;
}

TEST(QuantInfo, OnnxQdqWithZeroPoints) {
  OnnxOptions o;
  o.qdq_rules = false;   // the plain import: QuantizeLinear / DequantizeLinear as primitives
  Graph g = load_onnx(std::string(QDQ_RULES_DIR) + "/conv/model.onnx", o);
  Found f = all_sites(g);
  int deq = 0, quant = 0, with_zp = 0, per_channel = 0;
  for (auto& s : f.sites) {
    (s.kind == QuantSite::Kind::Dequantize ? deq : quant)++;
    if (s.zero_point) ++with_zp;
    for (auto& sc : s.scales)
      if (sc.constant && sc.count > 1) ++per_channel;
  }
  EXPECT_GE(deq, 3) << f.text;      // activation, weight, bias
  EXPECT_GE(quant, 2) << f.text;    // the input and the conv's output are quantized
  EXPECT_GE(with_zp, 1) << f.text;  // the u8 activations carry a zero point
  EXPECT_GE(per_channel, 1) << f.text;
  EXPECT_NE(f.text.find("quantize at %"), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("(u8 %"), std::string::npos) << f.text;
  // the fused graph (the qdq rules applied) still shows the requantizing sites
  Graph fused = load_onnx(std::string(QDQ_RULES_DIR) + "/conv/model.onnx");
  Found ff = all_sites(fused);
  EXPECT_FALSE(ff.sites.empty());
}

TEST(QuantInfo, FloatGraphsHaveNone) {
  // positions cast to float and scaled (a positional encoding) and an ordinary MLP
  Tensor pos = to(arange(17), DType::F32) * 0.25;
  Tensor x = input("x", {3, 37});
  Tensor y = matmul(x, from_host(random_weight(37, 53, 9)));
  Graph g = Graph::from_outputs({{"p", pos.node()}, {"y", y.node()}});
  Found f = all_sites(g);
  EXPECT_TRUE(f.sites.empty()) << f.text;
}

}  // namespace
}  // namespace lathe
