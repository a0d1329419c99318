// onnx_ctx.cpp — NodeCtx (inputs, typed attributes, outputs, errors), import-time
// constant folding, and the operator table assembled from the family files.
#include <unordered_set>

#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"
#include "core/interp/interp.h"

namespace lathe::onnx_import {

// ---- folding -------------------------------------------------------------------------------

std::optional<HostTensor> Folder::try_fold(NodeRef n) {
  if (auto it = cache_.find(n); it != cache_.end()) return it->second;
  std::optional<HostTensor> result;
  if (n->op == Op::Const && n->attrs.data) {
    result = *n->attrs.data;
  } else {
    // constant iff no Input is reachable
    std::vector<NodeRef> stack{n};
    std::unordered_set<NodeRef> seen{n};
    bool dynamic = false;
    while (!stack.empty() && !dynamic) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (x->op == Op::Input) dynamic = true;
      int64_t numel = 1;  // every intermediate the interpreter would allocate stays under the cap
      for (const auto& d : x->shape) {
        if (!d.is_const() || d.value() <= 0) continue;
        if (numel > max_elements_ / d.value())
          throw UserError("constant folding would create a tensor of shape " + shape_to_string(x->shape) +
                          ", more than the limit of " + std::to_string(max_elements_) + " elements");
        numel *= d.value();
      }
      for (NodeRef i : x->inputs)
        if (seen.insert(i).second) stack.push_back(i);
    }
    if (!dynamic) {
      if (!shape_is_const(n->shape)) {
        dynamic = true;
      } else {
        Graph g = Graph::from_outputs({{"v", n}});
        TensorMap out = interpret(g, {});
        result = out.at("v");
      }
    }
  }
  cache_[n] = result;
  return result;
}

// ---- NodeCtx ---------------------------------------------------------------------------------

void NodeCtx::fail(const std::string& msg) const { throw UserError(where_ + ": " + msg); }
void NodeCtx::unsupported(const std::string& msg) const { throw OnnxUnsupported(where_ + ": " + msg); }

std::vector<Tensor> NodeCtx::seq_in(size_t i) const {
  if (!is_seq(i)) fail("input " + std::to_string(i) + " must be a sequence");
  std::vector<Tensor> r;
  for (NodeRef n : *seq_in_[i]) r.emplace_back(n);
  return r;
}

void NodeCtx::set_seq(size_t i, const std::vector<Tensor>& v) {
  if (i >= seq_out_.size()) return;
  std::vector<NodeRef> ns;
  for (const Tensor& t : v) ns.push_back(t.node());
  seq_out_[i] = std::move(ns);
}

Tensor NodeCtx::in(size_t i) const {
  if (is_seq(i)) fail("input " + std::to_string(i) + " is a sequence, expected a tensor");
  if (!has(i)) fail("required input " + std::to_string(i) + " is missing");
  return Tensor(inputs_[i]);
}

std::optional<Tensor> NodeCtx::opt_in(size_t i) const {
  if (!has(i)) return std::nullopt;
  return Tensor(inputs_[i]);
}

std::vector<Tensor> NodeCtx::all_inputs() const {
  std::vector<Tensor> r;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i]) r.emplace_back(inputs_[i]);
  return r;
}

std::optional<HostTensor> NodeCtx::known_in(size_t i) const {
  if (!has(i)) return std::nullopt;
  if (auto v = folder_.try_fold(in(i).node())) return v;
  if (host_lookup_) return host_lookup_(proto_.input(static_cast<int>(i)));
  return std::nullopt;
}

HostTensor NodeCtx::const_in(size_t i) const {
  NodeRef n = in(i).node();
  auto v = folder_.try_fold(n);
  if (!v) throw OnnxUnsupported("dynamic shape input not supported: " + where_ + " input " + std::to_string(i) +
                                " ('" + proto_.input(static_cast<int>(i)) + "') is not a constant");
  return *v;
}

