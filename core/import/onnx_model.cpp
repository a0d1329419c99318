// onnx_model.cpp — ModelProto -> Graph: opset, inputs, initializers, node order (with
// cycle and undefined-input detection), per-node lowering under provenance, outputs.
#include <google/protobuf/io/coded_stream.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/import/onnx_lower.h"
#include "core/import/onnx_stage.h"
#include "core/import/onnx_tensor.h"
#include "core/import/onnx_weights.h"
#include "core/ir/loader.h"
#include "core/ir/verify.h"

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

int model_opset(const onnx::ModelProto& m, const std::string& file) {
  int opset = -1;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  if (opset < 0) {
    if (m.opset_import_size() == 0) opset = 1;  // IR version 1-2 models predate opset_import
    else throw OnnxUnsupported(file + ": the model imports no ai.onnx opset (only custom domains)");
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
    throw OnnxUnsupported(what + ": unsupported ONNX dtype '" + onnx_type_name(tt.elem_type()) + "'");
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

// Lowers the nodes of a graph (the model's, or a control-flow body with the enclosing
// scope's values visible) into `values`. Bodies nest at most kMaxDepth deep, and all the
// bodies of one model lower at most kMaxBodyNodes nodes in all (unrolled loops count each
// iteration), so a hostile model cannot make the importer run away.
constexpr int kMaxDepth = 16;
constexpr int64_t kMaxBodyNodes = 1 << 20;

struct Lowerer {
  int opset;
  const OnnxOptions& opt;
  std::string file;
  Folder folder;
  int64_t body_nodes;
  // sequence values (import-time lists of tensors), by name; names are unique across scopes
  std::unordered_map<std::string, std::vector<NodeRef>> seqs = {};
  // optional values that hold nothing (None), by name
  std::set<std::string> nones = {};
  // lowering one segment of a staged model (onnx_staged.h): the graph's own nodes only
  StageCtx* stage = nullptr;

  // prefix: "" for the model's graph; for a body, the enclosing node's where + " > ".
  void lower_nodes(const onnx::GraphProto& g, std::unordered_map<std::string, NodeRef>& values,
                   const std::string& prefix, int depth) {
    std::set<std::string> defined;
    for (auto& [k, v] : values) defined.insert(k);
    for (auto& [k, v] : seqs) defined.insert(k);
    for (auto& k : nones) defined.insert(k);
    if (stage && depth == 0)  // a segment after the first: earlier nodes' results are bound already
      for (const auto& n : g.node())
        for (const auto& o : n.output()) defined.erase(o);
    std::vector<int> order = schedule_nodes(g, defined, file);
    const OpTable& table = op_table();
    const bool staged = stage && depth == 0;
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const int k = order[pos];
      if (staged && stage->done.count(k)) continue;
      const onnx::NodeProto& np = g.node(k);
      std::string label = np.name().empty() ? np.op_type() + "#" + std::to_string(k) : np.name() + ":" + np.op_type();
      std::string where = prefix + "node '" + (np.name().empty() ? "#" + std::to_string(k) : np.name()) + "' (" + np.op_type() + ")";
      auto located = [&](const std::string& m) { return prefix.empty() ? file + ": " + m : m; };
      if (!np.domain().empty() && np.domain() != "ai.onnx")
        throw OnnxUnsupported(located("unsupported ONNX op '" + np.domain() + "." + np.op_type() + "' (" + where + ")"));
      auto fn = table.find(np.op_type());
      if (fn == table.end())
        throw OnnxUnsupported(located("unsupported ONNX op '" + np.op_type() + "' (" + where + ")"));
      if (depth > 0 && ++body_nodes > kMaxBodyNodes)
        throw UserError(located(where + ": the control-flow bodies would lower more than " +
                                std::to_string(kMaxBodyNodes) + " nodes"));
      std::vector<NodeRef> ins;
      std::vector<const std::vector<NodeRef>*> seq_ins;
      for (const auto& name : np.input()) {
        auto sq = name.empty() ? seqs.end() : seqs.find(name);
        if (sq != seqs.end()) {
          ins.push_back(nullptr);
          seq_ins.push_back(&sq->second);
        } else if (!name.empty() && nones.count(name)) {
          ins.push_back(nullptr);  // NodeCtx::is_none
          seq_ins.push_back(nullptr);
        } else {
          ins.push_back(name.empty() ? nullptr : values.at(name));
          seq_ins.push_back(nullptr);
        }
      }
      NodeCtx ctx(np, opset, std::move(ins), folder, where);
      ctx.set_sequence_inputs(std::move(seq_ins));
      if (staged)
        ctx.set_host_lookup([this](const std::string& name) -> std::optional<HostTensor> {
          auto it = stage->host.find(name);
          if (it == stage->host.end()) return std::nullopt;
          ++stage->host_checks;  // this import now depends on a value: not cached
          return it->second;
        });
      ctx.set_subgraph_runner([&, where, depth](const onnx::GraphProto& body, const std::vector<BodyValue>& args) {
        if (depth + 1 > kMaxDepth)
          throw UserError(where + ": control-flow bodies nest more than " + std::to_string(kMaxDepth) + " deep");
        return run_body(body, values, args, where + " > ", depth + 1);
      });
      try {
        ProvenanceScope scope(label);
        bool boundary = false;
        try {
          fn->second(ctx);
        } catch (const OnnxUnsupported& e) {
          if (!staged || !stageable(np, e.diag().message)) throw;
          boundary = true;
        }
        if (boundary) {
          if (specialize(np, k, ctx, values, where)) continue;
          if (!host_evaluable(np, values)) {
            stop_at(g, order, pos, values);
            return;
          }
          host_eval(np, k, values, where);
          continue;
        }
        if (staged) stage->lowered.push_back(k);
      } catch (const OnnxUnsupported& e) {
        throw OnnxUnsupported(located(e.diag().message));
      } catch (const UserError& e) {
        std::string msg = e.diag().message;
        if (msg.rfind(where, 0) != 0 && msg.rfind(prefix.empty() ? where : prefix, 0) != 0) msg = where + ": " + msg;
        throw UserError(located(msg));
      }
      for (int i = 0; i < np.output_size(); ++i) {
        if (np.output(i).empty()) continue;
        if (ctx.seq_out(static_cast<size_t>(i))) {
          seqs[np.output(i)] = *ctx.seq_out(static_cast<size_t>(i));
          continue;
        }
        if (ctx.none_out(static_cast<size_t>(i))) {
          nones.insert(np.output(i));
          continue;
        }
        if (!ctx.outputs()[i])
          throw OnnxUnsupported(located(where + ": output " + std::to_string(i) + " is not supported"));
        if (too_large(ctx.outputs()[i]->shape, opt.max_elements))
          throw UserError(located(where + ": output '" + np.output(i) + "' would have shape " +
                                  shape_to_string(ctx.outputs()[i]->shape) + ", more than the limit of " +
                                  std::to_string(opt.max_elements) + " elements"));
        values[np.output(i)] = ctx.outputs()[i];
      }
    }
  }

  // ---- staged segments (onnx_staged.h) ----
  // A node that could not be lowered for want of a run-time value, or a Loop / If the
  // importer cannot unroll or select at import time.
  static bool stageable(const onnx::NodeProto& np, const std::string& why) {
    if (why.find("dynamic shape input not supported") != std::string::npos) return true;
    return np.op_type() == "Loop" && why.find("(unrolled") != std::string::npos;
  }

  // The host value of `name`: known at run time or foldable at import time.
  std::optional<HostTensor> host_value(const std::string& name, const std::unordered_map<std::string, NodeRef>& values) {
    if (auto it = stage->host.find(name); it != stage->host.end()) return it->second;
    if (seqs.count(name) || nones.count(name)) return std::nullopt;
    auto v = values.find(name);
    if (v == values.end()) return std::nullopt;
    return folder.try_fold(v->second);
  }

  // A shape-deciding input known on the host (a Reshape's target, TopK's k, an Expand's
  // shape: small integer tensors) is bound as a constant and the node lowers into the
  // segment, which is then specialized on those values (they enter the program's key).
  // Not for the ops whose output size is data-dependent: those run on the host, so that
  // later segments depend on the size only.
  bool specialize(const onnx::NodeProto& np, int k, NodeCtx& failed, std::unordered_map<std::string, NodeRef>& values,
                  const std::string& where) {
    static const std::set<std::string> on_host = {"NonZero", "Compress", "Unique", "NonMaxSuppression", "Loop", "If", "Scan"};
    if (on_host.count(np.op_type())) return false;
    std::vector<NodeRef> ins;
    std::string spec;
    for (size_t i = 0; i < failed.num_inputs(); ++i) {
      if (failed.is_seq(i) || failed.is_none(i)) return false;
      NodeRef n = failed.has(i) ? failed.in(i).node() : nullptr;
      const std::string& name = np.input(static_cast<int>(i));
      if (n && stage->host.count(name)) {
        const HostTensor& h = stage->host.at(name);
        if ((is_int(h.dtype()) || h.dtype() == DType::Bool) && h.numel() <= 64) {
          n = prim::constant_tensor(h);
          spec += name + "=";
          for (int64_t e = 0; e < h.numel(); ++e) spec += std::to_string(h.get_i64(e)) + ",";
          spec += ";";
        }
      }
      ins.push_back(n);
    }
    if (spec.empty() || (stage->may_specialize && !stage->may_specialize(k, spec))) return false;
    NodeCtx ctx(np, opset, std::move(ins), folder, where);
    try {
      op_table().at(np.op_type())(ctx);
    } catch (const OnnxUnsupported& e) {
      if (e.diag().message.find("dynamic shape input not supported") != std::string::npos) return false;
      throw;
    }
    for (int i = 0; i < np.output_size(); ++i) {
      if (np.output(i).empty()) continue;
      if (!ctx.outputs()[i] || ctx.seq_out(static_cast<size_t>(i)) || ctx.none_out(static_cast<size_t>(i))) return false;
      if (too_large(ctx.outputs()[i]->shape, opt.max_elements))
        throw UserError(where + ": output '" + np.output(i) + "' would have shape " + shape_to_string(ctx.outputs()[i]->shape) +
                        ", more than the limit of " + std::to_string(opt.max_elements) + " elements");
    }
    for (int i = 0; i < np.output_size(); ++i)
      if (!np.output(i).empty()) values[np.output(i)] = ctx.outputs()[i];
    stage->spec += spec;
    stage->lowered.push_back(k);
    return true;
  }

  bool host_evaluable(const onnx::NodeProto& np, const std::unordered_map<std::string, NodeRef>& values) {
    for (const std::string& name : node_reads(np))
      if (!host_value(name, values)) return false;
    return true;
  }

  // Runs node np on the host over its inputs' values; its outputs become host values,
  // bound in this segment as inputs of their true shapes.
  void host_eval(const onnx::NodeProto& np, int k, std::unordered_map<std::string, NodeRef>& values,
                 const std::string& where) {
    std::vector<HostTensor> outs;
    if (np.op_type() == "Loop" || np.op_type() == "If") {
      HostValues reads;
      for (const std::string& name : node_reads(np)) reads[name] = *host_value(name, values);
      outs = stage->run_control(np, where, reads);
    } else {
      std::vector<NodeRef> ins;
      for (const auto& name : np.input())
        ins.push_back(name.empty() ? nullptr : prim::constant_tensor(*host_value(name, values)));
      NodeCtx ctx(np, opset, std::move(ins), folder, where);
      op_table().at(np.op_type())(ctx);
      for (int i = 0; i < np.output_size(); ++i) {
        if (np.output(i).empty()) {
          outs.emplace_back();
          continue;
        }
        if (ctx.seq_out(static_cast<size_t>(i)) || ctx.none_out(static_cast<size_t>(i)) || !ctx.outputs()[i])
          throw OnnxUnsupported(where + ": output " + std::to_string(i) + " is not a tensor (not supported in a staged run)");
        std::optional<HostTensor> v = folder.try_fold(ctx.outputs()[i]);
        if (!v) throw OnnxUnsupported(where + ": output " + std::to_string(i) + " could not be evaluated on the host");
        outs.push_back(*v);
      }
    }
    if (static_cast<int>(outs.size()) != np.output_size())
      throw UserError(where + ": produced " + std::to_string(outs.size()) + " outputs for " + std::to_string(np.output_size()));
    for (int i = 0; i < np.output_size(); ++i) {
      const std::string& name = np.output(i);
      if (name.empty()) continue;
      const HostTensor& t = outs[static_cast<size_t>(i)];
      if (t.numel() > opt.max_elements)
        throw UserError(where + ": output '" + name + "' has shape " + t.shape_string() + ", more than the limit of " +
                        std::to_string(opt.max_elements) + " elements");
      stage->host[name] = t;
      values[name] = prim::input(name, t.dtype(), shape_from(t.shape()));
    }
    stage->lowered.push_back(k);
    ++stage->host_evals;
  }

  // Ends the segment before order[pos]: its outputs are the values computed in it that the
  // nodes from pos on (or the graph's outputs) read.
  void stop_at(const onnx::GraphProto& g, const std::vector<int>& order, size_t pos,
               const std::unordered_map<std::string, NodeRef>& values) {
    std::set<std::string> read;
    for (size_t p = pos; p < order.size(); ++p)
      if (!stage->done.count(order[p]))
        for (const std::string& name : node_reads(g.node(order[p]))) read.insert(name);
    for (const auto& vi : g.output()) read.insert(vi.name());
    stage->barrier = order[pos];
    stage->live.clear();
    for (const std::string& name : read) {
      if (stage->host.count(name)) continue;
      if (seqs.count(name) || nones.count(name))
        throw OnnxUnsupported(stage->prefix + "the sequence or optional '" + name +
                              "' crosses a run-time segment boundary (not supported)");
      auto v = values.find(name);
      if (v == values.end()) continue;  // not yet computed
      if (auto c = folder.try_fold(v->second)) stage->consts[name] = *c;
      else stage->live.push_back(name);
    }
  }

  // One instance of a body: its inputs bound to args, the enclosing scope visible.
  // Sequence and None arguments bind in seqs / nones (names are unique across scopes).
  std::vector<BodyValue> run_body(const onnx::GraphProto& body, const std::unordered_map<std::string, NodeRef>& outer,
                                  const std::vector<BodyValue>& args, const std::string& prefix, int depth) {
    if (body.input_size() != static_cast<int>(args.size()))
      throw UserError(prefix + "the body takes " + std::to_string(body.input_size()) + " inputs, given " +
                      std::to_string(args.size()));
    std::unordered_map<std::string, NodeRef> values = outer;
    for (int i = 0; i < body.input_size(); ++i) {
      const std::string& name = body.input(i).name();
      const BodyValue& a = args[static_cast<size_t>(i)];
      values.erase(name);
      seqs.erase(name);
      nones.erase(name);
      if (a.kind == BodyValue::Kind::Tensor) {
        values[name] = a.tensor->node();
      } else if (a.kind == BodyValue::Kind::Sequence) {
        std::vector<NodeRef> ns;
        for (const Tensor& t : a.seq) ns.push_back(t.node());
        seqs[name] = std::move(ns);
      } else {
        nones.insert(name);
      }
    }
    for (const auto& t : body.initializer())
      values[t.name()] = prim::constant_tensor(
          tensor_from_proto(t, opt.max_elements, prefix + "initializer '" + t.name() + "'"));
    // values produced by an earlier instance of this body must not satisfy this one's nodes
    for (const auto& n : body.node())
      for (const auto& o : n.output()) {
        seqs.erase(o);
        nones.erase(o);
      }
    lower_nodes(body, values, prefix, depth);
    std::vector<BodyValue> r;
    for (const auto& vi : body.output()) {
      auto it = values.find(vi.name());
      if (auto sq = seqs.find(vi.name()); sq != seqs.end()) {
        std::vector<Tensor> ts;
        for (NodeRef n : sq->second) ts.emplace_back(n);
        r.push_back(BodyValue::of_seq(std::move(ts)));
        continue;
      }
      if (nones.count(vi.name())) {
        r.push_back(BodyValue::none());
        continue;
      }
      if (it == values.end()) throw UserError(prefix + "body output '" + vi.name() + "' is never produced");
      r.push_back(BodyValue::of(Tensor(it->second)));
    }
    return r;
  }
};

}  // namespace

