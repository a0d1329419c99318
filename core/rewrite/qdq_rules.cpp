// qdq_rules.cpp — the `qdq` rule set (see qdq_rules.h for the forms it rewrites).
#include "core/rewrite/qdq_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/interp/interp.h"
#include "core/ir/diag.h"
#include "core/ir/build.h"
#include "core/rewrite/rewriter.h"

namespace lathe {
namespace {

constexpr int64_t kMaxEval = int64_t(1) << 22;  // largest constant evaluated on the host

bool quant8(DType t) { return t == DType::U8 || t == DType::I8; }

int64_t const_numel(NodeRef n) {
  int64_t k = 1;
  for (const auto& d : n->shape) {
    if (!d.is_const()) return -1;
    k *= d.value();
  }
  return k;
}

// Whether each node of the graph being rewritten is constant, computed once by
// apply_qdq_rules (the walk below stops at known nodes); a graph walk per query made loading
// bert_base 0.5 s slower.
thread_local const std::unordered_map<NodeRef, bool>* t_known = nullptr;

bool leaf_dynamic(NodeRef x) {
  return x->op == Op::Input || x->op == Op::Assign || x->op == Op::Extern || const_numel(x) < 0;
}

// No graph input reachable and every shape constant: a value known before the run.
bool is_constant(NodeRef n) {
  std::vector<NodeRef> st{n};
  std::unordered_set<NodeRef> seen{n};
  while (!st.empty()) {
    NodeRef x = st.back();
    st.pop_back();
    if (t_known) {
      if (auto it = t_known->find(x); it != t_known->end()) {
        if (!it->second) return false;
        continue;
      }
    }
    if (leaf_dynamic(x)) return false;
    for (NodeRef i : x->inputs)
      if (seen.insert(i).second) st.push_back(i);
  }
  return true;
}

std::optional<HostTensor> evaluate(NodeRef n) {
  if (!is_constant(n) || const_numel(n) > kMaxEval) return std::nullopt;
  if (n->op == Op::Const && n->attrs.data) return *n->attrs.data;
  return interpret(Graph::from_outputs({{"v", n}}), {}).at("v");
}

// Views from the outside in, and what they read.
struct Chain {
  std::vector<ViewSpec> views;
  NodeRef base = nullptr;
};
Chain peel(NodeRef n) {
  Chain c;
  while (n->op == Op::View) {
    c.views.push_back(*n->attrs.view);
    n = n->inputs[0];
  }
  c.base = n;
  return c;
}
NodeRef apply(const Chain& c, NodeRef x) {
  for (auto it = c.views.rbegin(); it != c.views.rend(); ++it) x = prim::view(x, *it);
  return x;
}

// The one value of a constant that holds a single value everywhere; nullopt otherwise.
// Seen through broadcast views, Neg, Recip and exact Casts (a zero point is −Cast(zp)
// broadcast, a QuantizeLinear's 1/s_y Recip(Cast(s_y)) broadcast).
std::optional<double> single_value(NodeRef n) {
  std::vector<NodeRef> ops;  // Neg / Cast, outermost first
  for (;;) {
    if (n->op == Op::View && !n->attrs.view->has_mask()) n = n->inputs[0];
    else if (n->op == Op::Neg || (n->op == Op::Recip && is_float(n->dtype)) ||
             (n->op == Op::Cast && n->dtype != DType::Bool && n->inputs[0]->dtype != DType::Bool))
      ops.push_back(n), n = n->inputs[0];
    else break;
  }
  if (!ops.empty()) {
    auto v = single_value(n);
    if (!v) return std::nullopt;
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      DType t = (*it)->dtype;
      if (t == DType::F16 || t == DType::BF16) return std::nullopt;
      if ((*it)->op == Op::Neg || (*it)->op == Op::Recip) {
        *v = (*it)->op == Op::Neg ? -*v : 1 / *v;
        if (t == DType::F32) *v = static_cast<float>(*v);
        continue;
      }
      if (t == DType::F32) *v = static_cast<float>(*v);  // exact casts only: integral values the integer type holds
      bool is_unsigned = t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
      if (is_int(t) && (*v != std::trunc(*v) || std::fabs(*v) > 32767 || (is_unsigned && *v < 0))) return std::nullopt;
      if (t == DType::I8 && (*v < -128 || *v > 127)) return std::nullopt;
      if (t == DType::U8 && *v > 255) return std::nullopt;
    }
    return v;
  }
  if (n->is_scalar_const()) return n->const_value();
  if (const_numel(n) < 1 || const_numel(n) > (int64_t(1) << 16)) return std::nullopt;
  auto v = evaluate(n);
  if (!v) return std::nullopt;
  double x = v->get_f64(0);
  for (int64_t i = 1; i < v->numel(); ++i)
    if (!(v->get_f64(i) == x)) return std::nullopt;
  return x;
}

// DequantizeLinear as the importer lowers it: Mul(Cast_f32(q), s) with q = Cast_i32(x)
// (x u8/i8), Cast_i32(x) + z (z a constant: the zero point is −z), or an i32 tensor (a
// bias); s a constant f32 of the output's shape (per tensor or a broadcast per axis).
struct Dq {
  NodeRef x = nullptr;
  NodeRef scale = nullptr;
  int64_t zp = 0;
};
std::optional<Dq> match_dq(NodeRef y) {
  if (y->op != Op::Mul || y->dtype != DType::F32) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    NodeRef c = y->inputs[i], s = y->inputs[1 - i];
    if (c->op != Op::Cast || c->inputs[0]->dtype != DType::I32 || !is_constant(s)) continue;
    NodeRef v = c->inputs[0];
    if (v->op == Op::Cast && quant8(v->inputs[0]->dtype)) return Dq{v->inputs[0], s, 0};
    if (v->op == Op::Add) {
      for (int j = 0; j < 2; ++j) {
        NodeRef a = v->inputs[j], z = v->inputs[1 - j];
        if (a->op != Op::Cast || !quant8(a->inputs[0]->dtype) || !is_constant(z)) continue;
        if (auto zv = single_value(z)) return Dq{a->inputs[0], s, -static_cast<int64_t>(*zv)};
      }
      continue;
    }
    if (v->op == Op::Const) return Dq{v, s, 0};  // an int32 constant (a bias)
  }
  return std::nullopt;
}

