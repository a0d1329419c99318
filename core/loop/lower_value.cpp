// lower_value.cpp — ValueLowering: a primitive node's value at an index as loop-IR
// expressions (see lower_value.h).
#include "core/loop/lower_value.h"

#include "core/ir/diag.h"
#include "core/schedule/view_index.h"

namespace lathe::loop {

ExprRef strided_index(const SymInt& offset, const std::vector<SymInt>& strides, const Shape& shape, const Index& idx) {
  ExprRef flat = from_sym(offset);
  for (size_t d = 0; d < idx.size(); ++d)
    if (shape[d] != SymInt(1)) flat = add(flat, mul(idx[d], from_sym(strides[d])));
  return flat;
}

ExprRef row_major_index(const Index& idx, const Shape& shape) {
  return strided_index(0, contiguous_strides(shape), shape, idx);
}

ExprRef ValueLowering::compute_other(NodeRef n, const Index&) {
  LATHE_CHECK(false, "lower: node %" + std::to_string(n->id) + " (" + std::string(op_name(n->op)) +
                         ") should have been materialized (scheduler bug)");
  return nullptr;
}

ExprRef ValueLowering::compute(NodeRef n, const Index& idx) {
  switch (n->op) {
    case Op::Const:
      LATHE_CHECK(!n->attrs.data, "tensor constants are materialized by the scheduler");
      return is_float(n->dtype) ? const_float(n->attrs.f, n->dtype) : const_int(n->attrs.i, n->dtype);
    case Op::Index: return cast(idx[n->attrs.axis], n->dtype);
    case Op::View: return view_value(n, idx);
    case Op::Cast: return cast(value(n->inputs[0], idx), n->dtype);
    case Op::Where: {
      auto v = operands(n, idx);
      return select(v[0], v[1], v[2]);
    }
    default: break;
  }
  switch (n->info().category) {
    case OpCategory::Unary: return unary(n->op, value(n->inputs[0], idx));
    case OpCategory::Binary: {
      auto v = operands(n, idx);
      return binary(n->op, v[0], v[1]);
    }
    default: return compute_other(n, idx);
  }
}

ExprRef ValueLowering::load_buffer(NodeRef n, const Index& idx) {
  return load(param(n), n->dtype, row_major_index(idx, n->shape), mask());
}

ExprRef ValueLowering::guarded(const ExprRef& cond, NodeRef in, const Index& in_idx, DType dt) {
  masks_.push_back(cond);
  ExprRef inner = value(in, in_idx);
  masks_.pop_back();
  return select(cond, inner, const_of(0, dt));
}

ExprRef ValueLowering::mask() const {
  ExprRef m;
  for (auto& x : masks_) m = logical_and(m, x);
  return m;
}

ExprRef ValueLowering::view_value(NodeRef n, const Index& idx) {
  const ViewSpec& v = *n->attrs.view;
  NodeRef in = n->inputs[0];
  ExprRef m;  // the view's own mask: which output positions read the input
  for (size_t d = 0; d < v.mask.size(); ++d) {
    if (v.mask[d].first != SymInt(0)) m = logical_and(m, le(from_sym(v.mask[d].first), idx[d]));
    if (v.mask[d].second != v.shape[d]) m = logical_and(m, lt(idx[d], from_sym(v.mask[d].second)));
  }
  if (kg_.materialized(in))
    return load(param(in), n->dtype, strided_index(v.offset, v.strides, v.shape, idx), logical_and(mask(), m));
  auto map = view_dim_map(v, in->shape);
  LATHE_CHECK(map.has_value(), "lower: view of an inlined node is not index math (scheduler bug)");
  if (map->all_masked) return const_of(0, n->dtype);
  Index in_idx;
  for (size_t j = 0; j < in->shape.size(); ++j) {
    ExprRef c = from_sym(map->base[j]);
    for (auto& [d, mult] : map->terms[j]) c = add(c, mul(sub(idx[d], from_sym(map->lo[d])), from_sym(mult)));
    in_idx.push_back(c);
  }
  if (!m) return value(in, in_idx);
  return guarded(m, in, in_idx, n->dtype);
}

}  // namespace lathe::loop
