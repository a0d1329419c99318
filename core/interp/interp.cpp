// interp.cpp — the reference interpreter's driver: binds symbolic dims from the inputs,
// plans the walk (topological order; Reduce(Mul(View…)) evaluated in one pass), evaluates
// each node with one typed kernel per op (kernels.h), writes elementwise results into dead
// operands' buffers, and frees each value after its last use.
#include "core/interp/interp.h"

#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "core/interp/kernels.h"
#include "core/ir/build.h"

namespace lathe {

namespace {

std::string node_desc(NodeRef n) {
  std::string s = "%" + std::to_string(n->id) + " (" + std::string(op_name(n->op)) + " " +
                  std::string(dtype_name(n->dtype)) + shape_to_string(n->shape) + ")";
  if (!n->prov.path.empty()) s += " from " + n->prov.path;
  return s;
}

std::string dims_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Binds one input's dims. Plain names bind on first sight; constants and expressions are
// checked once every plain name is bound (second pass).
void bind_input_dims(NodeRef in, const HostTensor& t, Bindings& b) {
  const std::string& name = in->attrs.name;
  if (t.dtype() != in->dtype)
    throw UserError("input '" + name + "' must be " + std::string(dtype_name(in->dtype)) + shape_to_string(in->shape) +
                    ", got dtype " + std::string(dtype_name(t.dtype())));
  if (t.rank() != in->rank())
    throw UserError("input '" + name + "' must have shape " + shape_to_string(in->shape) + " (rank " +
                    std::to_string(in->rank()) + "), got " + t.shape_string());
  for (size_t d = 0; d < in->rank(); ++d) {
    const SymInt& dim = in->shape[d];
    const SymExpr* e = dim.expr();
    if (!e || e->kind != SymKind::Var) continue;
    auto it = b.find(e->name);
    if (it == b.end()) {
      b[e->name] = t.shape()[d];
    } else if (it->second != t.shape()[d]) {
      throw UserError("input '" + name + "' dim " + std::to_string(d) + " is " + std::to_string(t.shape()[d]) +
                      " but " + e->name + " = " + std::to_string(it->second) + " (bound earlier)");
    }
  }
}

void check_input_dims(NodeRef in, const HostTensor& t, const Bindings& b) {
  for (size_t d = 0; d < in->rank(); ++d) {
    auto v = in->shape[d].eval(b);
    if (!v)
      throw UserError("input '" + in->attrs.name + "' dim " + std::to_string(d) + " (" + in->shape[d].to_string() +
                      ") cannot be inferred from the input shapes; bind its symbols explicitly");
    if (*v != t.shape()[d])
      throw UserError("input '" + in->attrs.name + "' must have shape " + shape_to_string(in->shape) + " = " +
                      dims_str(shape_eval(in->shape, b)) + ", got " + t.shape_string());
  }
}

}  // namespace

Bindings bind_symbols(const Graph& g, const TensorMap& inputs, const Bindings& given) {
  Bindings b = given;
  for (NodeRef in : g.inputs) {
    auto it = inputs.find(in->attrs.name);
    if (it == inputs.end())
      throw UserError("missing input '" + in->attrs.name + "' (" + std::string(dtype_name(in->dtype)) +
                      shape_to_string(in->shape) + ")");
    bind_input_dims(in, it->second, b);
  }
  for (NodeRef in : g.inputs) check_input_dims(in, inputs.at(in->attrs.name), b);
  return b;
}

Bindings bind_symbols(const Graph& g, const TensorMap& inputs) { return bind_symbols(g, inputs, Bindings{}); }

namespace {

// eval_node, optionally writing an elementwise result into `reuse` (see kernels.h).
HostTensor eval_node_into(NodeRef n, const std::vector<HostTensor>& in, const Bindings& b, const HostTensor* reuse) {
  using namespace interp;
  if (n->op == Op::Input) throw UserError("Input '" + n->attrs.name + "' has no value: inputs are bound by interpret()");
  if (static_cast<int>(in.size()) != static_cast<int>(n->inputs.size()))
    throw UserError("eval_node: " + node_desc(n) + " has " + std::to_string(n->inputs.size()) + " inputs, got " +
                    std::to_string(in.size()) + " values");
  // The node must be well-formed (a graph from make_node may bypass the builders).
  if (std::string err = prim::check_node(n->op, n->dtype, n->shape, n->inputs, n->attrs); !err.empty())
    throw UserError(err);
  for (size_t i = 0; i < in.size(); ++i) {
    NodeRef src = n->inputs[i];
    if (in[i].dtype() != src->dtype || in[i].shape() != shape_eval(src->shape, b))
      throw UserError("eval_node: input " + std::to_string(i) + " of " + node_desc(n) + " is " +
                      std::string(dtype_name(in[i].dtype())) + in[i].shape_string() + ", expected " +
                      std::string(dtype_name(src->dtype)) + shape_to_string(src->shape));
  }
  std::vector<int64_t> shape = shape_eval(n->shape, b);
  switch (n->op) {
    case Op::Input: break;
    case Op::Const: return kernel_const(n, shape);
    case Op::Index: return kernel_index(n->dtype, shape, n->attrs.axis);
    case Op::View: return kernel_view(in[0], view_eval(*n->attrs.view, b));
    case Op::Take: return kernel_take(in[0], in[1], n->attrs.axis);
    case Op::Copy: return in[0].clone();
    case Op::Assign: return in[1].clone();
    case Op::Neg: case Op::Recip: case Op::Sin: case Op::Exp2: case Op::Log2: case Op::Sqrt: case Op::Not:
      return kernel_unary(n->op, in[0], reuse);
    case Op::Cast: return kernel_cast(in[0], n->dtype, reuse);
    case Op::Add: case Op::Mul: case Op::IDiv: case Op::Mod: case Op::Max: case Op::And: case Op::Or:
    case Op::Xor: case Op::CmpLT: case Op::CmpNE:
      return kernel_binary(n->op, in[0], in[1], reuse);
    case Op::Where: return kernel_where(in[0], in[1], in[2], reuse);
    case Op::Reduce: return kernel_reduce(in[0], n->attrs.reduce, n->attrs.axes);
    case Op::Extern:
      if (n->attrs.name == "sgemm") return kernel_sgemm(in.at(0), in.at(1), n->attrs.ints);
      if (n->attrs.name == "attention") return kernel_attention(in, n->attrs.ints);
      if (n->attrs.name == "gemv_q4") return kernel_gemv_q4(in, n->attrs.ints);
      if (n->attrs.name == "attention_bwd") return kernel_attention_bwd(in, n->attrs.ints);
      if (n->attrs.name == "rnn") return kernel_rnn(in, n->attrs.ints);
      throw UserError("Extern: the interpreter has no kernel '" + n->attrs.name + "'");
  }
  throw InternalError("eval_node: unhandled op " + std::string(op_name(n->op)));
}

// An input of elementwise node n whose buffer may hold n's result: n is its last user, it
// is not the caller's Input buffer nor an Assign's value (nor an output: outputs count as
// uses). nullptr if none.
const HostTensor* reusable_input(NodeRef n, const std::vector<HostTensor>& args,
                                 const std::unordered_map<NodeRef, int>& uses) {
  if (!is_elementwise(n->op)) return nullptr;
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    NodeRef in = n->inputs[i];
    if (in->op == Op::Input || in->op == Op::Assign) continue;  // caller's buffer / handed out in *updated
    int here = 0;
    for (NodeRef other : n->inputs) here += other == in;
    if (uses.at(in) == here && args[i].dtype() == n->dtype) return &args[i];
  }
  return nullptr;
}

}  // namespace