// f32(acc) · S: an i32 sum (not a constant) times a constant scale.
struct ScaledAcc {
  NodeRef acc = nullptr, scale = nullptr;
};
std::optional<ScaledAcc> match_scaled_acc(NodeRef n) {
  if (n->op != Op::Mul || n->dtype != DType::F32) return std::nullopt;
  for (int j = 0; j < 2; ++j) {
    NodeRef a = n->inputs[j], s = n->inputs[1 - j];
    if (a->op == Op::Cast && a->inputs[0]->dtype == DType::I32 && is_constant(s) && !is_constant(a))
      return ScaledAcc{a->inputs[0], s};
  }
  return std::nullopt;
}

// The constant s (views over a literal or a scalar) with every value multiplied by f, in f32.
NodeRef scaled_constant(NodeRef s, double f) {
  Chain c = peel(s);
  if (c.base->is_scalar_const())
    return apply(c, prim::constant(static_cast<float>(c.base->const_value() * f), DType::F32, c.base->shape));
  auto v = evaluate(c.base);
  if (!v) return nullptr;
  HostTensor out(DType::F32, v->shape());
  for (int64_t i = 0; i < v->numel(); ++i) out.set_f64(i, static_cast<float>(static_cast<float>(v->get_f64(i)) * f));
  return apply(c, prim::constant_tensor(out));
}

// A broadcast view read as the smaller tensor it broadcasts (size 1 where the stride is 0).
NodeRef unbroadcast(NodeRef n) {
  if (n->op != Op::View || n->attrs.view->has_mask()) return n;
  ViewSpec v = *n->attrs.view;
  bool changed = false;
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.strides[d] == SymInt(0) && v.shape[d] != SymInt(1)) v.shape[d] = SymInt(1), changed = true;
  return changed ? prim::view(n->inputs[0], v) : n;
}

