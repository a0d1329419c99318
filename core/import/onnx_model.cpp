// onnx_model.cpp — ModelProto -> Graph: opset, inputs, initializers, node order (with
// cycle and undefined-input detection), per-node lowering under provenance, outputs.
#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/import/onnx_lowerer.h"
#include "core/import/onnx_stage.h"
#include "core/import/onnx_tensor.h"
#include "core/import/onnx_weights.h"
#include "core/ir/loader.h"
#include "core/ir/verify.h"
#include "core/rewrite/qdq_rules.h"

namespace lathe {
namespace onnx_import {
namespace {

constexpr int kMinOpset = 1, kMaxOpset = 18;

std::string sanitize_symbol(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "d_" + r;
  return r;
}

int model_opset(const onnx::ModelProto& m, const std::string& file) {
  int opset = -1;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  if (opset < 0) {
    if (m.opset_import_size() == 0) opset = 1;  // IR version 1-2 models predate opset_import
    else {
      std::string domains;
      for (const auto& o : m.opset_import()) domains += (domains.empty() ? "'" : ", '") + o.domain() + "'";
      throw OnnxUnsupported(file + ": the model imports no ai.onnx opset, only the domains " + domains +
                            " (Lathe reads ai.onnx ops only)");
    }
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    throw OnnxUnsupported(file + ": opset " + std::to_string(opset) + " is not supported (Lathe reads opsets " +
                          std::to_string(kMinOpset) + "–" + std::to_string(kMaxOpset) + ")");
  return opset;
}

// A tensor graph input (or an optional's tensor) of the declared type.
NodeRef make_tensor_input(const std::string& name, const onnx::TypeProto& type, const std::string& what) {
  if (!type.has_tensor_type()) throw OnnxUnsupported(what + " is not a tensor (maps and sparse tensors are not supported)");
  const auto& tt = type.tensor_type();
  if (tt.elem_type() != 0 && !dtype_from_onnx(tt.elem_type()))
    throw OnnxUnsupported(what + ": unsupported ONNX dtype '" + onnx_type_name(tt.elem_type()) + "'" +
                          (tt.elem_type() == onnx::TensorProto::STRING ? " (Lathe has no string tensors)" : ""));
  DType dt = require_dtype(tt.elem_type(), what);
  if (!tt.has_shape()) throw OnnxUnsupported(what + " has no shape (unknown rank is not supported)");
  Shape shape;
  int i = 0;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) throw UserError(what + ": dim " + std::to_string(i) + " is negative");
      shape.push_back(SymInt(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      shape.push_back(SymInt::var(sanitize_symbol(d.dim_param())));
    } else {
      shape.push_back(SymInt::var(sanitize_symbol(name) + "_d" + std::to_string(i)));
    }
    ++i;
  }
  return prim::input(name, dt, shape);
}

// The elements of a sequence graph input: tensor inputs NAME[k] of the shapes given. A dim
// the model names (dim_param) stays that symbol when every element has one size there, so
// it unifies with other inputs' dims of the name; a dim whose size varies is concrete.
std::vector<NodeRef> make_sequence_input(const std::string& name, const onnx::TypeProto& type,
                                         const OnnxOptions& opt, const std::string& what) {
  const onnx::TypeProto& et = type.sequence_type().elem_type();
  if (!et.has_tensor_type()) throw OnnxUnsupported(what + " is a sequence of non-tensors");
  DType dt = require_dtype(et.tensor_type().elem_type(), what + " element type");
  auto it = opt.sequence_inputs.find(name);
  if (it == opt.sequence_inputs.end())
    throw OnnxUnsupported(what + " is a sequence: its length and element shapes are fixed at import time; give them "
                          "(OnnxOptions::sequence_inputs; `lathe onnx-test` takes them from the test data)");
  const bool declared = et.tensor_type().has_shape();
  const auto& dims = et.tensor_type().shape().dim();
  std::vector<NodeRef> r;
  for (size_t k = 0; k < it->second.size(); ++k) {
    const auto& shape = it->second[k];
    if (declared && dims.size() != static_cast<int>(shape.size()))
      throw UserError(what + ": element " + std::to_string(k) + " has rank " + std::to_string(shape.size()) +
                      ", the model declares rank " + std::to_string(dims.size()));
    Shape sh;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t d = shape[i];
      if (d < 0) throw UserError(what + ": element " + std::to_string(k) + " has a negative dim");
      if (declared && dims[static_cast<int>(i)].has_dim_value() && dims[static_cast<int>(i)].dim_value() != d)
        throw UserError(what + ": element " + std::to_string(k) + " has dim " + std::to_string(i) + " of " +
                        std::to_string(d) + ", the model declares " + std::to_string(dims[static_cast<int>(i)].dim_value()));
      bool same = true;
      for (const auto& other : it->second) same &= other.size() == shape.size() && other[i] == d;
      if (declared && same && dims[static_cast<int>(i)].has_dim_param() && !dims[static_cast<int>(i)].dim_param().empty())
        sh.push_back(SymInt::var(sanitize_symbol(dims[static_cast<int>(i)].dim_param())));
      else
        sh.push_back(SymInt(d));
    }
    r.push_back(prim::input(name + "[" + std::to_string(k) + "]", dt, sh));
  }
  return r;
}

OnnxValueKind value_kind(const onnx::ValueInfoProto& vi) {
  if (vi.type().has_sequence_type()) return OnnxValueKind::Sequence;
  if (vi.type().has_optional_type()) return OnnxValueKind::Optional;
  return OnnxValueKind::Tensor;
}

// Where the initializers' raw_data lie when the model was read from a mapped file.
struct MappedWeights {
  std::shared_ptr<const MappedFile> file;     // null: bytes in the caller's memory, copied
  const std::byte* base = nullptr;
  std::vector<std::optional<ByteRange>> raw;  // per initializer
};

Graph import_model(const onnx::ModelProto& m, const OnnxOptions& opt, const std::string& file,
                   const MappedWeights* mapped = nullptr) {
  if (!m.has_graph()) throw UserError(file + ": the model has no graph");
  const int opset = model_opset(m, file);
  const onnx::GraphProto& g = m.graph();
  if (g.sparse_initializer_size()) throw OnnxUnsupported(file + ": sparse initializers are not supported");

  std::unordered_map<std::string, NodeRef> values;
  std::set<std::string> defined;
  std::vector<NodeRef> inputs, weight_inputs;
  std::unordered_map<std::string, std::vector<NodeRef>> seq_inputs;
  std::set<std::string> none_inputs;

  std::set<std::string> init_names;
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) throw UserError(file + ": an initializer has no name");
    if (!init_names.insert(t.name()).second) throw UserError(file + ": initializer '" + t.name() + "' appears twice");
  }
  for (const auto& vi : g.input()) {
    if (vi.name().empty()) throw UserError(file + ": a graph input has no name");
    if (init_names.count(vi.name())) continue;  // old opsets list initializers as inputs too
    if (values.count(vi.name())) throw UserError(file + ": graph input '" + vi.name() + "' appears twice");
    std::string what = file + ": graph input '" + vi.name() + "'";
    if (!vi.has_type()) throw OnnxUnsupported(what + " has no type");
    const onnx::TypeProto* type = &vi.type();
    if (type->has_optional_type()) {
      if (opt.absent_optionals.count(vi.name())) {
        none_inputs.insert(vi.name());
        continue;
      }
      type = &type->optional_type().elem_type();
    }
    if (type->has_sequence_type()) {
      std::vector<NodeRef> elems = make_sequence_input(vi.name(), *type, opt, what);
      for (NodeRef& e : elems) {  // an element given a value (fixed_inputs "NAME[k]") is a constant
        auto fixed = opt.fixed_inputs.find(e->attrs.name);
        if (fixed == opt.fixed_inputs.end()) {
          inputs.push_back(e);
          continue;
        }
        const HostTensor& v = fixed->second;
        if (v.dtype() != e->dtype || v.rank() != e->rank())
          throw UserError(file + ": the value given for sequence element '" + e->attrs.name + "' is " +
                          std::string(dtype_name(v.dtype())) + v.shape_string() + ", expected " +
                          std::string(dtype_name(e->dtype)) + shape_to_string(e->shape));
        e = prim::constant_tensor(v);
      }
      seq_inputs[vi.name()] = std::move(elems);
      continue;
    }
    NodeRef in = make_tensor_input(vi.name(), *type, what);
    if (auto fixed = opt.fixed_inputs.find(vi.name()); fixed != opt.fixed_inputs.end()) {
      const HostTensor& v = fixed->second;
      if (v.dtype() != in->dtype || v.rank() != in->rank())
        throw UserError(file + ": the value given for graph input '" + vi.name() + "' is " +
                        std::string(dtype_name(v.dtype())) + v.shape_string() + ", expected " +
                        std::string(dtype_name(in->dtype)) + shape_to_string(in->shape));
      values[vi.name()] = prim::constant_tensor(v);
      continue;
    }
    values[vi.name()] = in;
    inputs.push_back(in);
  }
  // The weights must fit in memory (mapped ones are paged in on first use, but used they are).
  const uint64_t budget = memory_budget();
  uint64_t weight_bytes = 0;
  for (int k = 0; k < g.initializer_size(); ++k) {
    const onnx::TensorProto& t = g.initializer(k);
    std::string what = file + ": initializer '" + t.name() + "'";
    RawInFile in_file;
    const RawInFile* raw = nullptr;
    if (mapped && k < static_cast<int>(mapped->raw.size()) && mapped->raw[k]) {
      in_file = RawInFile{mapped->file, mapped->base, mapped->raw[k]->offset, mapped->raw[k]->size};
      raw = &in_file;
    }
    HostTensor v = tensor_from_proto(t, opt.max_elements, what, raw);
    weight_bytes += v.nbytes();
    if (budget && weight_bytes > budget)
      throw UserError(what + " (" + std::string(dtype_name(v.dtype())) + v.shape_string() + ", " +
                      format_bytes(v.nbytes()) + ") brings the weights to " + format_bytes(weight_bytes) +
                      ", more than the " + format_bytes(budget) + " of memory available");
    NodeRef node;
    if (opt.weights_as_inputs && is_float(v.dtype())) {
      node = prim::input(t.name(), v.dtype(), shape_from(v.shape()));
      weight_inputs.push_back(node);
    } else {
      node = prim::constant_tensor(v);
    }
    values[t.name()] = node;
  }
  for (auto& [k, v] : values) defined.insert(k);