HostTensor eval_node(NodeRef n, const std::vector<HostTensor>& in, const Bindings& b) {
  return eval_node_into(n, in, b, nullptr);
}

HostTensor cast_tensor(const HostTensor& t, DType to) { return interp::kernel_cast(t, to); }

namespace {

// Reduce(Mul(a, b)) where the Mul has no other reader is evaluated in one pass
// (kernel_reduce_mul), so matmul and conv written as expand-multiply-sum never materialize
// their broadcast product. An operand that is a mask-free View read only by that Mul is
// read in place from the View's source. The absorbed Mul and Views are never evaluated.
struct FusedReduce {
  NodeRef mul;
  NodeRef view[2];    // the absorbed View of operand k, or nullptr
  NodeRef source[2];  // the node whose value operand k reads
};

struct Plan {
  std::vector<NodeRef> order;                                  // nodes to evaluate
  std::unordered_map<NodeRef, std::vector<NodeRef>> reads;     // whose values each one reads
  std::unordered_map<NodeRef, FusedReduce> fused;
  std::unordered_map<NodeRef, int> uses;                       // remaining readers (+ outputs)
};

Plan make_plan(const Graph& g) {
  std::vector<NodeRef> topo = g.toposort();
  std::unordered_map<NodeRef, int> raw;
  for (NodeRef n : topo)
    for (NodeRef in : n->inputs) ++raw[in];
  for (auto& [name, n] : g.outputs) ++raw[n];

  Plan p;
  std::unordered_set<NodeRef> absorbed;
  for (NodeRef r : topo) {
    if (r->op != Op::Reduce) continue;
    NodeRef m = r->inputs[0];
    if (m->op != Op::Mul || raw[m] != 1 || m->inputs.size() != 2) continue;
    FusedReduce f{m, {nullptr, nullptr}, {m->inputs[0], m->inputs[1]}};
    for (int k = 0; k < 2; ++k) {
      NodeRef x = m->inputs[k];
      int here = (m->inputs[0] == x) + (m->inputs[1] == x);
      if (x->op == Op::View && x->attrs.view && !x->attrs.view->has_mask() && raw[x] == here) {
        f.view[k] = x;
        f.source[k] = x->inputs[0];
        absorbed.insert(x);
      }
    }
    absorbed.insert(m);
    p.fused[r] = f;
  }
  for (NodeRef n : topo) {
    if (absorbed.count(n)) continue;
    p.order.push_back(n);
    auto it = p.fused.find(n);
    std::vector<NodeRef> reads =
        it == p.fused.end() ? n->inputs : std::vector<NodeRef>{it->second.source[0], it->second.source[1]};
    for (NodeRef in : reads) ++p.uses[in];
    p.reads[n] = std::move(reads);
  }
  for (auto& [name, n] : g.outputs) ++p.uses[n];
  return p;
}

HostTensor eval_fused(NodeRef r, const FusedReduce& f, const std::vector<HostTensor>& src, const Bindings& b) {
  for (NodeRef n : {f.mul, f.view[0], f.view[1]}) {
    if (!n) continue;
    if (std::string err = prim::check_node(n->op, n->dtype, n->shape, n->inputs, n->attrs); !err.empty())
      throw UserError(err + " (in " + node_desc(n) + ")");
  }
  if (std::string err = prim::check_node(r->op, r->dtype, r->shape, r->inputs, r->attrs); !err.empty())
    throw UserError(err);
  std::vector<int64_t> shape = shape_eval(f.mul->shape, b);
  interp::StridedOperand ops[2];
  for (int k = 0; k < 2; ++k) {
    ops[k].base = src[k];
    if (f.view[k]) {
      ConcreteView v = view_eval(*f.view[k]->attrs.view, b);
      interp::check_view_bounds(v, src[k].numel());
      ops[k].strides = v.strides;
      ops[k].offset = v.offset;
    } else {
      ops[k].strides.assign(shape.size(), 1);
      for (size_t d = shape.size(); d-- > 1;) ops[k].strides[d - 1] = ops[k].strides[d] * shape[d];
    }
  }
  return interp::kernel_reduce_mul(r->attrs.reduce, r->dtype, shape, r->attrs.axes, ops[0], ops[1]);
}

}  // namespace

