// attention_op.h — the fused attention primitive: an Extern node named "attention".
//
//   Extern{name="attention", ints=[causal, scale_bits]}(Q, K, V [, mask])
//     Q [P.., L, E], K [P'.., S, E], V [P'.., S, Ev] f32, the same rank; each batch dim of K
//     and V equals Q's or is 1 (broadcast over it).  mask (optional, f32, additive) has
//     Q's rank and each dim equal to the scores' [P.., L, S] or 1.
//     result [P.., L, Ev]:  softmax(Q·Kᵀ·scale + mask, masked to j <= i when causal) · V
//   scale_bits is the f32 bit pattern of the scale read as a signed int32 (so the text IR
//   round-trips it exactly).
// This is what the `flash-attention` rule set (assets/rules/flash-attention.lua) rewrites
// attention in primitive form into; the scheduler keeps it as one kernel (kind "attention")
// and lowers it to the tiled online-softmax loop nest (core/loop/lower_attention.cpp).
// A row whose scores are all -inf gives NaN, as the unfused softmax does.
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
};

// The spec of an Extern "attention" node; nullopt for any other node.
std::optional<AttentionSpec> attention_spec(NodeRef n);
int64_t attention_scale_bits(float scale);
float attention_scale_of(int64_t bits);

// Builds the fused node (checked); mask may be nullptr.
NodeRef attention_call(NodeRef q, NodeRef k, NodeRef v, NodeRef mask, bool causal, double scale);

// "" when these operands, ints and result type make a valid attention node; else what is wrong.
std::string check_attention(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints);

}  // namespace lathe