  Lowerer low{opset, opt, file, Folder(opt.max_elements), 0, std::move(seq_inputs), std::move(none_inputs)};
  low.lower_nodes(g, values, "", 0);

  Graph out;
  out.inputs = inputs;
  out.inputs.insert(out.inputs.end(), weight_inputs.begin(), weight_inputs.end());
  std::set<std::string> out_names;
  for (const auto& vi : g.output()) {
    auto it = values.find(vi.name());
    if (auto sq = low.seqs.find(vi.name()); sq != low.seqs.end()) {  // one output per element
      if (!out_names.insert(vi.name()).second) throw UserError(file + ": graph output '" + vi.name() + "' is listed twice");
      for (size_t k = 0; k < sq->second.size(); ++k)
        out.outputs.emplace_back(vi.name() + "[" + std::to_string(k) + "]", sq->second[k]);
      continue;
    }
    if (low.nones.count(vi.name()))
      throw OnnxUnsupported(file + ": graph output '" + vi.name() + "' is an empty optional (a graph has tensor outputs)");
    if (it == values.end()) throw UserError(file + ": graph output '" + vi.name() + "' is never produced");
    if (!out_names.insert(vi.name()).second) throw UserError(file + ": graph output '" + vi.name() + "' is listed twice");
    out.outputs.emplace_back(vi.name(), it->second);
  }
  if (out.outputs.empty() && g.output_size()) throw OnnxUnsupported(file + ": the graph's outputs are all empty sequences");
  if (out.outputs.empty()) throw UserError(file + ": the graph has no outputs");
  verify_or_throw(out, file);
  // QDQ models: the `qdq` rule set fuses DequantizeLinear → MatMul/Gemm/Conv → QuantizeLinear
  // into int8 contractions (core/rewrite/qdq_rules.h); LATHE_QDQ=unfused keeps the plain ops.
  const char* env = std::getenv("LATHE_QDQ");
  bool unfused = env && std::string(env) == "unfused";
  if (opt.qdq_rules && !unfused &&
      std::any_of(g.node().begin(), g.node().end(), [](const onnx::NodeProto& n) { return n.op_type() == "DequantizeLinear"; }))
    out = apply_qdq_rules(out, nullptr, opt.qdq_sat16 < 0 ? qdq_sat16_default() : opt.qdq_sat16 == 1);  // ORT's AVX2 sums
  return out;
}

