// contraction.cpp — match_matmul: recognise a Reduce add over Mul(P, Q) as a contraction
// with grouped M / N / K / batch dims and operands read through chains of Views (see
// kernel_graph.h), and fusable_epilogue: may a kernel root be that contraction's epilogue.
#include <algorithm>
#include <cstdlib>
#include <functional>

#include "core/ir/build.h"
#include "core/loop/lower.h"
#include "core/schedule/kernel_graph.h"
#include "core/schedule/view_index.h"

namespace lathe {

bool Affine::uses(int dim) const {
  for (auto& [d, c] : terms)
    if (d == dim && c != SymInt(0)) return true;
  return false;
}

std::optional<int64_t> Affine::const_coef(int dim) const {
  SymInt c = 0;
  for (auto& [d, k] : terms)
    if (d == dim) c = c + k;
  if (!c.is_const()) return std::nullopt;
  return c.value();
}

bool OperandAccess::uses(int dim) const {
  if (addr.uses(dim)) return true;
  for (auto& b : bounds)
    if (b.coord.uses(dim)) return true;
  return false;
}

namespace {

Affine scaled(const Affine& a, const SymInt& k) {
  Affine r;
  r.c0 = a.c0 * k;
  for (auto& [d, c] : a.terms) r.terms.push_back({d, c * k});
  return r;
}

void accumulate(Affine& into, const Affine& a) {
  into.c0 = into.c0 + a.c0;
  for (auto& [d, c] : a.terms) {
    auto it = std::find_if(into.terms.begin(), into.terms.end(), [&](auto& t) { return t.first == d; });
    if (it == into.terms.end()) into.terms.push_back({d, c});
    else it->second = it->second + c;
  }
}

// Walks the View chain from the Mul operand `x` (shape = the Mul's) down to the tensor it
// reads; a view of a view is read through (a padded input under a sliding window) when it
// is per-dimension index math, else the inner view is the tensor read (and materialized).
OperandAccess access_of(NodeRef x) {
  OperandAccess acc;
  std::vector<Affine> coord(x->shape.size());
  for (size_t d = 0; d < coord.size(); ++d) coord[d].terms = {{(int)d, SymInt(1)}};
  NodeRef n = x;
  while (n->op == Op::View) {
    const ViewSpec& v = *n->attrs.view;
    NodeRef in = n->inputs[0];
    for (size_t d = 0; d < v.mask.size(); ++d)
      if (v.mask[d].first != SymInt(0) || v.mask[d].second != v.shape[d])
        acc.bounds.push_back({coord[d], v.mask[d].first, v.mask[d].second});
    std::optional<ViewDimMap> map;
    if (in->op == Op::View) map = view_dim_map(v, in->shape);
    if (!map || map->all_masked) {
      acc.src = in;
      acc.addr.c0 = v.offset;
      for (size_t d = 0; d < coord.size(); ++d)
        if (v.shape[d] != SymInt(1)) accumulate(acc.addr, scaled(coord[d], v.strides[d]));
      return acc;
    }
    std::vector<Affine> next(in->shape.size());
    for (size_t j = 0; j < next.size(); ++j) {
      next[j].c0 = map->base[j];
      for (auto& [d, mult] : map->terms[j]) {
        Affine t = coord[d];
        t.c0 = t.c0 - map->lo[d];
        accumulate(next[j], scaled(t, mult));
      }
    }
    coord = std::move(next);
    n = in;
  }
  acc.src = n;
  auto st = contiguous_strides(n->shape);
  for (size_t j = 0; j < coord.size(); ++j)
    if (n->shape[j] != SymInt(1)) accumulate(acc.addr, scaled(coord[j], st[j]));
  return acc;
}

std::vector<SymInt> non_unit(const Shape& s) {
  std::vector<SymInt> r;
  for (auto& d : s)
    if (d != SymInt(1)) r.push_back(d);
  return r;
}

// A view that only inserts or drops size-1 dims of its input.
bool is_squeeze_view(NodeRef v) {
  const ViewSpec& s = *v->attrs.view;
  NodeRef in = v->inputs[0];
  if (s.has_mask() || s.offset != SymInt(0) || non_unit(s.shape) != non_unit(in->shape)) return false;
  auto st = contiguous_strides(in->shape);
  std::vector<SymInt> want;
  for (size_t j = 0; j < in->shape.size(); ++j)
    if (in->shape[j] != SymInt(1)) want.push_back(st[j]);
  size_t i = 0;
  for (size_t d = 0; d < s.shape.size(); ++d)
    if (s.shape[d] != SymInt(1) && s.strides[d] != want[i++]) return false;
  return true;
}

// An integer contraction: an i32 Reduce add over Mul(Cast(u8|i8 x), Cast(u8|i8 y)) (what
// matmul_integer / conv2d_integer build); the operands are read below the widening Casts.
bool is_int8_operand(NodeRef x) {
  return x->op == Op::Cast && x->dtype == DType::I32 && (x->inputs[0]->dtype == DType::U8 || x->inputs[0]->dtype == DType::I8);
}

// qdq-sat16's pairs over the reduced axis ax (qdq_rules.cpp writes them):
//   Reduce_axes(−max(−max(Mul(Cast(a_e), Cast(w_e)) + Mul(Cast(a_o), Cast(w_o)), −2^15), −(2^15−1)))
// a_e / a_o: views of one tensor at k = 2j and 2j+1 along ax (a_o masked past K when K is odd,
// only where ax is the one reduced axis of size > 1); ax: the reduced axis along which the even
// view steps twice the odd view's offset from it. Returns Mul(Cast(a), Cast(w)) over the whole K (a, w: the even views with
// K and the stride halved) and *pair_axis = ax, or null.
bool is_const_value(NodeRef n, int64_t v) {
  while (n->op == Op::View && !n->attrs.view->has_mask()) n = n->inputs[0];
  return n->is_scalar_const() && n->const_value() == static_cast<double>(v);
}
NodeRef sat16_product(NodeRef r, int* pair_axis = nullptr) {
  if (r->op != Op::Reduce || r->attrs.reduce != ReduceOp::Add || r->dtype != DType::I32 || r->attrs.axes.empty())
    return nullptr;
  NodeRef hi = r->inputs[0];
  if (hi->op != Op::Neg) return nullptr;
  NodeRef m1 = hi->inputs[0];
  if (m1->op != Op::Max) return nullptr;
  NodeRef neg = nullptr;
  for (int i = 0; i < 2; ++i)
    if (m1->inputs[i]->op == Op::Neg && is_const_value(m1->inputs[1 - i], -32767)) neg = m1->inputs[i];
  if (!neg || neg->inputs[0]->op != Op::Max) return nullptr;
  NodeRef m0 = neg->inputs[0], pair = nullptr;
  for (int i = 0; i < 2; ++i)
    if (m0->inputs[i]->op == Op::Add && is_const_value(m0->inputs[1 - i], -32768)) pair = m0->inputs[i];
  if (!pair) return nullptr;
  NodeRef even = pair->inputs[0], odd = pair->inputs[1];
  for (NodeRef p : {even, odd})
    if (p->op != Op::Mul || !is_int8_operand(p->inputs[0]) || !is_int8_operand(p->inputs[1])) return nullptr;
  // the pair axis: the reduced axis (of size > 1) along which the first operand's even view
  // steps twice what its odd view is offset by
  int ax = -1, wide = 0;
  {
    NodeRef e = even->inputs[0]->inputs[0], o = odd->inputs[0]->inputs[0];
    if (e->op != Op::View || o->op != Op::View) return nullptr;
    const SymInt delta = o->attrs.view->offset - e->attrs.view->offset;
    for (int d : r->attrs.axes) {
      if (e->shape[d] == SymInt(1) && o->shape[d] == SymInt(1) && !o->attrs.view->has_mask()) continue;
      ++wide;
      if (e->attrs.view->strides[d] == delta * SymInt(2)) {
        if (ax >= 0) return nullptr;
        ax = d;
      }
    }
    if (ax < 0) return nullptr;
  }
  // the even view with its k stride halved; the odd one must be the same view one k on
  NodeRef full[2];
  for (int i = 0; i < 2; ++i) {
    NodeRef e = even->inputs[i]->inputs[0], o = odd->inputs[i]->inputs[0];
    if (e->op != Op::View || o->op != Op::View || e->inputs[0] != o->inputs[0] || e->attrs.view->has_mask()) return nullptr;
    const ViewSpec &ve = *e->attrs.view, &vo = *o->attrs.view;
    if (!ve.strides[ax].is_const() || ve.strides[ax].value() % 2 || !ve.shape[ax].is_const()) return nullptr;
    const int64_t s = ve.strides[ax].value() / 2, K2 = ve.shape[ax].value();
    if (vo.shape != ve.shape || vo.offset != ve.offset + SymInt(s)) return nullptr;
    for (size_t d = 0; d < ve.shape.size(); ++d)
      if (vo.strides[d] != ve.strides[d]) return nullptr;
    bool ragged = vo.has_mask();  // K odd: the last odd k is past the end
    if (ragged) {
      if (wide > 1) return nullptr;  // the GEMM's flattened k would pair it with the next tap's
      for (size_t d = 0; d < vo.mask.size(); ++d) {
        std::pair<SymInt, SymInt> want = {SymInt(0), (int)d == ax ? SymInt(K2 - 1) : vo.shape[d]};
        if (vo.mask[d] != want) return nullptr;
      }
    }
    ViewSpec v = ve;
    v.shape[ax] = SymInt(2 * K2 - (ragged ? 1 : 0));
    v.strides[ax] = SymInt(s);
    full[i] = prim::view(e->inputs[0], v);
  }
  if (pair_axis) *pair_axis = ax;
  return prim::binary(Op::Mul, prim::cast(full[0], DType::I32), prim::cast(full[1], DType::I32));
}

}  // namespace

std::optional<MatmulMatch> match_matmul(NodeRef r) {
  if (r->op != Op::Reduce || r->attrs.reduce != ReduceOp::Add) return std::nullopt;
  NodeRef mul = r->inputs[0];
  const bool sat16 = mul->op == Op::Neg;
  int pair_axis = -1;
  if (sat16) mul = sat16_product(r, &pair_axis);
  if (!mul || mul->op != Op::Mul) return std::nullopt;
  bool int8 = r->dtype == DType::I32 && is_int8_operand(mul->inputs[0]) && is_int8_operand(mul->inputs[1]);
  if (!int8 && (r->dtype != DType::F32 || mul->inputs[0]->dtype != DType::F32)) return std::nullopt;
  MatmulMatch m;
  m.reduce = r;
  m.mul = mul;
  m.sat16 = sat16;
  m.a = access_of(int8 ? mul->inputs[0]->inputs[0] : mul->inputs[0]);
  m.b = access_of(int8 ? mul->inputs[1]->inputs[0] : mul->inputs[1]);
  for (auto* acc : {&m.a, &m.b})
    if (acc->src->op == Op::Const && !acc->src->attrs.data) return std::nullopt;
  const Shape& s = mul->shape;
  auto& axes = r->attrs.axes;
  for (int d = 0; d < (int)s.size(); ++d) {
    if (s[d] == SymInt(1)) continue;
    bool ua = m.a.uses(d), ub = m.b.uses(d);
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) m.k_axes.push_back(d);
    else if (ua && !ub) m.m_axes.push_back(d);
    else if (ub && !ua) m.n_axes.push_back(d);
    else m.batch_axes.push_back(d);
  }
  if (m.m_axes.empty() || m.n_axes.empty() || m.k_axes.empty()) return std::nullopt;
  // saturating pairs: the pair axis innermost in the GEMM's k (groups of 4 = two pairs of it;
  // even per tap when there are several k axes, so no pair straddles two taps)
  if (sat16) {
    auto it = std::find(m.k_axes.begin(), m.k_axes.end(), pair_axis);
    if (it == m.k_axes.end()) return std::nullopt;
    m.k_axes.erase(it);
    m.k_axes.push_back(pair_axis);
  }
  // the vector (N) side is the one holding the output's innermost dim
  int inner = -1;
  for (int d = 0; d < (int)s.size(); ++d)
    if (s[d] != SymInt(1) && std::find(axes.begin(), axes.end(), d) == axes.end()) inner = d;
  if (std::find(m.m_axes.begin(), m.m_axes.end(), inner) != m.m_axes.end()) {
    std::swap(m.a, m.b);
    std::swap(m.m_axes, m.n_axes);
  }
  // u8 × i8 (or i8 × u8) groups of 4 (VNNI, exact sums, loop::vnni_i8_u8): a convolution's
  // k as (kh, kw, ci), the input channels innermost, so that a group of 4 k is 4 channels of
  // one tap. In the weight's (OIHW) order each group crossed taps: its 4 members each took
  // their own window bounds and runs in the implicit im2col's pack; 4 channels of one tap
  // share them (lower_matmul_pack.cpp's shared bounds) and copy whole panels. The channel
  // axis: the k axis along which the i8 weight strides the most (as qdq-sat16 picks its pair
  // axis); a channel count that is no multiple of 4 keeps the order (its groups cross taps
  // either way). The sum is the same in any order (exact i32).
  if (int8 && !sat16 && m.k_axes.size() > 1 && loop::vnni_i8_u8()) {
    const OperandAccess& w = m.a.src->dtype == DType::I8 ? m.a : m.b;
    if (w.src->dtype == DType::I8 && (m.a.src->dtype == DType::U8 || m.b.src->dtype == DType::U8)) {
      int ch = -1;
      int64_t best = -1;
      bool tie = false;
      for (int d : m.k_axes) {
        auto c = w.addr.const_coef(d);
        if (!c) { best = -1; break; }
        if (std::abs(*c) > best) best = std::abs(*c), ch = d, tie = false;
        else if (std::abs(*c) == best) tie = true;
      }
      if (best > 0 && !tie && s[ch].is_const() && s[ch].value() % 4 == 0 && ch != m.k_axes.back()) {
        m.k_axes.erase(std::find(m.k_axes.begin(), m.k_axes.end(), ch));
        m.k_axes.push_back(ch);
      }
    }
  }
  // the saturating pairs as the int8 GEMM computes them: u8 × i8, either side (a conv's u8
  // activations are the columns), else the plain reduction they are
  if (sat16 && !((m.a.src->dtype == DType::U8 && m.b.src->dtype == DType::I8) ||
                 (m.a.src->dtype == DType::I8 && m.b.src->dtype == DType::U8)))
    return std::nullopt;
  return m;
}

