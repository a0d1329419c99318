// autodiff.cpp — reverse-mode differentiation: the walk over the graph and the derivative
// rule of every primitive (the rules are listed in autodiff.h), plus SGD updates.
#include "core/frontend/autodiff.h"

#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "core/frontend/detail.h"
#include "core/frontend/nn.h"
#include "core/frontend/rnn_unrolled.h"
#include "core/ir/attention_op.h"
#include "core/ir/graph.h"

namespace lathe {

using detail::fail;

namespace {

constexpr double kLn2 = 0.6931471805599453;

// While alive, new nodes get Provenance.backward and the path "grad/<fwd path>/<Op>".
class BackwardScope {
 public:
  explicit BackwardScope(NodeRef fwd) : ctx_(current_provenance()), saved_stack_(ctx_.stack), saved_bw_(ctx_.backward) {
    ctx_.stack = {"grad"};
    if (!fwd->prov.path.empty()) ctx_.stack.push_back(fwd->prov.path);
    ctx_.stack.push_back(std::string(op_name(fwd->op)));
    ctx_.backward = true;
  }
  ~BackwardScope() {
    ctx_.stack = saved_stack_;
    ctx_.backward = saved_bw_;
  }

 private:
  ProvenanceContext& ctx_;
  std::vector<std::string> saved_stack_;
  bool saved_bw_;
};

Tensor zero_of(const Tensor& like) { return zeros({}, like.dtype()); }

// Gradient of x for Take(x, idx, axis) = y with output gradient g.
Tensor take_backward(const Tensor& g, NodeRef x, NodeRef idx_node, int axis) {
  Tensor idx = to(Tensor(idx_node), DType::I64);
  SymInt nx = x->shape[axis];
  Tensor gu = unsqueeze(g, axis + 1);  // [.., Ni, 1, ..]
  Shape s = gu.shape();
  s[axis + 1] = nx;
  Tensor iu = expand(unsqueeze(idx, axis + 1), s);
  if (nx.is_const()) iu = where(lt(iu, 0), iu + Scalar(nx.value()), iu);  // negative indices count from the end
  Tensor j(prim::index(DType::I64, s, axis + 1));
  Tensor contrib = where(eq(iu, j), expand(gu, s), zero_of(g));
  return reshape(sum(contrib, {axis}, true), x->shape);
}

Tensor reduce_backward(const Tensor& g, NodeRef n) {
  Tensor x(n->inputs[0]), y(n);
  const Shape& xs = x.shape();
  switch (n->attrs.reduce) {
    case ReduceOp::Add: return expand(g, xs);
    case ReduceOp::Max: {
      Tensor hit = eq(x, expand(y, xs));
      Tensor count(prim::reduce(ReduceOp::Add, to(hit, g.dtype()).node(), n->attrs.axes));
      return where(hit, expand(g / count, xs), zero_of(g));
    }
    case ReduceOp::Mul: {
      Tensor is_zero = eq(x, 0);
      Tensor zeros_n(prim::reduce(ReduceOp::Add, to(is_zero, g.dtype()).node(), n->attrs.axes));
      Tensor others(prim::reduce(ReduceOp::Mul, where(is_zero, ones({}, x.dtype()), x).node(), n->attrs.axes));
      Tensor at_nonzero = where(eq(expand(zeros_n, xs), 0), expand(y, xs) / x, zero_of(g));
      Tensor at_zero = where(eq(expand(zeros_n, xs), 1), expand(others, xs), zero_of(g));
      return expand(g, xs) * where(is_zero, at_zero, at_nonzero);
    }
  }
  return {};
}

// The fused attention (core/ir/attention_op.h). By default the fused backward: the forward is
// asked for its row log-sum-exp (the stats form; build_program computes it once, shared with
// the plain forward) and Extern "attention_bwd" recomputes the probabilities tile by tile:
// part 0 gives dQ, part 1 dK and dV side by side (per query head: heads that share a
// broadcast K/V are summed here), part 2 dS for the mask (its broadcast dims summed here).
// LATHE_ATTENTION_BWD=unfused differentiates the op's definition instead (the L×S matrices
// are then materialized): the reference the fused backward is checked and timed against.
Tensor sum_to(const Tensor& g, const Shape& s) {
  std::vector<int> axes;
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] == SymInt(1) && g.shape()[d] != SymInt(1)) axes.push_back(static_cast<int>(d));
  Tensor r = axes.empty() ? g : sum(g, axes, true);
  for (size_t d = 0; d < s.size(); ++d) {  // grouped heads: [.., H, ..] → [.., Hkv, H/Hkv, ..] summed over the group
    if (r.shape()[d] == s[d]) continue;
    Shape split = r.shape();
    split[d] = s[d];
    split.insert(split.begin() + static_cast<long>(d) + 1, SymInt(r.shape()[d].value() / s[d].value()));
    r = sum(reshape(r, split), {static_cast<int>(d) + 1}, false);
  }
  return r;
}