onnx::ModelProto parse_model(const void* data, size_t size, const std::string& name, const std::string& problem = "") {
  if (size > static_cast<size_t>(INT32_MAX))
    throw UserError(name + ": models over 2 GiB (external data) are not supported");
  onnx::ModelProto m;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  in.SetRecursionLimit(64);
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    throw UserError(name + ": not a valid ONNX model (the protobuf is truncated or malformed)" +
                    (problem.empty() ? "" : ": " + problem));
  return m;
}

// The model's structure parsed, its large weights left where they lie in `bytes` (which
// `file` maps, when given). A file that is not well-formed wire format is parsed as it is.
Graph import_bytes(const uint8_t* bytes, size_t size, const OnnxOptions& opt, const std::string& name,
                   std::shared_ptr<const MappedFile> file) {
  std::string problem;
  std::optional<StrippedModel> stripped = strip_weights(bytes, size, &problem);
  if (!stripped) return import_model(parse_model(bytes, size, name, problem), opt, name);
  onnx::ModelProto m = parse_model(stripped->bytes.data(), stripped->bytes.size(), name);
  MappedWeights w{std::move(file), reinterpret_cast<const std::byte*>(bytes), std::move(stripped->raw)};
  return import_model(m, opt, name, &w);
}

}  // namespace