TensorMap interpret(const Graph& g, const TensorMap& inputs, const InterpOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  auto micros = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - t_start).count(); };
  TensorMap* updated = options.updated;
  Bindings b = bind_symbols(g, inputs, options.bindings);
  Plan plan = make_plan(g);

  std::unordered_map<NodeRef, HostTensor> value;
  for (NodeRef n : plan.order) {
    if (n->op == Op::Input) {
      auto it = inputs.find(n->attrs.name);
      if (it == inputs.end())  // an Input reached from the outputs but not declared in g.inputs
        throw UserError("missing input '" + n->attrs.name + "' (" + std::string(dtype_name(n->dtype)) +
                        shape_to_string(n->shape) + ")");
      if (it->second.dtype() != n->dtype || it->second.shape() != shape_eval(n->shape, b))
        throw UserError("input '" + n->attrs.name + "' must be " + std::string(dtype_name(n->dtype)) +
                        shape_to_string(n->shape) + ", got " + std::string(dtype_name(it->second.dtype())) +
                        it->second.shape_string());
      value[n] = it->second;
      continue;
    }
    const std::vector<NodeRef>& reads = plan.reads.at(n);
    std::vector<HostTensor> args;
    args.reserve(reads.size());
    for (NodeRef in : reads) args.push_back(value.at(in));
    try {
      auto t0 = Clock::now();
      auto fused = plan.fused.find(n);
      value[n] = fused != plan.fused.end() ? eval_fused(n, fused->second, args, b)
                                           : eval_node_into(n, args, b, reusable_input(n, args, plan.uses));
      if (options.timings) options.timings->push_back({n, micros(t0), micros(Clock::now()) - micros(t0)});
    } catch (const UserError& e) {
      Diagnostic d = e.diag();
      if (d.node < 0) {
        d.node = static_cast<int>(n->id);
        d.message = "while evaluating " + node_desc(n) + ": " + d.message;
      }
      throw UserError(d);
    }
    args.clear();
    for (NodeRef in : reads)
      if (--plan.uses[in] == 0) value.erase(in);
    if (n->op == Op::Assign && updated) (*updated)[n->inputs[0]->attrs.name] = value[n];
  }

  TensorMap out;
  for (auto& [name, n] : g.outputs) {
    const HostTensor& v = value.at(n);
    // Never hand out the caller's own input buffers or a value already handed out.
    bool shared = n->op == Op::Input;
    for (auto& [other, t] : out) shared |= t.data() == v.data();
    out[name] = shared ? v.clone() : v;
  }
  return out;
}

TensorMap interpret(const Graph& g, const TensorMap& inputs, TensorMap* updated) {
  InterpOptions o;
  o.updated = updated;
  return interpret(g, inputs, o);
}

}  // namespace lathe