// zp · Σ over `axes` of u, a view of the constant x (the weight as the product reads it,
// broadcast dims at size 1): a literal of u's shape with `axes` at 1. When u only permutes x's
// dims, the sum runs over x itself in its own layout (a transposing view copied element by
// element through the interpreter made loading bert_base 0.5 s slower).
NodeRef weight_sums(NodeRef u, NodeRef x, const std::vector<int>& axes, int64_t zp) {
  Shape out = u->shape;
  for (int a : axes) out[a] = SymInt(1);
  if (u->op == Op::View && u->inputs[0] == x && !u->attrs.view->has_mask() && u->attrs.view->offset == SymInt(0) &&
      const_numel(x) > 0) {
    const ViewSpec& v = *u->attrs.view;
    int xr = static_cast<int>(x->rank());
    std::vector<int64_t> rm(xr);
    int64_t st = 1;
    for (int a = xr - 1; a >= 0; --a) rm[a] = st, st *= x->shape[a].value();
    std::vector<int> map(v.shape.size(), -1);
    std::vector<bool> used(xr, false);
    bool ok = true;
    for (size_t d = 0; d < v.shape.size() && ok; ++d) {
      if (v.shape[d] == SymInt(1)) continue;
      ok = v.strides[d].is_const() && v.shape[d].is_const();
      int found = -1;
      for (int a = 0; ok && a < xr && found < 0; ++a)
        if (!used[a] && rm[a] == v.strides[d].value() && x->shape[a] == v.shape[d]) found = a;
      if (found < 0) ok = false;
      else map[d] = found, used[found] = true;
    }
    for (int a = 0; a < xr && ok; ++a) ok = used[a] || x->shape[a] == SymInt(1);
    if (ok) {
      std::vector<int> xaxes;
      for (int a : axes)
        if (map[a] >= 0) xaxes.push_back(map[a]);
      std::sort(xaxes.begin(), xaxes.end());
      NodeRef sum = prim::cast(x, DType::I32);
      if (!xaxes.empty()) sum = prim::reduce(ReduceOp::Add, sum, xaxes);
      sum = prim::binary(Op::Mul, sum, prim::constant_int(zp, DType::I32, sum->shape));
      if (auto val = evaluate(sum)) {
        NodeRef c = prim::constant_tensor(*val);  // x's dims, the summed ones at 1
        ViewSpec o;
        o.shape = out;
        o.strides.assign(out.size(), SymInt(0));
        std::vector<int64_t> crm(xr);
        int64_t cs = 1;
        for (int a = xr - 1; a >= 0; --a) crm[a] = cs, cs *= c->shape[a].value();
        for (size_t d = 0; d < out.size(); ++d)
          if (map[d] >= 0 && out[d] != SymInt(1)) o.strides[d] = SymInt(crm[map[d]]);
        if (auto lit = evaluate(prim::view(c, o))) return prim::constant_tensor(*lit);
      }
    }
  }
  NodeRef wsum = prim::reduce(ReduceOp::Add, prim::cast(u, DType::I32), axes);
  wsum = prim::binary(Op::Mul, wsum, prim::constant_int(zp, DType::I32, wsum->shape));
  if (auto v = evaluate(wsum)) wsum = prim::constant_tensor(*v);
  return wsum;
}

// ---- qdq-contraction ------------------------------------------------------------------