std::set<std::string> free_names(const onnx::GraphProto& g) {
  std::set<std::string> defined, used;
  for (const auto& vi : g.input()) defined.insert(vi.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) defined.insert(o);
    for (const std::string& r : node_reads(n)) used.insert(r);
  }
  std::set<std::string> r;
  for (const auto& u : used)
    if (!defined.count(u)) r.insert(u);
  return r;
}

std::set<std::string> node_reads(const onnx::NodeProto& np) {
  std::set<std::string> r;
  for (const auto& in : np.input())
    if (!in.empty()) r.insert(in);
  for (const auto& a : np.attribute()) {
    if (a.has_g())
      for (const auto& f : free_names(a.g())) r.insert(f);
    for (const auto& sub : a.graphs())
      for (const auto& f : free_names(sub)) r.insert(f);
  }
  return r;
}

Segment lower_segment(const onnx::GraphProto& g, int opset, const OnnxOptions& opt, const std::string& file, StageCtx& st) {
  std::unordered_map<std::string, NodeRef> values;
  for (const auto& [name, t] : st.consts) values[name] = prim::constant_tensor(t);
  for (const auto& [name, t] : st.host) values[name] = prim::input(name, t.dtype(), shape_from(t.shape()));
  Lowerer low{opset, opt, file, Folder(opt.max_elements), 0};
  low.stage = &st;
  low.lower_nodes(g, values, st.prefix, 0);
  Segment seg;
  seg.lowered = st.lowered;
  seg.barrier = st.barrier;
  seg.spec = st.spec;
  std::vector<std::pair<std::string, NodeRef>> outs;
  if (st.barrier >= 0) {
    for (const std::string& name : st.live) outs.emplace_back(name, values.at(name));
  } else {
    for (const auto& vi : g.output()) {
      if (st.host.count(vi.name())) continue;  // known on the host already
      if (low.seqs.count(vi.name()) || low.nones.count(vi.name()))
        throw OnnxUnsupported(st.prefix + "graph output '" + vi.name() + "' is a sequence or optional (not supported in a staged run)");
      auto it = values.find(vi.name());
      if (it == values.end()) throw UserError(st.prefix + "graph output '" + vi.name() + "' is never produced");
      outs.emplace_back(vi.name(), it->second);
    }
  }
  if (!outs.empty()) seg.graph = Graph::from_outputs(outs);
  return seg;
}

namespace {

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