std::vector<Tensor> attention_backward(NodeRef n, const Tensor& g) {
  auto spec = attention_spec(n);
  std::vector<Tensor> ins;
  for (NodeRef i : n->inputs) ins.emplace_back(i);
  const char* mode = std::getenv("LATHE_ATTENTION_BWD");
  if (mode && std::string(mode) == "unfused") {
    std::optional<Tensor> mask;
    if (spec->has_mask) mask = ins[3];
    Tensor y = scaled_dot_product_attention(ins[0], ins[1], ins[2], mask, spec->causal, static_cast<double>(spec->scale));
    return grad(y, ins, g);
  }
  if (mode && *mode && std::string(mode) != "fused")
    fail("grad", "LATHE_ATTENTION_BWD='" + std::string(mode) + "': expected fused or unfused");
  NodeRef q = n->inputs[0], k = n->inputs[1], v = n->inputs[2], m = spec->has_mask ? n->inputs[3] : nullptr;
  NodeRef os = attention_call(q, k, v, m, spec->causal, spec->scale, /*stats=*/true);
  Tensor dout = to(g, DType::F32);
  auto part = [&](int p) { return Tensor(attention_bwd_call(q, k, v, m, os, dout.node(), spec->causal, spec->scale, p)); };
  int r = static_cast<int>(q->shape.size());
  SymInt E = q->shape[r - 1], Ev = v->shape[r - 1];
  std::vector<Tensor> out{part(0)};
  Tensor dkv = part(1);
  out.push_back(sum_to(narrow(dkv, r - 1, 0, E), k->shape));
  out.push_back(sum_to(narrow(dkv, r - 1, E, Ev), v->shape));
  if (m) out.push_back(sum_to(part(2), m->shape));
  return out;
}

// Gradients for the inputs of n (undefined Tensor = none).
std::vector<Tensor> input_grads(NodeRef n, const Tensor& g) {
  const auto& in = n->inputs;
  auto X = [&](size_t i) { return Tensor(in[i]); };
  Tensor y(n);
  switch (n->op) {
    case Op::Input: case Op::Const: case Op::Index: return {};
    case Op::View: return {view_backward(g, *n->attrs.view, in[0]->shape)};
    case Op::Take: return {take_backward(g, in[0], in[1], n->attrs.axis), {}};
    case Op::Copy: return {g};
    case Op::Assign: return {{}, g};
    case Op::Neg: return {-g};
    case Op::Recip: return {-(g * y * y)};
    case Op::Sin: return {g * cos(X(0))};
    case Op::Exp2: return {g * y * kLn2};
    case Op::Log2: return {g / (X(0) * kLn2)};
    case Op::Sqrt: return {g * 0.5 / y};
    case Op::Cast: return {is_float(in[0]->dtype) ? to(g, in[0]->dtype) : Tensor()};
    case Op::Add: return {g, g};
    case Op::Mul: return {g * X(1), g * X(0)};
    case Op::Max: {
      Tensor a = X(0), b = X(1), half = g * 0.5;
      Tensor ga = where(gt(a, b), g, where(eq(a, b), half, zero_of(g)));
      Tensor gb = where(lt(a, b), g, where(eq(a, b), half, zero_of(g)));
      return {ga, gb};
    }
    case Op::Mod: return {g, -(g * trunc(X(0) / X(1)))};
    case Op::Where: return {{}, where(X(0), g, zero_of(g)), where(X(0), zero_of(g), g)};
    case Op::Reduce: return {reduce_backward(g, n)};
    case Op::Extern:
      if (attention_spec(n)) return attention_backward(n, g);
      if (rnn_spec(n)) return rnn_backward(n, g);  // through the unrolled steps (rnn_unrolled.h)
      fail("grad", "no derivative rule for Extern '" + n->attrs.name + "' (node %" + std::to_string(n->id) +
                       "); differentiate before the BLAS rewrite");
    default: return {};  // Not, IDiv, And, Or, Xor, CmpLT, CmpNE: no gradient
  }
}

}  // namespace