NodeRef contraction(const Match& m) {
  NodeRef r = m.root;
  ProvenanceScope ps(r->prov.path);  // the new nodes (and kernels) keep the model's names
  if (r->attrs.reduce != ReduceOp::Add || r->dtype != DType::F32) return nullptr;
  NodeRef mul = r->inputs[0];
  if (mul->op != Op::Mul) return nullptr;
  std::vector<bool> reduced(r->rank(), false);
  for (int ax : r->attrs.axes) reduced[ax] = true;
  for (int i = 0; i < 2; ++i) {
    Chain ca = peel(mul->inputs[i]), cb = peel(mul->inputs[1 - i]);
    auto da = match_dq(ca.base), db = match_dq(cb.base);
    if (!da || !db || !quant8(da->x->dtype) || !quant8(db->x->dtype) || db->zp != 0) continue;
    auto sa = single_value(da->scale);
    if (!sa) continue;
    // w's side: one view of the 8-bit weight, no masked reads
    NodeRef vb = apply(cb, db->x);
    if (vb->op != Op::View || vb->inputs[0] != db->x || vb->attrs.view->has_mask()) continue;
    // the scale as the output sees it: constant along the reduced axes
    NodeRef S;
    if (auto sb = single_value(db->scale)) {
      S = prim::constant(static_cast<float>(static_cast<float>(*sa) * static_cast<float>(*sb)), DType::F32, r->shape);
    } else {
      NodeRef vs = apply(cb, db->scale);
      if (vs->op != Op::View || vs->attrs.view->has_mask() || vs->inputs[0]->op == Op::View) continue;
      ViewSpec spec = *vs->attrs.view;
      bool ok = true;
      for (size_t d = 0; d < spec.shape.size(); ++d)
        if (reduced[d]) {
          ok = ok && (spec.shape[d] == SymInt(1) || spec.strides[d] == SymInt(0));
          spec.shape[d] = SymInt(1), spec.strides[d] = SymInt(0);
        }
      if (!ok) continue;
      NodeRef base = scaled_constant(vs->inputs[0], static_cast<float>(*sa));
      if (!base) continue;
      S = prim::view(base, spec);
    }
    // a's side: the same views of the 8-bit input; a masked (padded) read reads zp_a, the
    // value that dequantizes to the float graph's 0
    NodeRef va = da->x;
    for (auto it = ca.views.rbegin(); it != ca.views.rend(); ++it) {
      if (it->has_mask() && da->zp != 0) {
        NodeRef inside = prim::view(prim::constant(1, DType::Bool, va->shape), *it);
        NodeRef pad = prim::constant_int(da->zp, va->dtype, it->shape);
        va = prim::where(inside, prim::view(va, *it), pad);
      } else {
        va = prim::view(va, *it);
      }
    }
    NodeRef prod = prim::binary(Op::Mul, prim::cast(va, DType::I32), prim::cast(vb, DType::I32));
    NodeRef acc = prim::reduce(ReduceOp::Add, prod, r->attrs.axes);
    if (da->zp != 0) {  // − zp_a · Σ w over the window (folded: w is a constant)
      NodeRef wsum = weight_sums(unbroadcast(vb), db->x, r->attrs.axes, da->zp);
      ViewSpec bc = ViewSpec::contiguous(wsum->shape);
      bc.shape = r->shape;
      for (size_t d = 0; d < bc.shape.size(); ++d)
        if (wsum->shape[d] == SymInt(1)) bc.strides[d] = SymInt(0);
      acc = prim::binary(Op::Add, acc, prim::binary(Op::Mul, prim::view(wsum, bc), prim::constant_int(-1, DType::I32, r->shape)));
    }
    return prim::binary(Op::Mul, prim::cast(acc, DType::F32), S);
  }
  return nullptr;
}

// ---- qdq-bias ---------------------------------------------------------------------------

