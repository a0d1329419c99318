// attention_op.cpp — the fused attention Extern: its attributes and shape rule (attention_op.h).
#include "core/ir/attention_op.h"

#include <map>
#include <tuple>

#include "core/ir/attr_bits.h"
#include "core/ir/build.h"
#include "core/ir/graph.h"

namespace lathe {

std::optional<AttentionSpec> attention_spec(NodeRef n) {
  if (!n || n->op != Op::Extern || n->attrs.name != "attention" || n->attrs.ints.size() < 2 || n->attrs.ints.size() > 3)
    return std::nullopt;
  AttentionSpec s;
  s.causal = n->attrs.ints[0] != 0;
  s.scale = f32_of_attr_bits(n->attrs.ints[1]);
  s.has_mask = n->inputs.size() == 4;
  s.stats = n->attrs.ints.size() == 3 && n->attrs.ints[2] != 0;
  return s;
}

std::optional<AttentionSpec> attention_bwd_spec(NodeRef n) {
  if (!n || n->op != Op::Extern || n->attrs.name != "attention_bwd" || n->attrs.ints.size() != 3) return std::nullopt;
  AttentionSpec s;
  s.causal = n->attrs.ints[0] != 0;
  s.scale = f32_of_attr_bits(n->attrs.ints[1]);
  s.has_mask = n->inputs.size() == 6;
  s.part = static_cast<int>(n->attrs.ints[2]);
  return s;
}

std::string check_attention(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints) {
  if (in.size() != 3 && in.size() != 4) return "Extern attention takes (Q, K, V [, mask])";
  if (ints.size() < 2 || ints.size() > 3 || (ints[0] != 0 && ints[0] != 1) || ints[1] < INT32_MIN || ints[1] > INT32_MAX ||
      (ints.size() == 3 && ints[2] != 0 && ints[2] != 1))
    return "Extern attention takes ints {causal (0 or 1), scale (f32 bits as int32) [, stats (0 or 1)]}";
  if (dt != DType::F32) return "Extern attention is f32 only";
  for (NodeRef x : in)
    if (x->dtype != DType::F32) return "Extern attention: operands must be f32, got " + std::string(dtype_name(x->dtype));
  const Shape &q = in[0]->shape, &k = in[1]->shape, &v = in[2]->shape;
  size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r)
    return "Extern attention: Q, K, V must have the same rank >= 2, got " + shape_to_string(q) + ", " + shape_to_string(k) +
           ", " + shape_to_string(v);
  for (size_t d = 0; d + 2 < r; ++d) {
    for (const Shape* s : {&k, &v}) {
      const SymInt &a = (*s)[d], &b = q[d];
      bool grouped = a.is_const() && b.is_const() && a.value() > 0 && b.value() % a.value() == 0;  // GQA: heads share K/V
      if (a != b && a != SymInt(1) && !grouped)
        return "Extern attention: batch dim " + std::to_string(d) + " of K/V must equal Q's, be 1 or divide it (grouped heads)";
    }
    if (k[d] != v[d]) return "Extern attention: K and V differ in batch dim " + std::to_string(d);
  }
  if (k[r - 1] != q[r - 1]) return "Extern attention: Q and K differ in the embedding dim";
  if (k[r - 2] != v[r - 2]) return "Extern attention: K and V differ in sequence length";
  Shape want = q;
  want[r - 1] = v[r - 1];
  if (ints.size() == 3 && ints[2]) want[r - 1] = v[r - 1] + SymInt(1);
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

NodeRef attention_call(NodeRef q, NodeRef k, NodeRef v, NodeRef mask, bool causal, double scale, bool stats) {
  std::vector<NodeRef> in{q, k, v};
  if (mask) in.push_back(mask);
  Shape out = q->shape;
  if (!out.empty() && v->rank() >= 1) out.back() = stats ? v->shape.back() + SymInt(1) : v->shape.back();
  std::vector<int64_t> ints{causal ? 1 : 0, f32_attr_bits(static_cast<float>(scale))};
  if (stats) ints.push_back(1);
  return prim::extern_call("attention", std::move(in), DType::F32, std::move(out), std::move(ints));
}

std::string check_attention_bwd(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints) {
  if (in.size() != 5 && in.size() != 6) return "Extern attention_bwd takes (Q, K, V [, mask], OS, dO)";
  if (ints.size() != 3 || ints[2] < 0 || ints[2] > 2)
    return "Extern attention_bwd takes ints {causal, scale (f32 bits), part (0 dQ, 1 dK|dV, 2 dS)}";
  std::vector<NodeRef> fwd(in.begin(), in.end() - 2);
  NodeRef os = in[in.size() - 2], dout = in.back();
  const Shape &q = in[0]->shape, &k = in[1]->shape, &v = in[2]->shape;
  size_t r = q.size();
  if (r < 2) return "Extern attention_bwd: Q must have rank >= 2";
  Shape o = q;
  o[r - 1] = v.size() == r ? v[r - 1] : SymInt(1);
  Shape osw = o;
  osw[r - 1] = o[r - 1] + SymInt(1);
  std::string why = check_attention(fwd, DType::F32, osw, {ints[0], ints[1], 1});
  if (!why.empty()) return "Extern attention_bwd: " + why;
  if (os->shape != osw || os->dtype != DType::F32) return "Extern attention_bwd: OS must be f32 " + shape_to_string(osw);
  if (dout->shape != o || dout->dtype != DType::F32) return "Extern attention_bwd: dO must be f32 " + shape_to_string(o);
  if (dt != DType::F32) return "Extern attention_bwd is f32 only";
  Shape want = q;
  if (ints[2] == 1) want[r - 2] = k[r - 2], want[r - 1] = k[r - 1] + v[r - 1];
  if (ints[2] == 2) want[r - 1] = k[r - 2];
  if (shape != want) return "Extern attention_bwd: part " + std::to_string(ints[2]) + "'s shape must be " + shape_to_string(want);
  return "";
}

NodeRef attention_bwd_call(NodeRef q, NodeRef k, NodeRef v, NodeRef mask, NodeRef os, NodeRef dout, bool causal, float scale,
                           int part) {
  std::vector<NodeRef> in{q, k, v};
  if (mask) in.push_back(mask);
  in.push_back(os);
  in.push_back(dout);
  Shape out = q->shape;
  size_t r = out.size();
  if (r >= 2 && k->rank() == r && v->rank() == r) {
    if (part == 1) out[r - 2] = k->shape[r - 2], out[r - 1] = k->shape[r - 1] + v->shape[r - 1];
    if (part == 2) out[r - 1] = k->shape[r - 2];
  }
  return prim::extern_call("attention_bwd", std::move(in), DType::F32, std::move(out),
                           {causal ? 1 : 0, f32_attr_bits(scale), part});
}

Graph share_attention_stats(const Graph& g) {
  // the stats forwards, by (operands, causal, scale)
  std::map<std::tuple<std::vector<NodeRef>, int64_t, int64_t>, NodeRef> with_stats;
  bool plain = false;
  for (NodeRef n : g.toposort()) {
    auto s = attention_spec(n);
    if (!s) continue;
    if (s->stats) with_stats[{n->inputs, n->attrs.ints[0], n->attrs.ints[1]}] = n;
    else plain = true;
  }
  if (with_stats.empty() || !plain) return g;
  return graph_map(g, [&](NodeRef n, const std::vector<NodeRef>& in) -> NodeRef {
    auto s = attention_spec(n);
    if (!s || s->stats) return nullptr;
    if (!with_stats.count({n->inputs, n->attrs.ints[0], n->attrs.ints[1]})) return nullptr;
    // the stats node on the new operands: hash-consing makes it the one graph_map rebuilds
    NodeRef os = attention_call(in[0], in[1], in[2], in.size() == 4 ? in[3] : nullptr, s->causal, s->scale, true);
    size_t r = os->shape.size();
    ViewSpec v;
    v.shape = n->shape;
    v.strides.resize(r);
    SymInt acc = 1;
    for (size_t d = r; d-- > 0;) {
      v.strides[d] = acc;
      acc = acc * os->shape[d];
    }
    v.offset = 0;
    return prim::view(os, v);
  });
}

}  // namespace lathe
