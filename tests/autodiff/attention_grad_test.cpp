// attention_grad_test.cpp — grad() through the fused attention op (Extern "attention") equals
// grad() through the unfused composite it replaces, for Q, K, V and the mask (causal or not,
// masked or not, K/V shared across heads or grouped (GQA), odd sequence lengths, head dims that are not powers
// of two, batch 1 and several heads), on the interpreter. By default the gradient is the fused
// backward (Extern "attention_bwd" over the forward's saved row log-sum-exp); with
// LATHE_ATTENTION_BWD=unfused it is the definition's gradient. The fused backward's graph holds
// no L×S tensor unless the mask's gradient is asked for.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/interp/interp.h"
#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"

namespace lathe {
namespace {

struct Case {
  int64_t B = 2, H = 3, L = 9, S = 9, E = 8, Ev = 5;
  bool causal = false, shared_kv = false;
  int mask = 1;  // 0 none, 1 [B,1,1,S], 2 [B,H,L,S]
  int64_t kv_heads = 0;  // > 0: grouped heads (GQA), K/V with this many heads
};

// K/V of `kvh` heads repeated to `h` (head i reads i / (h / kvh)), as PyTorch's repeat_interleave
Tensor repeat_heads(const Tensor& x, int64_t h) {
  Shape s = x.shape();
  int64_t kvh = s[1].value();
  if (kvh == h || kvh == 1) return x;
  Shape e{s[0], SymInt(kvh), SymInt(h / kvh), s[2], s[3]};
  return reshape(expand(unsqueeze(x, 2), e), {s[0], SymInt(h), s[2], s[3]});
}

std::string label(const Case& c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) +
         " E=" + std::to_string(c.E) + " Ev=" + std::to_string(c.Ev) + (c.causal ? " causal" : "") +
         (c.shared_kv ? " shared K/V" : "") + " mask=" + std::to_string(c.mask) +
         (c.kv_heads ? " kv_heads=" + std::to_string(c.kv_heads) : "");
}

void check(const Case& c) {
  SCOPED_TRACE(label(c));
  int64_t kvh = c.kv_heads > 0 ? c.kv_heads : c.shared_kv ? 1 : c.H;
  Tensor q = input("q", {c.B, c.H, c.L, c.E}), k = input("k", {c.B, kvh, c.S, c.E}), v = input("v", {c.B, kvh, c.S, c.Ev});
  Tensor w = input("w", {c.B, c.H, c.L, c.Ev});
  std::optional<Tensor> m;
  if (c.mask == 1) m = input("m", {c.B, 1, 1, c.S});
  if (c.mask == 2) m = input("m", {c.B, c.H, c.L, c.S});
  double scale = 0.3;
  Tensor fused(attention_call(q.node(), k.node(), v.node(), m ? m->node() : nullptr, c.causal, scale));
  Tensor ref = scaled_dot_product_attention(q, repeat_heads(k, c.H), repeat_heads(v, c.H), m, c.causal, static_cast<double>(static_cast<float>(scale)));
  std::vector<Tensor> params{q, k, v};
  if (m) params.push_back(*m);
  auto gf = grad(sum(fused * w), params);
  auto gr = grad(sum(ref * w), params);
  std::vector<std::pair<std::string, NodeRef>> outs{{"fused_y", fused.node()}, {"ref_y", ref.node()}};
  const char* names[] = {"dq", "dk", "dv", "dm"};
  for (size_t i = 0; i < params.size(); ++i) {
    outs.push_back({std::string("fused_") + names[i], gf[i].node()});
    outs.push_back({std::string("ref_") + names[i], gr[i].node()});
  }
  Graph g = Graph::from_outputs(outs);
  int bwd = 0;
  for (NodeRef n : g.toposort()) bwd += attention_bwd_spec(n).has_value();
  EXPECT_EQ(bwd, m ? 3 : 2) << "dQ, dK|dV (and dS for the mask) by the fused backward";
  TensorMap in = random_inputs(g, 5);
  if (m && c.mask == 1) {  // padding: keys j % 3 == 2 pushed to -1e9 (key 0 stays, so no row is all padding)
    HostTensor& mt = in.at("m");
    for (int64_t x = 0; x < mt.numel(); ++x)
      if (x % c.S % 3 == 2) mt.ptr<float>()[x] = -1e9f;
  }
  TensorMap got = interpret(g, in);
  std::string ywhy;
  EXPECT_TRUE(allclose(got.at("fused_y"), got.at("ref_y"), 1e-4, 1e-5, &ywhy)) << "forward: " << ywhy;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string why;
    EXPECT_TRUE(allclose(got.at(std::string("fused_") + names[i]), got.at(std::string("ref_") + names[i]), 1e-4, 1e-5, &why))
        << names[i] << ": " << why;
  }
}

TEST(AttentionGrad, FusedMatchesTheUnfusedGraph) {
  check({});
  check({.causal = true, .mask = 0});
  check({.causal = true, .shared_kv = true});
  check({.B = 1, .H = 4, .L = 13, .S = 13, .E = 7, .Ev = 6, .causal = true, .mask = 2});
  check({.B = 1, .H = 1, .L = 1, .S = 1, .E = 3, .Ev = 3, .causal = true, .mask = 0});
  check({.B = 2, .H = 2, .L = 5, .S = 11, .E = 12, .Ev = 9, .causal = false, .mask = 2});
  check({.B = 1, .H = 2, .L = 11, .S = 4, .E = 5, .Ev = 5, .causal = true, .mask = 1});
  check({.B = 2, .H = 6, .L = 9, .S = 9, .E = 8, .Ev = 8, .causal = true, .mask = 1, .kv_heads = 2});  // grouped heads
  check({.B = 1, .H = 4, .L = 7, .S = 10, .E = 5, .Ev = 3, .causal = false, .mask = 2, .kv_heads = 2});
}

// Only dQ/dK/dV asked for: no node of the gradient graph has an L×S shape (the backward
// recomputes the probabilities tile by tile); the unfused gradient has several.
TEST(AttentionGrad, FusedBackwardMaterializesNoScoreMatrix) {
  int64_t T = 37;
  Tensor q = input("q", {1, 2, T, 8}), k = input("k", {1, 2, T, 8}), v = input("v", {1, 2, T, 8});
  Tensor y(attention_call(q.node(), k.node(), v.node(), nullptr, true, 0.35));
  auto count_ls = [&](const std::vector<Tensor>& gs) {
    std::vector<std::pair<std::string, NodeRef>> outs;
    for (size_t i = 0; i < gs.size(); ++i) outs.push_back({"g" + std::to_string(i), gs[i].node()});
    int n = 0;
    for (NodeRef x : Graph::from_outputs(outs).toposort())
      if (x->rank() >= 2 && x->shape[x->rank() - 1] == SymInt(T) && x->shape[x->rank() - 2] == SymInt(T)) ++n;
    return n;
  };
  EXPECT_EQ(count_ls(grad(sum(y), {q, k, v})), 0);
  setenv("LATHE_ATTENTION_BWD", "unfused", 1);
  int unfused = count_ls(grad(sum(y), {q, k, v}));
  unsetenv("LATHE_ATTENTION_BWD");
  EXPECT_GT(unfused, 0);
  setenv("LATHE_ATTENTION_BWD", "sideways", 1);
  EXPECT_THROW(grad(sum(y), {q, k, v}), UserError);
  unsetenv("LATHE_ATTENTION_BWD");
}

}  // namespace
}  // namespace lathe