OperandAccess operand_access(NodeRef x) { return access_of(x); }

NodeRef int8_products(NodeRef reduce) {
  if (reduce->op != Op::Reduce || reduce->attrs.reduce != ReduceOp::Add || reduce->dtype != DType::I32 || reduce->inputs.empty())
    return nullptr;
  NodeRef mul = reduce->inputs[0];
  if (mul->op == Op::Neg) mul = sat16_product(reduce);
  if (!mul || mul->op != Op::Mul || !is_int8_operand(mul->inputs[0]) || !is_int8_operand(mul->inputs[1])) return nullptr;
  return mul;
}

// Partial sums over K blocks are kept in the output buffer, so the root has the sum's dtype;
// except after an integer contraction (i32 sums of u8/i8 products), whose lowering keeps them
// in a per-job scratch when the root is an 8-bit requantization (u8/i8): its sizes must then
// be static (the scratch is a fixed block of the output). Not an f32 root (a dequantized
// value, ResNet's residual sums): fused there, the backend's FMA contraction of its products
// and sums moved ResNet-50 QDQ's logits off the interpreter's by up to 1.1 (of ~150), where
// the separate kernels matched them exactly.
// LATHE_REQUANT_EPILOGUE=0 keeps such roots in kernels of their own (A/B runs).
bool fusable_epilogue(NodeRef root, NodeRef reduce, const std::set<NodeRef>& mat) {
  static const bool narrow_ok = [] {
    const char* e = std::getenv("LATHE_REQUANT_EPILOGUE");
    return !(e && std::string(e) == "0");
  }();
  if (root == reduce || non_unit(root->shape) != non_unit(reduce->shape)) return false;
  if (root->dtype != reduce->dtype) {
    if (!narrow_ok || (root->dtype != DType::U8 && root->dtype != DType::I8)) return false;
    NodeRef mul = int8_products(reduce);
    if (!mul) return false;
    for (auto& d : mul->shape)
      if (!d.is_const()) return false;
    // the scratch (a job's rows × columns, at most the whole output) lives on the worker's
    // stack: up to 2 MB of i32, or none when K is one block (KC <= 256)
    int64_t K = 1, outputs = 1;
    for (int ax : reduce->attrs.axes) K *= mul->shape[ax].value();
    for (auto& d : reduce->shape) outputs *= d.value();
    if (K > 256 && outputs > (int64_t(1) << 19)) return false;
  }
  // nodes inside the root's kernel (R a leaf), and whether each depends on R
  std::map<NodeRef, bool> dep;
  std::function<bool(NodeRef)> visit = [&](NodeRef n) -> bool {
    if (n == reduce) return true;
    if (n != root && mat.count(n)) return false;
    auto it = dep.find(n);
    if (it != dep.end()) return it->second;
    bool d = false;
    for (NodeRef in : n->inputs) d |= visit(in);
    dep[n] = d;
    return d;
  };
  if (!visit(root)) return false;
  for (auto& [n, on_path] : dep) {
    switch (n->op) {
      case Op::Const: if (n->attrs.data) return false; continue;
      case Op::Index: case Op::Cast: case Op::Where: continue;
      case Op::View:
        if (on_path && !is_squeeze_view(n)) return false;
        continue;
      default: break;
    }
    auto cat = n->info().category;
    if (cat != OpCategory::Unary && cat != OpCategory::Binary) return false;
  }
  return true;
}

}  // namespace lathe