// Whether two constants of one shape hold the same values (relative 1e-6), compared on
// what they broadcast.
bool same_values(const HostTensor& va, const HostTensor& vb) {
  int64_t na = va.numel(), nb = vb.numel();
  if (na != nb && na != 1 && nb != 1) return false;
  if (na == nb && va.shape() != vb.shape()) return false;
  for (int64_t i = 0; i < std::max(na, nb); ++i) {
    double x = va.get_f64(na == 1 ? 0 : i), y = vb.get_f64(nb == 1 ? 0 : i);
    if (!(std::fabs(x - y) <= 1e-6 * std::fabs(y))) return false;
  }
  return true;
}
bool same_scale(NodeRef a, NodeRef b) {
  auto va = evaluate(unbroadcast(a)), vb = evaluate(unbroadcast(b));
  if (va && vb && same_values(*va, *vb)) return true;
  if (va && vb && va->shape() == vb->shape()) return false;
  va = evaluate(a), vb = evaluate(b);  // broadcast differently (a view of a view): all of it
  return va && vb && same_values(*va, *vb);
}

NodeRef bias(const Match& m) {
  NodeRef r = m.root;
  ProvenanceScope ps(r->prov.path);
  if (r->dtype != DType::F32) return nullptr;
  for (int i = 0; i < 2; ++i) {
    Chain cp = peel(r->inputs[i]), cq = peel(r->inputs[1 - i]);
    auto sa = match_scaled_acc(cp.base);
    auto dq = match_dq(cq.base);
    if (!sa || !dq || dq->x->dtype != DType::I32 || dq->zp != 0) continue;
    NodeRef S = apply(cp, sa->scale), Sb = apply(cq, dq->scale);
    if (!same_scale(S, Sb)) continue;
    // a view of a view of the scale (a reshape that does not compose with its broadcast)
    // would be materialized; the bias's own view of its (equal) scale is one view
    if (S->op == Op::View && S->inputs[0]->op == Op::View) S = Sb;
    NodeRef sum = prim::binary(Op::Add, apply(cp, sa->acc), apply(cq, dq->x));
    return prim::binary(Op::Mul, prim::cast(sum, DType::F32), S);
  }
  return nullptr;
}

// ---- qdq-requant ------------------------------------------------------------------------

NodeRef requant(const Match& m) {
  NodeRef r = m.root, n = r->inputs[0];
  ProvenanceScope ps(r->prov.path);
  if (r->dtype != DType::F32 || n->dtype != DType::F64 || n->op != Op::Mul) return nullptr;
  for (int i = 0; i < 2; ++i) {
    NodeRef c = n->inputs[i];
    if (c->op != Op::Cast || c->inputs[0]->dtype != DType::F32) continue;
    auto f = single_value(n->inputs[1 - i]);
    if (!f || !(*f > 0) || !std::isfinite(*f)) continue;
    Chain outer = peel(c->inputs[0]), inner;
    NodeRef core = outer.base;
    bool relu = false;
    if (core->op == Op::Max) {
      for (int j = 0; j < 2 && !relu; ++j) {
        auto z = single_value(core->inputs[1 - j]);
        if (z && *z == 0) {
          relu = true;
          inner = peel(core->inputs[j]);
          core = inner.base;
        }
      }
      if (!relu) continue;
    }
    auto sa = match_scaled_acc(core);
    if (!sa) continue;
    NodeRef S = scaled_constant(sa->scale, *f);
    if (!S) continue;
    NodeRef y = apply(inner, prim::binary(Op::Mul, prim::cast(sa->acc, DType::F32), S));
    if (relu) y = prim::binary(Op::Max, y, prim::constant(0, DType::F32, y->shape));
    return apply(outer, y);
  }
  return nullptr;
}

// ---- qdq-maxpool ------------------------------------------------------------------------

