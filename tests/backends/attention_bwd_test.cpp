// attention_bwd_test.cpp — the fused attention backward (Extern "attention_bwd", lowered by
// core/loop/lower_attention_bwd.cpp) and the stats forward it reads, against the interpreter:
// whole training graphs (the loss's forward, the shared stats forward and dQ, dK, dV, dMask)
// with causal and masked attention, odd sequence lengths (1, 13, 70, 129: one and several
// tiles), head dims that are not powers of two, batch 1 and several heads, K/V shared across
// heads or grouped (GQA), L != S. The interpreter's fused backward is checked against the unfused graph's
// gradients in tests/autodiff/attention_grad_test.cpp.
#include <gtest/gtest.h>

#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/attention_op.h"
#include "tests/backends/diff_util.h"

namespace lathe {
namespace {

Graph training(int64_t B, int64_t H, int64_t L, int64_t S, int64_t E, int64_t Ev, bool causal, int mask_kind, bool shared_kv = false,
               int64_t kv_heads = 0) {
  int64_t kvh = kv_heads ? kv_heads : shared_kv ? 1 : H;
  Tensor q = input("q", {B, H, L, E}), k = input("k", {B, kvh, S, E}), v = input("v", {B, kvh, S, Ev});
  Tensor w = input("w", {B, H, L, Ev});
  std::optional<Tensor> m;
  if (mask_kind == 1) m = input("m", {B, 1, 1, S});
  if (mask_kind == 2) m = input("m", {B, H, L, S});
  Tensor y(attention_call(q.node(), k.node(), v.node(), m ? m->node() : nullptr, causal, 0.37));
  std::vector<Tensor> params{q, k, v};
  if (m) params.push_back(*m);
  Tensor loss = sum(y * w);
  auto g = grad(loss, params);
  std::vector<std::pair<std::string, NodeRef>> outs{{"loss", loss.node()}};
  const char* names[] = {"dq", "dk", "dv", "dm"};
  for (size_t i = 0; i < g.size(); ++i) outs.push_back({names[i], g[i].node()});
  return Graph::from_outputs(outs);
}

TEST(FusedAttentionBackward, MatchesTheInterpreter) {
  test::DiffBatch batch;
  for (int64_t T : {1, 13})
    for (bool causal : {false, true})
      for (int mk : {0, 1, 2}) {
        std::string label = "T=" + std::to_string(T) + (causal ? " causal" : "") + " mask=" + std::to_string(mk);
        batch.add(label + " B=1 H=2", training(1, 2, T, T, 16, 24, causal, mk));
        if (T == 13) batch.add(label + " B=2 H=3 E=7 Ev=5", training(2, 3, T, T, 7, 5, causal, mk));
      }
  if (test::test_backend() != "cuda-emulated") {  // several tiles: the CPU kernels (the emulator is slow)
    batch.add("T=70 causal mask=1", training(1, 2, 70, 70, 16, 8, true, 1));
    batch.add("T=70 mask=2", training(1, 2, 70, 70, 8, 16, false, 2));
    batch.add("T=70 E=12 (row loops)", training(1, 2, 70, 70, 12, 12, true, 0));
    batch.add("T=129 causal (several tiles)", training(1, 2, 129, 129, 16, 16, true, 1));
    batch.add("grouped heads (GQA 6/2)", training(2, 6, 70, 70, 16, 8, true, 1, false, 2));
  }
  batch.add("K/V shared by heads", training(2, 3, 17, 17, 16, 16, true, 0, true));
  batch.add("grouped heads (GQA 4/2)", training(1, 4, 20, 20, 16, 8, true, 1, false, 2));
  batch.add("grouped heads (GQA 4/2) row loops", training(1, 4, 9, 9, 5, 3, false, 2, false, 2));
  batch.add("L=5 S=40", training(1, 2, 5, 40, 16, 16, false, 1));
  batch.add("L=40 S=5 causal", training(1, 2, 40, 5, 16, 16, true, 2));
  EXPECT_EQ(batch.run(), 0);
}

// A training graph computes the forward once: the loss's attention and the backward's stats
// forward are one kernel (share_attention_stats), and no kernel writes an L×S buffer.
TEST(FusedAttentionBackward, OneForwardAndNoScoreBuffer) {
  int64_t T = 70;
  Graph g = training(1, 2, T, T, 12, 12, true, 1);
  // without the mask's gradient: drop the "dm" output
  std::vector<std::pair<std::string, NodeRef>> outs;
  for (auto& o : g.outputs)
    if (o.first != "dm") outs.push_back(o);
  Program p = build_program(Graph::from_outputs(outs));
  int fwd = 0, bwd = 0;
  for (auto& k : p.kg.kernels) {
    fwd += k.kind == "attention";
    bwd += k.kind == "attention_bwd";
  }
  EXPECT_EQ(fwd, 1);
  EXPECT_EQ(bwd, 2);
  for (auto& b : p.kg.buffers) {
    const Shape& s = b.node->shape;
    EXPECT_FALSE(s.size() >= 2 && s[s.size() - 1] == SymInt(T) && s[s.size() - 2] == SymInt(T))
        << "an L×S buffer: %" << b.node->id;
  }
}

}  // namespace
}  // namespace lathe
