// matmul_epilogue.cpp — group index math and the epilogue builder of the packed matmul
// lowering (see matmul_epilogue.h).
#include "core/loop/matmul_epilogue.h"

#include "core/loop/lower_value.h"

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

// The epilogue's values: each node's value at an index is bound to one Let (memoized by
// node, index and mask); the reduce's value is the accumulator.
class Epilogue : public ValueLowering {
 public:
  Epilogue(const KernelGraph& kg, NodeRef root, NodeRef reduce, ExprRef acc, const std::unordered_map<int, int>& param_of,
           std::vector<Stmt>& lets, std::string prefix)
      : ValueLowering(kg, root, param_of), reduce_(reduce), acc_(std::move(acc)), lets_(lets), prefix_(std::move(prefix)) {}

  ExprRef value(NodeRef n, const Index& idx) override {
    if (n == reduce_) return acc_;
    std::string key = std::to_string(n->id) + "@";
    for (auto& e : idx) key += expr_key(e) + ";";
    key += "|" + expr_key(mask());
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    ExprRef e = reads_buffer(n) ? load_buffer(n, idx) : compute(n, idx);
    if (e->kind != ExprKind::Const && e->kind != ExprKind::Var) {
      std::string name = prefix_ + std::to_string(lets_.size());
      lets_.push_back(make_let(name, n->dtype, e));
      e = var(name, n->dtype);
    }
    memo_[key] = e;
    return e;
  }

 private:
  NodeRef reduce_;
  ExprRef acc_;
  std::vector<Stmt>& lets_;
  std::string prefix_;
  std::unordered_map<std::string, ExprRef> memo_;

  // Last input first: the order the epilogue has always bound its Lets in (their names and
  // order in the generated code follow it); any order computes the same values.
  std::vector<ExprRef> operands(NodeRef n, const Index& idx) override {
    std::vector<ExprRef> v(n->inputs.size());
    for (size_t i = v.size(); i-- > 0;) v[i] = value(n->inputs[i], idx);
    return v;
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
  Index idx;
  size_t i = 0;
  for (auto& d : root->shape) idx.push_back(d == SymInt(1) ? const_int(0) : inner.at(i++));
  Epilogue e(kg, root, reduce, std::move(acc), param_of, lets, prefix);
  return e.value(root, idx);
}

}  // namespace lathe::loop