// QuantizeLinear as the importer lowers it to u8/i8: Cast_T(((max(v, −2^22) + 1.5·2^23) −
// 1.5·2^23) + zp) with v = f32(f64(x) · 1/s_y), s_y per tensor. The f32 x, 1/s_y and zp.
struct Quant {
  NodeRef x = nullptr;
  double inv_scale = 0;
  int64_t zp = 0;
};
std::optional<Quant> match_quantize(NodeRef r) {
  if (r->op != Op::Cast || !quant8(r->dtype)) return std::nullopt;
  const double magic = 12582912.0;
  NodeRef v = r->inputs[0];
  Quant q;
  std::optional<double> adds[3];
  int n = 0;
  while (v->op == Op::Add && v->dtype == DType::F32 && n < 3) {  // the adds, outermost first
    bool found = false;
    for (int j = 0; j < 2 && !found; ++j)
      if (auto k = single_value(v->inputs[1 - j]); k && is_constant(v->inputs[1 - j]))
        adds[n++] = k, v = v->inputs[j], found = true;
    if (!found) return std::nullopt;
  }
  if (n == 3) {
    if (!(*adds[0] == std::trunc(*adds[0]) && std::fabs(*adds[0]) <= 255)) return std::nullopt;
    q.zp = static_cast<int64_t>(*adds[0]);
  } else if (n != 2) {
    return std::nullopt;
  }
  if (*adds[n - 1] != magic || *adds[n - 2] != -magic) return std::nullopt;
  if (v->op == Op::Max) {  // max(v, −2^22)
    bool found = false;
    for (int j = 0; j < 2 && !found; ++j)
      if (auto l = single_value(v->inputs[1 - j]); l && *l == -4194304.0) v = v->inputs[j], found = true;
    if (!found) return std::nullopt;
  }
  if (v->op != Op::Cast || v->dtype != DType::F32) return std::nullopt;
  NodeRef m = v->inputs[0];
  if (m->op != Op::Mul || m->dtype != DType::F64) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    NodeRef c = m->inputs[i];
    if (c->op != Op::Cast || c->inputs[0]->dtype != DType::F32) continue;
    auto f = single_value(m->inputs[1 - i]);
    if (!f || !std::isfinite(*f)) continue;
    q.x = c->inputs[0];
    q.inv_scale = *f;
    return q;
  }
  return std::nullopt;
}

// Q(maxpool(DQ(x))) → maxpool(x): with one positive scale s and zero point z on both sides,
// dequantizing is monotone, so the max of the dequantized window is the dequantized max, and
// Q(DQ(q)) = q exactly (|q − z| <= 255: f32((q − z)·s) · 1/s is within 2^-15 of q − z). The
// form is Reduce{max} over views of DQ(x), or of Where(inside, views of DQ(x), −inf) (padding):
// the pool then pads with the type's lowest value, which is also what Q makes of −inf (a window
// of padding only, possible with dilations, gives the same result either way).
NodeRef maxpool(const Match& m) {
  NodeRef r = m.root;
  ProvenanceScope ps(r->prov.path);
  auto q = match_quantize(r);
  if (!q) return nullptr;
  Chain outer = peel(q->x);
  NodeRef red = outer.base;
  if (red->op != Op::Reduce || red->attrs.reduce != ReduceOp::Max || red->dtype != DType::F32) return nullptr;
  Chain c1 = peel(red->inputs[0]), c2;
  NodeRef mask = nullptr;
  if (c1.base->op == Op::Where) {
    mask = c1.base->inputs[0];
    auto fill = single_value(c1.base->inputs[2]);
    if (!fill || !(std::isinf(*fill) && *fill < 0)) return nullptr;
    c2 = peel(c1.base->inputs[1]);
  } else {
    c2 = c1, c1 = Chain{};
    c1.base = c2.base;
  }
  auto dq = match_dq(c2.base);
  if (!dq || dq->x->dtype != r->dtype || dq->zp != q->zp) return nullptr;
  auto s = single_value(dq->scale);
  if (!s || !(*s > 0)) return nullptr;
  float sf = static_cast<float>(*s);
  if (!std::isnormal(sf) || !std::isfinite(sf * 512.0f) || q->inv_scale != 1.0 / static_cast<double>(sf)) return nullptr;
  const DType t = r->dtype;
  NodeRef leaf = apply(c2, dq->x);
  if (mask) leaf = apply(c1, prim::where(mask, leaf, prim::constant_int(t == DType::U8 ? 0 : -128, t, leaf->shape)));
  NodeRef y = apply(outer, prim::reduce(ReduceOp::Max, leaf, red->attrs.axes));
  return y->shape == r->shape ? y : nullptr;
}

