// matmul_epilogue.cpp — group index math and the epilogue builder of the packed matmul
// lowering (see matmul_epilogue.h).
#include "core/loop/matmul_epilogue.h"

#include "core/ir/diag.h"
#include "core/schedule/view_index.h"

namespace lathe::loop {

std::map<int, ExprRef> group_coords(const std::vector<int>& dims, const Shape& s, ExprRef flat) {
  std::map<int, ExprRef> c;
  if (dims.size() == 1) {
    c[dims[0]] = flat;
    return c;
  }
  ExprRef inner = const_int(1);
  for (size_t i = dims.size(); i-- > 0;) {
    ExprRef q = binary(Op::IDiv, flat, inner);
    c[dims[i]] = i == 0 ? q : binary(Op::Mod, q, from_sym(s[dims[i]]));
    inner = mul(inner, from_sym(s[dims[i]]));
  }
  return c;
}

ExprRef affine_part(const Affine& a, const std::map<int, ExprRef>& coords) {
  ExprRef e = const_int(0);
  for (auto& [d, coef] : a.terms) {
    auto it = coords.find(d);
    if (it != coords.end() && coef != SymInt(0)) e = add(e, mul(it->second, from_sym(coef)));
  }
  return e;
}

namespace {

class Epilogue {
 public:
  Epilogue(const KernelGraph& kg, NodeRef root, NodeRef reduce, ExprRef acc, const std::unordered_map<int, int>& param_of,
           std::vector<Stmt>& lets, std::string prefix)
      : kg_(kg), root_(root), reduce_(reduce), acc_(std::move(acc)), param_of_(param_of), lets_(lets),
        prefix_(std::move(prefix)) {}

  ExprRef value(NodeRef n, const std::vector<ExprRef>& idx) {
    if (n == reduce_) return acc_;
    std::string key = std::to_string(n->id) + "@";
    for (auto& e : idx) key += expr_key(e) + ";";
    key += "|" + expr_key(mask());
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    ExprRef e = compute(n, idx);
    if (e->kind != ExprKind::Const && e->kind != ExprKind::Var) {
      std::string name = prefix_ + std::to_string(lets_.size());
      lets_.push_back(make_let(name, n->dtype, e));
      e = var(name, n->dtype);
    }
    memo_[key] = e;
    return e;
  }

 private:
  const KernelGraph& kg_;
  NodeRef root_, reduce_;
  ExprRef acc_;
  const std::unordered_map<int, int>& param_of_;
  std::vector<Stmt>& lets_;
  std::string prefix_;
  std::unordered_map<std::string, ExprRef> memo_;
  std::vector<ExprRef> masks_;

  ExprRef mask() {
    ExprRef m;
    for (auto& x : masks_) m = logical_and(m, x);
    return m;
  }

  int param(NodeRef n) { return param_of_.at(kg_.buffer_of.at(n)); }

  ExprRef compute(NodeRef n, const std::vector<ExprRef>& idx) {
    if (n != root_ && kg_.materialized(n)) {
      auto st = contiguous_strides(n->shape);
      ExprRef flat = const_int(0);
      for (size_t d = 0; d < idx.size(); ++d)
        if (n->shape[d] != SymInt(1)) flat = add(flat, mul(idx[d], from_sym(st[d])));
      return load(param(n), n->dtype, flat, mask());
    }
    switch (n->op) {
      case Op::Const: return is_float(n->dtype) ? const_float(n->attrs.f, n->dtype) : const_int(n->attrs.i, n->dtype);
      case Op::Index: return cast(idx[n->attrs.axis], n->dtype);
      case Op::Cast: return cast(value(n->inputs[0], idx), n->dtype);
      case Op::Where:
        return select(value(n->inputs[0], idx), value(n->inputs[1], idx), value(n->inputs[2], idx));
      case Op::View: return view_value(n, idx);
      default: break;
    }
    switch (n->info().category) {
      case OpCategory::Unary: return unary(n->op, value(n->inputs[0], idx));
      case OpCategory::Binary: return binary(n->op, value(n->inputs[0], idx), value(n->inputs[1], idx));
      default: break;
    }
    LATHE_CHECK(false, "matmul epilogue: node %" + std::to_string(n->id) + " (" + std::string(op_name(n->op)) +
                           ") cannot be fused (scheduler bug)");
    return nullptr;
  }

  ExprRef view_value(NodeRef n, const std::vector<ExprRef>& idx) {
    const ViewSpec& v = *n->attrs.view;
    NodeRef in = n->inputs[0];
    ExprRef m;
    for (size_t d = 0; d < v.mask.size(); ++d) {
      if (v.mask[d].first != SymInt(0)) m = logical_and(m, le(from_sym(v.mask[d].first), idx[d]));
      if (v.mask[d].second != v.shape[d]) m = logical_and(m, lt(idx[d], from_sym(v.mask[d].second)));
    }
    if (kg_.materialized(in)) {
      ExprRef flat = from_sym(v.offset);
      for (size_t d = 0; d < idx.size(); ++d)
        if (v.shape[d] != SymInt(1)) flat = add(flat, mul(idx[d], from_sym(v.strides[d])));
      return load(param(in), n->dtype, flat, logical_and(mask(), m));
    }
    auto map = view_dim_map(v, in->shape);
    LATHE_CHECK(map.has_value(), "matmul epilogue: a view of an inlined node is not index math");
    if (map->all_masked) return const_of(0, n->dtype);
    std::vector<ExprRef> in_idx;
    for (size_t j = 0; j < in->shape.size(); ++j) {
      ExprRef c = from_sym(map->base[j]);
      for (auto& [d, mult] : map->terms[j]) c = add(c, mul(sub(idx[d], from_sym(map->lo[d])), from_sym(mult)));
      in_idx.push_back(c);
    }
    if (!m) return value(in, in_idx);
    masks_.push_back(m);
    ExprRef inner = value(in, in_idx);
    masks_.pop_back();
    return select(m, inner, const_of(0, n->dtype));
  }
};

}  // namespace

ExprRef build_epilogue(const KernelGraph& kg, NodeRef root, NodeRef reduce, const std::vector<ExprRef>& ridx,
                       ExprRef acc, const std::unordered_map<int, int>& param_of, std::vector<Stmt>& lets,
                       const std::string& prefix) {
  // the root's non-1 dims are the reduce's non-1 dims, in order
  std::vector<ExprRef> inner;
  for (size_t d = 0; d < ridx.size(); ++d)
    if (reduce->shape[d] != SymInt(1)) inner.push_back(ridx[d]);
  std::vector<ExprRef> idx;
  size_t i = 0;
  for (auto& d : root->shape) idx.push_back(d == SymInt(1) ? const_int(0) : inner.at(i++));
  Epilogue e(kg, root, reduce, std::move(acc), param_of, lets, prefix);
  return e.value(root, idx);
}

}  // namespace lathe::loop
