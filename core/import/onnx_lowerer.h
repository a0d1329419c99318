// onnx_lowerer.h — internal to core/import: the node loop that lowers an ONNX graph (the
// model's, a control-flow body's, or one segment of a staged run) into Lathe nodes. The
// loop and control-flow bodies are here; the staged-segment methods are in
// onnx_stage_lower.cpp, the model-level import in onnx_model.cpp.
#pragma once
#include <onnx/onnx_pb.h>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/import/onnx_lower.h"
#include "core/import/onnx_stage.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {

// Whether the constant part of a shape already exceeds the element cap (overflow-safe).
bool too_large(const Shape& s, int64_t cap);
// Node indices in an order where every input is defined before use (Kahn's algorithm,
// preferring the file's order). Undefined inputs and cycles are user errors.
std::vector<int> schedule_nodes(const onnx::GraphProto& g, const std::set<std::string>& defined, const std::string& file);

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

  // ---- staged segments (onnx_staged.h); onnx_stage_lower.cpp ----
  static bool stageable(const onnx::NodeProto& np, const std::string& why);
  std::optional<HostTensor> host_value(const std::string& name, const std::unordered_map<std::string, NodeRef>& values);
  bool specialize(const onnx::NodeProto& np, int k, NodeCtx& failed, std::unordered_map<std::string, NodeRef>& values,
                  const std::string& where);
  bool host_evaluable(const onnx::NodeProto& np, const std::unordered_map<std::string, NodeRef>& values);
  void host_eval(const onnx::NodeProto& np, int k, std::unordered_map<std::string, NodeRef>& values, const std::string& where);
  void stop_at(const onnx::GraphProto& g, const std::vector<int>& order, size_t pos,
               const std::unordered_map<std::string, NodeRef>& values);

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

}  // namespace lathe::onnx_import