// Whether the constant part of a shape already exceeds the element cap (overflow-safe).
bool too_large(const Shape& s, int64_t cap) {
  int64_t n = 1;
  for (const auto& d : s) {
    if (!d.is_const() || d.value() <= 0) continue;
    if (n > cap / d.value()) return true;
    n *= d.value();
  }
  return false;
}

// Node indices in an order where every input is defined before use (Kahn's algorithm,
// preferring the file's order). Undefined inputs and cycles are user errors.
std::vector<int> schedule_nodes(const onnx::GraphProto& g, const std::set<std::string>& defined,
                                const std::string& file) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int k = 0; k < n; ++k)
    for (const auto& o : g.node(k).output()) {
      if (o.empty()) continue;
      if (defined.count(o) || !producer.emplace(o, k).second)
        throw UserError(file + ": value '" + o + "' is defined more than once (node " + std::to_string(k) + ")");
    }
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int k = 0; k < n; ++k)
    for (const auto& in : g.node(k).input()) {
      if (in.empty() || defined.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        throw UserError(file + ": node " + std::to_string(k) + " ('" + g.node(k).name() + "', " + g.node(k).op_type() +
                        ") uses '" + in + "', which is not a graph input, an initializer or any node's output");
      ++pending[k];
      users[it->second].push_back(k);
    }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int k = 0; k < n; ++k)
    if (!pending[k]) ready.push(k);
  std::vector<int> order;
  while (!ready.empty()) {
    int k = ready.top();
    ready.pop();
    order.push_back(k);
    for (int u : users[k])
      if (--pending[u] == 0) ready.push(u);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int k = 0; k < n; ++k)
      if (pending[k])
        throw UserError(file + ": the graph has a cycle through node " + std::to_string(k) + " ('" +
                        g.node(k).name() + "', " + g.node(k).op_type() + ")");
  }
  return order;
}

onnx::ModelProto read_model_file(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_model(file->data(), file->size(), path);
}

onnx::ModelProto read_model_bytes(const void* data, size_t size, const std::string& name) {
  return parse_model(data, size, name);
}

int model_opset_of(const onnx::ModelProto& m, const std::string& file) { return model_opset(m, file); }

}  // namespace onnx_import

Graph load_onnx_bytes(const void* data, size_t size, const OnnxOptions& opt, const std::string& name) {
  return onnx_import::import_bytes(static_cast<const uint8_t*>(data), size, opt, name, nullptr);
}

Graph load_onnx(const std::string& path, const OnnxOptions& opt) {
  auto file = MappedFile::open(path);
  return onnx_import::import_bytes(reinterpret_cast<const uint8_t*>(file->data()), file->size(), opt, path, file);
}

OnnxSignature onnx_signature(const std::string& path) {
  auto file = MappedFile::open(path);
  const auto* bytes = reinterpret_cast<const uint8_t*>(file->data());
  std::string problem;
  auto stripped = onnx_import::strip_weights(bytes, file->size(), &problem);
  onnx::ModelProto m = stripped ? onnx_import::parse_model(stripped->bytes.data(), stripped->bytes.size(), path)
                                : onnx_import::parse_model(bytes, file->size(), path, problem);
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  OnnxSignature r;
  for (const auto& vi : m.graph().input())
    if (!inits.count(vi.name())) r.inputs.emplace_back(vi.name(), onnx_import::value_kind(vi));
  for (const auto& vi : m.graph().output()) r.outputs.emplace_back(vi.name(), onnx_import::value_kind(vi));
  return r;
}

std::vector<std::string> onnx_graph_inputs(const std::string& path) {
  std::vector<std::string> r;
  for (auto& [name, kind] : onnx_signature(path).inputs) r.push_back(name);
  return r;
}

void register_onnx_loader() {
  register_graph_loader(".onnx", [](const std::string& path) { return load_onnx(path); });
}

}  // namespace lathe
