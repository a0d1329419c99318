// attention_op.cpp — the fused attention Extern: its attributes and shape rule (attention_op.h).
#include "core/ir/attention_op.h"

#include <cstring>

#include "core/ir/build.h"

namespace lathe {

int64_t attention_scale_bits(float scale) {
  int32_t b;
  std::memcpy(&b, &scale, sizeof b);
  return b;
}

float attention_scale_of(int64_t bits) {
  int32_t b = static_cast<int32_t>(bits);
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::optional<AttentionSpec> attention_spec(NodeRef n) {
  if (!n || n->op != Op::Extern || n->attrs.name != "attention" || n->attrs.ints.size() != 2) return std::nullopt;
  AttentionSpec s;
  s.causal = n->attrs.ints[0] != 0;
  s.scale = attention_scale_of(n->attrs.ints[1]);
  s.has_mask = n->inputs.size() == 4;
  return s;
}

std::string check_attention(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints) {
  if (in.size() != 3 && in.size() != 4) return "Extern attention takes (Q, K, V [, mask])";
  if (ints.size() != 2 || (ints[0] != 0 && ints[0] != 1) || ints[1] < INT32_MIN || ints[1] > INT32_MAX)
    return "Extern attention takes ints {causal (0 or 1), scale (f32 bits as int32)}";
  if (dt != DType::F32) return "Extern attention is f32 only";
  for (NodeRef x : in)
    if (x->dtype != DType::F32) return "Extern attention: operands must be f32, got " + std::string(dtype_name(x->dtype));
  const Shape &q = in[0]->shape, &k = in[1]->shape, &v = in[2]->shape;
  size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r)
    return "Extern attention: Q, K, V must have the same rank >= 2, got " + shape_to_string(q) + ", " + shape_to_string(k) +
           ", " + shape_to_string(v);
  for (size_t d = 0; d + 2 < r; ++d) {
    for (const Shape* s : {&k, &v})
      if ((*s)[d] != q[d] && (*s)[d] != SymInt(1))
        return "Extern attention: batch dim " + std::to_string(d) + " of K/V must equal Q's or be 1";
    if (k[d] != v[d]) return "Extern attention: K and V differ in batch dim " + std::to_string(d);
  }
  if (k[r - 1] != q[r - 1]) return "Extern attention: Q and K differ in the embedding dim";
  if (k[r - 2] != v[r - 2]) return "Extern attention: K and V differ in sequence length";
  Shape want = q;
  want[r - 1] = v[r - 1];
  if (shape != want) return "Extern attention: result shape must be " + shape_to_string(want);
  if (in.size() == 4) {
    const Shape& m = in[3]->shape;
    Shape scores = q;
    scores[r - 1] = k[r - 2];
    if (m.size() != r) return "Extern attention: the mask must have Q's rank";
    for (size_t d = 0; d < r; ++d)
      if (m[d] != scores[d] && m[d] != SymInt(1))
        return "Extern attention: mask " + shape_to_string(m) + " does not broadcast to the scores " + shape_to_string(scores);
  }
  return "";
}

NodeRef attention_call(NodeRef q, NodeRef k, NodeRef v, NodeRef mask, bool causal, double scale) {
  std::vector<NodeRef> in{q, k, v};
  if (mask) in.push_back(mask);
  Shape out = q->shape;
  if (!out.empty() && v->rank() >= 1) out.back() = v->shape.back();
  return prim::extern_call("attention", std::move(in), DType::F32, std::move(out),
                           {causal ? 1 : 0, attention_scale_bits(static_cast<float>(scale))});
}

}  // namespace lathe