// ---- qdq-sat16 ---------------------------------------------------------------------------

// x read along `axis` from `start`, `count` elements `step` apart (a view of x's own layout);
// the first `valid` of them read (the rest read 0) when valid < count.
NodeRef along(NodeRef x, int axis, int64_t start, int64_t count, int64_t step, int64_t valid) {
  ViewSpec v = ViewSpec::contiguous(x->shape);
  v.offset = v.strides[axis] * SymInt(start);
  v.shape[axis] = SymInt(count);
  v.strides[axis] = v.strides[axis] * SymInt(step);
  if (valid < count) {
    for (size_t d = 0; d < v.shape.size(); ++d) v.mask.push_back({SymInt(0), v.shape[d]});
    v.mask[axis].second = SymInt(valid);
  }
  return prim::view(x, v);
}

// Σ_k u8·i8 as ONNX Runtime's AVX2 kernels (MLAS U8S8 without VNNI) compute it: vpmaddubsw
// adds the products of each pair of neighbouring k (0-1, 2-3, …) into an i16 that saturates at
// ±2^15, vpmaddwd widens the pairs: Σ_j sat16(a_2j·w_2j + a_2j+1·w_2j+1) over the raw 8-bit
// values (the zero point's correction stays exact). Which k are neighbours:
//  - one reduced axis (MatMul, Gemm, a 1×1 Conv: size-1 axes aside): k in order, an odd last
//    k alone (its partner reads 0);
//  - several (a k×k Conv): ORT's im2col runs k as (kh, kw, ci), the input channels innermost,
//    so the pairs are neighbouring channels of one tap when the channels (per group) are even;
//    the channel axis is the reduced axis along which the weight's view strides the most
//    (OIHW). An odd channel count pairs channels of neighbouring taps, which no view states:
//    such a conv (the 3-channel stem, a depthwise one) stays exact (scripts/qdq-ort-order.py).
// The form (match_matmul reads it back as an int8 GEMM with saturating pairs,
// MatmulMatch::sat16, the pair axis innermost in its k):
//   Reduce_axes(−max(−max(a[2j]·w[2j] + a[2j+1]·w[2j+1], −2^15), −(2^15 − 1)))
NodeRef sat16(const Match& m) {
  NodeRef r = m.root;
  ProvenanceScope ps(r->prov.path);
  if (r->attrs.reduce != ReduceOp::Add || r->dtype != DType::I32 || r->attrs.axes.empty()) return nullptr;
  NodeRef mul = r->inputs[0];
  if (mul->op != Op::Mul || mul->inputs[0]->op != Op::Cast || mul->inputs[1]->op != Op::Cast) return nullptr;
  NodeRef a = mul->inputs[0]->inputs[0], w = mul->inputs[1]->inputs[0];
  if (a->dtype == DType::I8 && w->dtype == DType::U8) std::swap(a, w);
  if (a->dtype != DType::U8 || w->dtype != DType::I8 || a->shape != w->shape) return nullptr;
  std::vector<int> axes;  // the reduced axes of size > 1
  for (int d : r->attrs.axes) {
    if (!a->shape[d].is_const()) return nullptr;
    if (a->shape[d].value() > 1) axes.push_back(d);
  }
  if (axes.empty()) return nullptr;
  int ax = axes[0];
  if (axes.size() > 1) {  // a conv: the input channels, the weight's largest stride
    if (w->op != Op::View || w->attrs.view->has_mask()) return nullptr;
    const ViewSpec& v = *w->attrs.view;
    int64_t best = -1;
    bool tie = false;
    for (int d : axes) {
      if (!v.strides[d].is_const()) return nullptr;
      int64_t st = std::abs(v.strides[d].value());
      if (st > best) best = st, ax = d, tie = false;
      else if (st == best) tie = true;
    }
    if (tie || a->shape[ax].value() % 2) return nullptr;  // odd channels: pairs across taps
  }
  const int64_t K = a->shape[ax].value(), K2 = (K + 1) / 2;
  if (K < 2) return nullptr;  // one product: nothing to pair
  auto i32 = [](NodeRef x) { return prim::cast(x, DType::I32); };
  NodeRef even = prim::binary(Op::Mul, i32(along(a, ax, 0, K2, 2, K2)), i32(along(w, ax, 0, K2, 2, K2)));
  NodeRef odd = prim::binary(Op::Mul, i32(along(a, ax, 1, K2, 2, K / 2)), i32(along(w, ax, 1, K2, 2, K / 2)));
  NodeRef pair = prim::binary(Op::Add, even, odd);
  // clamp to [−2^15, 2^15 − 1] with Max and Neg (the IR has no Min)
  NodeRef lo = prim::binary(Op::Max, pair, prim::constant_int(-32768, DType::I32, pair->shape));
  NodeRef hi = prim::unary(Op::Neg, prim::binary(Op::Max, prim::unary(Op::Neg, lo),
                                                 prim::constant_int(-32767, DType::I32, pair->shape)));
  return prim::reduce(ReduceOp::Add, hi, r->attrs.axes);
}

}  // namespace