std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& params, const std::optional<Tensor>& seed) {
  if (!loss.defined()) fail("grad", "the loss is an undefined tensor");
  if (!is_float(loss.dtype())) fail("grad", "the loss must be a float tensor, got " + loss.describe());
  for (size_t i = 0; i < params.size(); ++i)
    if (!params[i].defined() || !is_float(params[i].dtype()))
      fail("grad", "parameter " + std::to_string(i) + " (" + params[i].describe() + ") must be a float tensor");
  if (seed && seed->shape() != loss.shape())
    fail("grad", "seed " + seed->describe() + " must have the loss's shape " + loss.describe());

  Graph fwd = Graph::from_outputs({{"loss", loss.node()}});
  std::vector<NodeRef> order = fwd.toposort();
  std::unordered_set<NodeRef> wanted;
  for (auto& p : params) wanted.insert(p.node());
  // nodes on a float path from some param
  std::unordered_set<NodeRef> live;
  for (NodeRef n : order) {
    if (!is_float(n->dtype)) continue;
    bool on = wanted.count(n) > 0;
    for (NodeRef i : n->inputs) on = on || live.count(i);
    if (on) live.insert(n);
  }
  std::unordered_map<NodeRef, Tensor> grads;
  if (live.count(loss.node())) {
    BackwardScope bs(loss.node());
    grads[loss.node()] = seed ? to(*seed, loss.dtype()) : ones(loss.shape(), loss.dtype());
  }
  for (size_t k = order.size(); k-- > 0;) {
    NodeRef n = order[k];
    auto it = grads.find(n);
    if (it == grads.end() || !live.count(n)) continue;
    bool feeds_live = false;
    for (NodeRef i : n->inputs) feeds_live = feeds_live || live.count(i);
    if (!feeds_live) continue;
    BackwardScope bs(n);
    std::vector<Tensor> gi = input_grads(n, it->second);
    for (size_t i = 0; i < gi.size() && i < n->inputs.size(); ++i) {
      NodeRef x = n->inputs[i];
      if (!gi[i].defined() || !live.count(x)) continue;
      LATHE_CHECK(gi[i].shape() == x->shape, "grad rule for " + std::string(op_name(n->op)) + " produced shape " +
                                                 shape_to_string(gi[i].shape()) + " for an input of shape " +
                                                 shape_to_string(x->shape));
      Tensor gx = to(gi[i], x->dtype);
      auto [slot, fresh] = grads.try_emplace(x, gx);
      if (!fresh) slot->second = slot->second + gx;
    }
  }
  std::vector<Tensor> out;
  for (auto& p : params) {
    auto it = grads.find(p.node());
    out.push_back(it != grads.end() ? it->second : zeros(p.shape(), p.dtype()));
  }
  return out;
}

Tensor sgd_update(const Tensor& param, const Tensor& g, double lr) {
  if (!param.defined() || param.node()->op != Op::Input)
    fail("sgd_update", "the parameter " + param.describe() + " must be a graph input (Assign writes into inputs)");
  if (g.shape() != param.shape())
    fail("sgd_update", "gradient " + g.describe() + " does not match parameter " + param.describe());
  ProvenanceScope ps("sgd");
  Tensor updated = to(param - to(g, param.dtype()) * lr, param.dtype());
  return Tensor(prim::assign(param.node(), updated.node()));
}

std::vector<Tensor> sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, double lr) {
  if (params.size() != grads.size())
    fail("sgd_step", std::to_string(params.size()) + " parameters but " + std::to_string(grads.size()) + " gradients");
  std::vector<Tensor> r;
  for (size_t i = 0; i < params.size(); ++i) r.push_back(sgd_update(params[i], grads[i], lr));
  return r;
}

}  // namespace lathe
