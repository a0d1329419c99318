// attention_op.h — the fused attention primitive: an Extern node named "attention".
//
//   Extern{name="attention", ints=[causal, scale_bits]}(Q, K, V [, mask])
//     Q [P.., L, E], K [P'.., S, E], V [P'.., S, Ev] f32, the same rank; each batch dim of K
//     and V equals Q's, is 1 (broadcast over it) or divides it (grouped heads, GQA: Q's index
//     i reads K/V's i / (P / P'), as PyTorch's repeat_interleave / enable_gqa).  mask (optional, f32, additive) has
//     Q's rank and each dim equal to the scores' [P.., L, S] or 1.
//     result [P.., L, Ev]:  softmax(Q·Kᵀ·scale + mask, masked to j <= i when causal) · V
//   scale_bits is the f32 bit pattern of the scale read as a signed int32 (so the text IR
//   round-trips it exactly).
// This is what the `flash-attention` rule set (assets/rules/flash-attention.lua) rewrites
// attention in primitive form into; the scheduler keeps it as one kernel (kind "attention")
// and lowers it to the tiled online-softmax loop nest (core/loop/lower_attention.cpp).
// A row whose scores are all -inf gives NaN, as the unfused softmax does.
//
// With a third int `stats` = 1 (built by autodiff, attention_with_stats) the result is
// [P.., L, Ev + 1]: the output rows and, in the last column, each row's log-sum-exp in base 2
// of the scores times log2(e) (lse2 = log2 Σ_j 2^(x_j·log2 e), x = Q·Kᵀ·scale + mask), so the
// backward can recompute the probabilities p = 2^(x·log2 e - lse2) without storing them.
//
//   Extern{name="attention_bwd", ints=[causal, scale_bits, part]}(Q, K, V [, mask], OS, dO)
//     OS = the stats forward's result [P.., L, Ev+1], dO the output's gradient [P.., L, Ev].
//     FlashAttention-2's backward, the L×S matrices recomputed tile by tile:
//       D = rowsum(dO ∘ O), P = 2^(x·log2 e - lse2), dP = dO·Vᵀ, dS = P ∘ (dP - D)
//     part 0: dQ = dS·K·scale                        [P.., L, E]
//     part 1: dK = dSᵀ·Q·scale and dV = Pᵀ·dO side by side  [P.., S, E + Ev]  (Q's batch dims:
//             autodiff sums the heads that share a broadcast K/V)
//     part 2: dS itself (the mask's gradient before summing broadcast dims)  [P.., L, S]
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/ir/node.h"

namespace lathe {

struct AttentionSpec {
  bool causal = false;
  float scale = 1.0f;
  bool has_mask = false;
  bool stats = false;  // the [.., Ev+1] result with the row log-sum-exp (autodiff's forward)
  int part = -1;       // attention_bwd only: 0 dQ, 1 dK|dV, 2 dS
};

// The spec of an Extern "attention" node; nullopt for any other node.
std::optional<AttentionSpec> attention_spec(NodeRef n);

// The spec of an Extern "attention_bwd" node; nullopt for any other node.
std::optional<AttentionSpec> attention_bwd_spec(NodeRef n);

// Builds the fused node (checked); mask may be nullptr. stats: the [.., Ev+1] form.
NodeRef attention_call(NodeRef q, NodeRef k, NodeRef v, NodeRef mask, bool causal, double scale, bool stats = false);
// Builds one part of the fused backward (checked); `os` is the stats forward's node.
NodeRef attention_bwd_call(NodeRef q, NodeRef k, NodeRef v, NodeRef mask, NodeRef os, NodeRef dout, bool causal, float scale,
                           int part);
// A graph holding both the plain forward and the stats forward over the same operands (a
// training graph: the loss reads one, autodiff's backward the other) computes the stats
// forward once: the plain node becomes a view of its first Ev columns. Run by build_program.
class Graph;
Graph share_attention_stats(const Graph& g);

std::string check_attention_bwd(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints);

// "" when these operands, ints and result type make a valid attention node; else what is wrong.
std::string check_attention(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints);

}  // namespace lathe