Ruleset qdq_sat16_rules() {
  return Ruleset("qdq-sat16", {make_rule("qdq-sat16", "Reduce(x)", sat16)});
}

namespace {
int g_forced_saturate = -1;
}

bool host_int8_pairs_saturate() {
  if (g_forced_saturate >= 0) return g_forced_saturate == 1;
  static const bool host = [] {
    bool sat = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    sat = __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512vnni");
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
    if (__builtin_cpu_supports("avxvnni")) sat = false;
#endif
#endif
    return sat;
  }();
  return host;
}

void force_host_int8_pairs_saturate(int v) { g_forced_saturate = v; }

bool qdq_sat16_default() {
  if (const char* e = std::getenv("LATHE_QDQ_SAT16"); e && *e) {
    std::string s(e);
    if (s == "1" || s == "on") return true;
    if (s == "0" || s == "off") return false;
    throw UserError("LATHE_QDQ_SAT16='" + s + "': expected 1 (saturating pair sums, as ONNX Runtime on x86 without VNNI) or 0 (exact sums)");
  }
  return host_int8_pairs_saturate();
}

Ruleset qdq_rules() {
  return Ruleset("qdq", {
      make_rule("qdq-contraction", "Reduce(x)", contraction),
      make_rule("qdq-bias", "Add(a, b)", bias),
      make_rule("qdq-requant", "Cast(x)", requant),
      make_rule("qdq-maxpool", "Cast(x)", maxpool),
  });
}

Graph apply_qdq_rules(const Graph& g, std::map<std::string, int>* fired, bool sat16) {
  static const Ruleset rules = qdq_rules();
  RuleIndex index({rules});
  RewriteContext ctx;
  ctx.rules = &index;
  Graph cur = g;
  for (int pass = 0; pass < 8; ++pass) {
    std::unordered_map<NodeRef, bool> known;
    for (NodeRef n : topo_order(cur)) {
      bool c = !leaf_dynamic(n);
      for (NodeRef i : n->inputs) c = c && known.at(i);
      known[n] = c;
    }
    t_known = &known;
    SweepResult s;
    try {
      s = sweep(cur, ctx);
    } catch (...) {
      t_known = nullptr;
      throw;
    }
    t_known = nullptr;
    if (fired)
      for (auto& [k, v] : s.fired) (*fired)[k] += v;
    cur = std::move(s.graph);
    if (s.rewrites == 0) break;
  }
  if (sat16) {
    static const Ruleset srules = qdq_sat16_rules();
    RuleIndex sindex({srules});
    RewriteContext sctx;
    sctx.rules = &sindex;
    SweepResult s = sweep(cur, sctx);
    if (fired)
      for (auto& [k, v] : s.fired) (*fired)[k] += v;
    cur = std::move(s.graph);
  }
  return cur;
}

}  // namespace lathe
