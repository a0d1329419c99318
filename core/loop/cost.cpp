// cost.cpp — estimate_cost: FLOPs and bytes per kernel (see cost.h).
#include "core/loop/cost.h"

#include "core/ir/rnn_op.h"
#include "core/loop/lower_depthwise.h"

namespace lathe::loop {

bool eval_index(const ExprRef& e, const std::map<std::string, int64_t, std::less<>>& env, int64_t& out) {
  switch (e->kind) {
    case ExprKind::Const: out = e->i; return true;
    case ExprKind::Var: {
      auto it = env.find(e->name);
      if (it == env.end()) return false;
      out = it->second;
      return true;
    }
    case ExprKind::Select: {
      int64_t c, a, b;
      if (!eval_index(e->args[0], env, c) || !eval_index(e->args[1], env, a) || !eval_index(e->args[2], env, b)) return false;
      out = c ? a : b;
      return true;
    }
    case ExprKind::Binary: {
      int64_t a, b;
      if (!eval_index(e->args[0], env, a) || !eval_index(e->args[1], env, b)) return false;
      switch (e->op) {
        case Op::Add: out = a + b; return true;
        case Op::Mul: out = a * b; return true;
        case Op::IDiv: out = b ? a / b : 0; return true;
        case Op::Mod: out = b ? a % b : 0; return true;
        case Op::Max: out = std::max(a, b); return true;
        case Op::CmpLT: out = a < b; return true;
        case Op::CmpNE: out = a != b; return true;
        case Op::And: out = a && b; return true;
        default: return false;
      }
    }
    default: return false;
  }
}

namespace {

double count_ops(const ExprRef& e) {
  if (!e) return 0;
  double n = 0;
  if ((e->kind == ExprKind::Unary || e->kind == ExprKind::Binary) && is_float(e->dtype)) n += e->lanes;
  if (e->kind == ExprKind::Binary && (e->op == Op::CmpLT || e->op == Op::CmpNE) && is_float(e->args[0]->dtype)) n += e->lanes;
  for (auto& a : e->args) n += count_ops(a);
  return n;
}

void count(const std::vector<Stmt>& body, double trips, std::map<std::string, int64_t, std::less<>>& env, double& flops) {
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::For: {
        int64_t e = 1;
        if (!eval_index(s.extent, env, e)) e = 1;
        // loop vars inside take "typical" values: evaluate nested extents at iteration 0
        env[s.var] = 0;
        count(s.body, trips * static_cast<double>(std::max<int64_t>(e, 0)), env, flops);
        env.erase(s.var);
        break;
      }
      case StmtKind::If: {
        // the branch taken at the loops' first iteration; else the costlier one
        int64_t c;
        if (eval_index(s.cond, env, c)) {
          count(c ? s.body : s.else_body, trips, env, flops);
          break;
        }
        double a = 0, b = 0;
        count(s.body, trips, env, a);
        count(s.else_body, trips, env, b);
        flops += std::max(a, b);
        break;
      }
      case StmtKind::Let: {
        int64_t v;
        if (s.dtype == DType::I64 && eval_index(s.value, env, v)) env[s.var] = v;
        flops += trips * count_ops(s.value);
        break;
      }
      case StmtKind::Prefetch: break;  // a hint: no arithmetic
      default: flops += trips * count_ops(s.value); break;
    }
  }
}

}  // namespace

KernelCost estimate_cost(const LoopFunc& f, const KernelGraph& kg, const Bindings& dims) {
  KernelCost c;
  for (auto& p : f.buffers) {
    const BufferDesc& b = kg.buffers[p.buffer];
    double n = 1;
    for (auto& d : b.shape) n *= static_cast<double>(d.eval(dims).value_or(1));
    c.bytes += n * dtype_size(b.dtype);
  }
  const Kernel& k = kg.kernels.at(f.kernel);
  if (f.kind == "extern") {  // a library call: its FLOPs come from the call's parameters
    if (k.root->op == Op::Extern && k.root->attrs.name == "sgemm" && k.root->attrs.ints.size() >= 3)
      c.flops = 2.0 * static_cast<double>(k.root->attrs.ints[0]) * static_cast<double>(k.root->attrs.ints[1]) *
                static_cast<double>(k.root->attrs.ints[2]);  // 2·M·N·K
    if (auto r = rnn_spec(k.root))  // the recurrent products, 2·T·B·G·H·H, and with the projection 2·T·B·G·H·I
      c.flops = 2.0 * static_cast<double>(r->T) * static_cast<double>(r->B) * r->gates() * static_cast<double>(r->H) *
                (static_cast<double>(r->H) + static_cast<double>(r->has_proj ? r->I : 0));  // (the gate arithmetic is minor)
    return c;
  }
  if (f.kind == "attention") {  // Q·Kᵀ and P·V: 2·2·batch·L·S·E (half the pairs when causal)
    auto ev = [&](const SymInt& d) { return static_cast<double>(d.eval(dims).value_or(1)); };
    const Shape &q = k.root->inputs[0]->shape, &kk = k.root->inputs[1]->shape;
    double n = 4 * ev(kk[kk.size() - 2]);
    for (auto& d : q) n *= ev(d);
    if (k.root->attrs.ints.size() >= 1 && k.root->attrs.ints[0]) n /= 2;
    c.flops = n;
    return c;
  }
  if (is_depthwise(f)) {  // 2 per tap and output, as the plain reduction counts them (not the padding lanes)
    double n = 1;
    for (NodeRef r : k.nodes)
      if (r->op == Op::Reduce)
        for (auto& d : r->inputs[0]->shape) n *= static_cast<double>(d.eval(dims).value_or(1));
    c.flops = 2 * n;
    return c;
  }
  auto numel = [&](NodeRef n) {
    double v = 1;
    for (auto& d : n->shape) v *= static_cast<double>(d.eval(dims).value_or(1));
    return v;
  };
  if (f.kind == "matmul") {  // 2·M·N·K; an int8 one's K counts every product (qdq-sat16 reduces K/2 pair sums)
    NodeRef r = k.matmul ? k.matmul : k.root;
    NodeRef products = int8_products(r);
    c.flops = 2 * numel(products ? products : r->inputs[0]);
    return c;
  }
  std::map<std::string, int64_t, std::less<>> env(dims.begin(), dims.end());
  count(f.body, 1, env, c.flops);  // (float arithmetic only: index math is integer)
  // an integer contraction left a plain reduction: 2 per multiply-add, as its GEMM counts
  for (NodeRef n : k.nodes)
    if (NodeRef products = int8_products(n)) c.flops += 2 * numel(products);
  return c;
}

}  // namespace lathe::loop