std::vector<int64_t> NodeCtx::ints_in(size_t i) const {
  HostTensor t = const_in(i);
  if (!is_int(t.dtype())) fail("input " + std::to_string(i) + " must be an integer tensor, got " +
                               std::string(dtype_name(t.dtype())));
  if (t.rank() > 1) fail("input " + std::to_string(i) + " must be 0-D or 1-D, got shape " + t.shape_string());
  std::vector<int64_t> r;
  r.reserve(static_cast<size_t>(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) r.push_back(t.get_i64(k));
  return r;
}

double NodeCtx::scalar_in(size_t i) const {
  HostTensor t = const_in(i);
  if (t.numel() != 1) fail("input " + std::to_string(i) + " must hold one value, got shape " + t.shape_string());
  return t.get_f64(0);
}

const onnx::AttributeProto* NodeCtx::find_attr(const std::string& name) const {
  for (const auto& a : proto_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

namespace {
const char* attr_type_name(int t) {
  switch (t) {
    case onnx::AttributeProto::FLOAT: return "FLOAT";
    case onnx::AttributeProto::INT: return "INT";
    case onnx::AttributeProto::STRING: return "STRING";
    case onnx::AttributeProto::TENSOR: return "TENSOR";
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::FLOATS: return "FLOATS";
    case onnx::AttributeProto::INTS: return "INTS";
    case onnx::AttributeProto::STRINGS: return "STRINGS";
    default: return "another type";
  }
}
// Old models omit `type`; infer it from the populated field then.
int attr_kind(const onnx::AttributeProto& a) {
  if (a.has_type() && a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
  if (a.ints_size()) return onnx::AttributeProto::INTS;
  if (a.floats_size()) return onnx::AttributeProto::FLOATS;
  if (a.strings_size()) return onnx::AttributeProto::STRINGS;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  if (a.has_g()) return onnx::AttributeProto::GRAPH;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_i()) return onnx::AttributeProto::INT;
  return onnx::AttributeProto::UNDEFINED;
}
}  // namespace

#define LATHE_ATTR_EXPECT(a, kind)                                                                       \
  do {                                                                                                   \
    int k_ = attr_kind(*a);                                                                              \
    if (k_ != onnx::AttributeProto::kind)                                                                \
      fail("attribute '" + name + "' must be " #kind ", got " + attr_type_name(k_));                     \
  } while (0)

int64_t NodeCtx::attr_int(const std::string& name, int64_t def) const {
  const auto* a = find_attr(name);
  if (!a) return def;
  LATHE_ATTR_EXPECT(a, INT);
  return a->i();
}

double NodeCtx::attr_float(const std::string& name, double def) const {
  const auto* a = find_attr(name);
  if (!a) return def;
  LATHE_ATTR_EXPECT(a, FLOAT);
  return a->f();
}

std::string NodeCtx::attr_string(const std::string& name, const std::string& def) const {
  const auto* a = find_attr(name);
  if (!a) return def;
  LATHE_ATTR_EXPECT(a, STRING);
  return a->s();
}

std::vector<int64_t> NodeCtx::attr_ints(const std::string& name, std::vector<int64_t> def) const {
  const auto* a = find_attr(name);
  if (!a) return def;
  int k = attr_kind(*a);
  if (k == onnx::AttributeProto::UNDEFINED) return {};
  LATHE_ATTR_EXPECT(a, INTS);
  return {a->ints().begin(), a->ints().end()};
}

std::vector<float> NodeCtx::attr_floats(const std::string& name, std::vector<float> def) const {
  const auto* a = find_attr(name);
  if (!a) return def;
  int k = attr_kind(*a);
  if (k == onnx::AttributeProto::UNDEFINED) return {};
  LATHE_ATTR_EXPECT(a, FLOATS);
  return {a->floats().begin(), a->floats().end()};
}

const onnx::TensorProto* NodeCtx::attr_tensor(const std::string& name) const {
  const auto* a = find_attr(name);
  if (!a) return nullptr;
  LATHE_ATTR_EXPECT(a, TENSOR);
  return &a->t();
}
const onnx::GraphProto& NodeCtx::attr_graph(const std::string& name) const {
  const auto* a = find_attr(name);
  if (!a) fail("attribute '" + name + "' (a graph) is required");
  LATHE_ATTR_EXPECT(a, GRAPH);
  return a->g();
}
#undef LATHE_ATTR_EXPECT

std::vector<BodyValue> NodeCtx::run_body_values(const std::string& attr, const std::vector<BodyValue>& args) const {
  LATHE_CHECK(subgraph_ != nullptr, "no subgraph runner for a control-flow node");
  return subgraph_(attr_graph(attr), args);
}

std::vector<Tensor> NodeCtx::run_body(const std::string& attr, const std::vector<Tensor>& args) const {
  std::vector<BodyValue> in;
  for (const Tensor& t : args) in.push_back(BodyValue::of(t));
  std::vector<Tensor> r;
  for (const BodyValue& v : run_body_values(attr, in)) {
    if (v.kind != BodyValue::Kind::Tensor)
      unsupported(attr + " returns a " + (v.kind == BodyValue::Kind::None ? "an empty optional" : "sequence") +
                  " where this op needs tensors");
    r.push_back(*v.tensor);
  }
  return r;
}

BodyValue NodeCtx::value_in(size_t i) const {
  if (is_seq(i)) return BodyValue::of_seq(seq_in(i));
  if (is_none(i)) return BodyValue::none();
  return BodyValue::of(in(i));
}

void NodeCtx::set_value(size_t i, const BodyValue& v) {
  switch (v.kind) {
    case BodyValue::Kind::Tensor: set(i, *v.tensor); return;
    case BodyValue::Kind::Sequence: set_seq(i, v.seq); return;
    case BodyValue::Kind::None: set_none(i); return;
  }
}

void NodeCtx::set(size_t i, const Tensor& t) {
  LATHE_CHECK(t.defined(), "lowering set an undefined output");
  if (i < outputs_.size()) outputs_[i] = t.node();
}

int NodeCtx::axis(int64_t a, int rank, const char* what) const {
  if (a < -rank || a >= rank)
    fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

void NodeCtx::only_outputs(size_t n) const {
  for (size_t i = n; i < outputs_.size(); ++i)
    if (wants(i)) unsupported("output " + std::to_string(i) + " ('" + proto_.output(static_cast<int>(i)) +
                              "') is not supported");
}

// ---- shared helpers ----------------------------------------------------------------------------

Tensor multi_broadcast_fold(const std::vector<Tensor>& xs, const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
  LATHE_CHECK(!xs.empty(), "variadic op with no operands");
  Tensor acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) acc = f(acc, xs[i]);
  return acc;
}

void require_same_dtype(const NodeCtx& c, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    c.fail("operand dtypes differ: " + a.describe() + " vs " + b.describe() + " (ONNX requires equal types)");
}

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    add_elementwise_ops(t);
    add_activation_ops(t);
    add_reduce_ops(t);
    add_shape_ops(t);
    add_index_ops(t);
    add_nn_ops(t);
    add_norm_ops(t);
    add_misc_ops(t);
    add_loss_ops(t);
    add_resize_ops(t);
    add_rnn_ops(t);
    add_scatter_ops(t);
    add_extra_ops(t);
    add_signal_ops(t);
    add_text_ops(t);
    add_control_ops(t);
    add_sequence_ops(t);
    add_quant_ops(t);
    return t;
  }();
  return table;
}

}  // namespace lathe::onnx_import
