// attention_grad_test.cpp — grad() through the fused attention op (Extern "attention") equals
// grad() through the unfused composite it replaces, for Q, K, V and the mask (causal or not,
// K/V shared across heads), on the interpreter.
#include <gtest/gtest.h>

#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/interp/interp.h"
#include "core/ir/attention_op.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"

namespace lathe {
namespace {

void check(bool causal, bool shared_kv) {
  int64_t kvh = shared_kv ? 1 : 3;
  Tensor q = input("q", {2, 3, 9, 8}), k = input("k", {2, kvh, 9, 8}), v = input("v", {2, kvh, 9, 5});
  Tensor m = input("m", {2, 1, 1, 9}), w = input("w", {2, 3, 9, 5});
  double scale = 0.3;
  Tensor fused(attention_call(q.node(), k.node(), v.node(), m.node(), causal, scale));
  Tensor ref = scaled_dot_product_attention(q, k, v, m, causal, static_cast<double>(static_cast<float>(scale)));
  std::vector<Tensor> params{q, k, v, m};
  auto gf = grad(sum(fused * w), params);
  auto gr = grad(sum(ref * w), params);
  std::vector<std::pair<std::string, NodeRef>> outs;
  const char* names[] = {"dq", "dk", "dv", "dm"};
  for (size_t i = 0; i < params.size(); ++i) {
    outs.push_back({std::string("fused_") + names[i], gf[i].node()});
    outs.push_back({std::string("ref_") + names[i], gr[i].node()});
  }
  Graph g = Graph::from_outputs(outs);
  TensorMap in = random_inputs(g, 5);
  TensorMap got = interpret(g, in);
  for (const char* n : names) {
    std::string why;
    EXPECT_TRUE(allclose(got.at(std::string("fused_") + n), got.at(std::string("ref_") + n), 1e-4, 1e-5, &why))
        << n << (causal ? " causal" : "") << (shared_kv ? " shared K/V" : "") << ": " << why;
  }
}

TEST(AttentionGrad, FusedMatchesTheUnfusedGraph) {
  check(false, false);
  check(true, false);
  check(true, true);
}

}  // namespace
}  // namespace lathe
