// quant_info.cpp — reading quantization sites back out of the primitive graph (see
// quant_info.h).
#include "core/rewrite/quant_info.h"

#include <cmath>
#include <cstdio>
#include <deque>
#include <unordered_set>

#include "core/runtime/host_tensor.h"

namespace lathe {

namespace {

bool is8(DType t) { return t == DType::I8 || t == DType::U8; }

// Views and Copies (the identity on values).
bool movement(NodeRef n) { return (n->op == Op::View || n->op == Op::Copy) && !n->inputs.empty(); }

NodeRef skip_views(NodeRef n) {
  while (n && movement(n)) n = n->inputs[0];
  return n;
}
// Views and float → float casts (a scale kept in f64 for the division, cast back to f32).
NodeRef skip_float(NodeRef n) {
  while (n && (movement(n) || (n->op == Op::Cast && is_float(n->dtype) && is_float(n->inputs[0]->dtype))))
    n = n->inputs[0];
  return n;
}
// Views and integer widenings (an 8-bit value cast to i32 for the subtraction); stops at
// an 8-bit value (below it is the quantize that made it).
NodeRef skip_int(NodeRef n) {
  while (n && (movement(n) || (n->op == Op::Cast && !is8(n->dtype) && is_int(n->dtype) && is_int(n->inputs[0]->dtype))))
    n = n->inputs[0];
  return n;
}

// A constant, through views and casts (and a negation: the subtrahend of x − zp).
NodeRef const_of(NodeRef n) {
  for (int i = 0; n && i < 8; ++i) {
    if (n->op == Op::Const) return n;
    if ((movement(n) || n->op == Op::Cast || n->op == Op::Neg || n->op == Op::Not) && !n->inputs.empty()) n = n->inputs[0];
    else return nullptr;
  }
  return nullptr;
}

QuantScale scale_of_const(NodeRef c, bool inverse) {
  QuantScale s;
  s.node = c;
  s.constant = true;
  s.inverse = inverse;
  if (c->attrs.data) {
    const HostTensor& t = *c->attrs.data;
    s.count = t.numel();
    for (int64_t i = 0; i < s.count; ++i) {
      double v = t.get_f64(i);
      if (i == 0 || v < s.min) s.min = v;
      if (i == 0 || v > s.max) s.max = v;
    }
  } else {
    s.min = s.max = c->const_value();
  }
  return s;
}

// A float factor that is a constant scale (or 1/constant); false otherwise.
bool constant_scale(NodeRef f, QuantScale* out) {
  NodeRef x = skip_float(f);
  if (x && x->op == Op::Const && is_float(x->dtype)) return *out = scale_of_const(x, false), true;
  if (x && x->op == Op::Recip) {
    NodeRef c = skip_float(x->inputs[0]);
    if (c && c->op == Op::Const) return *out = scale_of_const(c, true), true;
  }
  return false;
}

// The factors of a float product: nested Muls of the same shape (through copies and float
// casts; a broadcasting View makes its product one factor, e.g. a per-row scale).
void factors(NodeRef m, std::vector<NodeRef>& out, int depth = 0) {
  for (NodeRef in : m->inputs) {
    NodeRef x = in;
    while (!x->inputs.empty() && (x->op == Op::Copy || (x->op == Op::Cast && is_float(x->dtype) && is_float(x->inputs[0]->dtype))))
      x = x->inputs[0];
    if (depth < 4 && x->op == Op::Mul && is_float(x->dtype) && x->shape == m->shape) factors(x, out, depth + 1);
    else out.push_back(in);
  }
}

// An integer value entering float arithmetic: Cast(float, x_int), x_int optionally
// x − zp. Fills the site's integer, zero point and contraction flag.
bool integer_leaf(NodeRef f, QuantSite& s) {
  NodeRef c = skip_views(f);
  if (!c || c->op != Op::Cast || c->inputs.empty() || !is_int(c->inputs[0]->dtype)) return false;
  NodeRef v = skip_views(c->inputs[0]);
  NodeRef zp = nullptr;
  if (v->op == Op::Add && v->inputs.size() == 2) {
    for (int side = 0; side < 2 && !zp; ++side) {
      NodeRef other = skip_views(v->inputs[1 - side]);
      if (other->op == Op::Neg && const_of(other)) zp = const_of(other), v = v->inputs[side];
    }
  }
  v = skip_int(v);
  bool contraction = v->op == Op::Reduce && v->attrs.reduce == ReduceOp::Add;
  if (!is8(v->dtype) && !contraction && !zp) return false;   // an index or a count, not a quantized value
  s.integer = v;
  s.zero_point = zp;
  s.contraction = contraction;
  return true;
}

// The f32 sum of products with a dequantized 8-bit weight (weight-int8: the scale comes
// after the sum): Reduce add over Mul(P, Cast(f32, w8)).
bool float_contraction_of_int8(NodeRef f, QuantSite& s) {
  NodeRef r = skip_views(f);
  if (!r || r->op != Op::Reduce || r->attrs.reduce != ReduceOp::Add || !is_float(r->dtype)) return false;
  NodeRef m = skip_views(r->inputs[0]);
  if (m->op != Op::Mul) return false;
  for (NodeRef in : m->inputs) {
    NodeRef c = skip_views(in);
    if (c->op == Op::Cast && !c->inputs.empty() && is8(skip_int(c->inputs[0])->dtype)) {
      s.integer = skip_int(c->inputs[0]);
      s.contraction = true;
      return true;
    }
  }
  return false;
}

bool dequantize_site(NodeRef m, QuantSite& s) {
  if (m->op != Op::Mul || !is_float(m->dtype)) return false;
  std::vector<NodeRef> fs;
  factors(m, fs);
  s = QuantSite{};
  s.kind = QuantSite::Kind::Dequantize;
  s.site = m;
  bool found = false;
  std::vector<NodeRef> runtime;
  for (NodeRef f : fs) {
    QuantScale sc;
    QuantSite other;
    if (constant_scale(f, &sc)) s.scales.push_back(sc);
    else if (integer_leaf(f, other) || float_contraction_of_int8(f, other)) {
      if (found) return false;   // a product of two dequantized values (the contraction's terms)
      found = true;
      s.integer = other.integer, s.zero_point = other.zero_point, s.contraction = other.contraction;
    } else runtime.push_back(f);
  }
  if (!found) return false;
  // Run-time scales: only where the integer side is a contraction (dynamic quantization's
  // per-row activation scale); an 8-bit value times some float is not a dequantize.
  if (s.contraction)
    for (NodeRef f : runtime) {
      QuantScale sc;
      sc.node = skip_float(f);
      sc.count = shape_numel(sc.node->shape).is_const() ? shape_numel(sc.node->shape).value() : 0;
      s.scales.push_back(sc);
    }
  return !s.scales.empty();
}

bool quantize_site(NodeRef c, QuantSite& s) {
  if (c->op != Op::Cast || !is8(c->dtype) || c->inputs.empty() || is8(c->inputs[0]->dtype)) return false;
  s = QuantSite{};
  s.kind = QuantSite::Kind::Quantize;
  s.site = c;
  s.integer = c;
  const double magic = 12582912.0;   // 1.5·2^23: round half to even by an f32 addition
  NodeRef v = c->inputs[0];
  for (int i = 0; i < 24 && v; ++i) {
    v = skip_views(v);
    switch (v->op) {
      case Op::Cast:
      case Op::Neg:
      case Op::Not: v = v->inputs[0]; continue;   // min(a, b) = -max(-a, -b) (~ for integers)
      case Op::Add:
      case Op::Max: {
        NodeRef k0 = const_of(v->inputs[0]), k1 = const_of(v->inputs[1]);
        if (!k0 == !k1) return false;   // both or neither constant: not a clamp / round / zero point
        NodeRef k = k0 ? k0 : k1;
        // the zero point: an i32 add, or an f32 one after the rounding (QuantizeLinear to u8/i8)
        if (v->op == Op::Add && !s.zero_point && !(k->is_scalar_const() && std::fabs(k->const_value()) == magic))
          s.zero_point = k;
        v = k0 ? v->inputs[1] : v->inputs[0];
        continue;
      }
      case Op::Mul: {
        if (!is_float(v->dtype)) return false;
        std::vector<NodeRef> fs;
        factors(v, fs);
        for (NodeRef f : fs) {
          QuantScale sc;
          if (constant_scale(f, &sc)) s.scales.push_back(sc);
        }
        return !s.scales.empty();
      }
      default: return false;
    }
  }
  return false;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string describe_values(NodeRef c) {
  if (!c->attrs.data) return num(c->const_value());
  const HostTensor& t = *c->attrs.data;
  if (t.numel() == 1) return num(t.get_f64(0));
  double mn = 0, mx = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get_f64(i);
    if (i == 0 || v < mn) mn = v;
    if (i == 0 || v > mx) mx = v;
  }
  if (mn == mx) return num(mn) + " (" + std::to_string(t.numel()) + " values, all equal)";
  return std::to_string(t.numel()) + " values in [" + num(mn) + ", " + num(mx) + "]";
}

std::string ref(NodeRef n) { return "%" + std::to_string(n->id); }

}  // namespace

std::vector<std::string> QuantSite::lines() const {
  std::vector<std::string> out;
  std::string what = std::string(dtype_name(integer->dtype)) + " " + ref(integer) + " " + shape_to_string(integer->shape);
  if (kind == Kind::Dequantize) {
    std::string x = contraction ? "sum of products with " + what : what;
    if (zero_point) x = "(" + x + " - zero point)";
    out.push_back("dequantize at " + ref(site) + ": " + std::string(dtype_name(site->dtype)) + " = " + x + " · scale");
  } else {
    out.push_back("quantize at " + ref(site) + ": " + what + " = saturate(round(v / scale)" +
                  (zero_point ? " + zero point)" : ")"));
  }
  for (const QuantScale& sc : scales) {
    // a dequantize multiplies by the scale, a quantize divides by it (or multiplies by a
    // precomputed 1/scale: the requantizing multiplier s_a·s_w/s_y of a fused contraction)
    bool reciprocal = sc.inverse == (kind == Kind::Dequantize);
    std::string l = std::string(reciprocal ? "1/scale " : "scale ") + ref(sc.node) + ": ";
    if (!sc.constant) l += "computed at run time, " + shape_to_string(sc.node->shape) + " (dynamic)";
    else if (sc.count == 1) l += "per tensor, " + num(sc.min);
    else l += std::to_string(sc.count) + " values in [" + num(sc.min) + ", " + num(sc.max) + "]";
    out.push_back(l);
  }
  out.push_back(zero_point ? "zero point " + ref(zero_point) + ": " + describe_values(zero_point)
                           : std::string("zero point: 0 (symmetric)"));
  return out;
}

std::vector<QuantSite> describe_quantization(NodeRef n, const UsersFn& users, size_t limit) {
  std::vector<QuantSite> out;
  if (!n) return out;
  std::unordered_set<NodeRef> seen{n}, sites;
  std::deque<std::pair<NodeRef, int>> queue{{n, 0}};
  size_t visited = 0;
  while (!queue.empty() && out.size() < limit && visited < 256) {
    auto [x, d] = queue.front();
    queue.pop_front();
    ++visited;
    QuantSite s;
    if ((dequantize_site(x, s) || quantize_site(x, s)) && sites.insert(s.site).second) out.push_back(s);
    if (d == 3) continue;
    // a View or Copy on the way is free: it only moves the values
    for (NodeRef in : x->inputs)
      if (d < 2 && seen.insert(in).second) queue.push_back({in, movement(in) ? d : d + 1});
    if (users)
      for (NodeRef u : users(x))
        if (seen.insert(u).second) queue.push_back({u, movement(u) ? d : d + 1});
  }
  return out;
}

}  // namespace lathe
