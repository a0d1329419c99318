// onnx_stage_lower.cpp — the importer's side of a staged run (onnx_staged.h): one
// segment's import, with boundary nodes specialized on host values, evaluated on the host,
// or ending the segment; and the names a graph or node reads.
#include "core/import/onnx_lowerer.h"
#include "core/import/onnx_staged.h"

namespace lathe {

bool onnx_needs_staged(const std::string& message) {
  return message.find("dynamic shape input not supported") != std::string::npos ||
         message.find(kTooLongToUnroll) != std::string::npos;
}

}  // namespace lathe

namespace lathe::onnx_import {

// A node that could not be lowered for want of a run-time value, or a Loop / Scan / If the
// importer cannot unroll or select at import time.
bool Lowerer::stageable(const onnx::NodeProto& np, const std::string& why) {
  if (why.find("dynamic shape input not supported") != std::string::npos) return true;
  return (np.op_type() == "Loop" || np.op_type() == "Scan") && why.find(kTooLongToUnroll) != std::string::npos;
}



// The host value of `name`: known at run time or foldable at import time.
std::optional<HostTensor> Lowerer::host_value(const std::string& name, const std::unordered_map<std::string, NodeRef>& values) {
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
bool Lowerer::specialize(const onnx::NodeProto& np, int k, NodeCtx& failed, std::unordered_map<std::string, NodeRef>& values,
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

bool Lowerer::host_evaluable(const onnx::NodeProto& np, const std::unordered_map<std::string, NodeRef>& values) {
  for (const std::string& name : node_reads(np))
    if (!host_value(name, values)) return false;
  return true;
}

// Runs node np on the host over its inputs' values; its outputs become host values,
// bound in this segment as inputs of their true shapes.
void Lowerer::host_eval(const onnx::NodeProto& np, int k, std::unordered_map<std::string, NodeRef>& values,
               const std::string& where) {
  std::vector<HostTensor> outs;
  if (np.op_type() == "Loop" || np.op_type() == "If" || np.op_type() == "Scan") {
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
void Lowerer::stop_at(const onnx::GraphProto& g, const std::vector<int>& order, size_t pos,
             const std::unordered_map<std::string, NodeRef>& values) {
  // The boundary node waits for values this segment computes; anything else it reads must
  // be known already, or waiting makes no progress.
  const onnx::NodeProto& np = g.node(order[pos]);
  const std::string where = stage->prefix + "node '" + (np.name().empty() ? "#" + std::to_string(order[pos]) : np.name()) +
                            "' (" + np.op_type() + ")";
  for (const std::string& name : node_reads(np)) {
    if (host_value(name, values)) continue;
    if (seqs.count(name) || nones.count(name))
      throw OnnxUnsupported(where + ": reads the sequence or optional '" + name + "' at a run-time boundary (not supported)");
    if (!values.count(name))
      throw UserError(where + ": reads '" + name + "', which no earlier node, input or initializer defines");
  }
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

}  // namespace lathe::onnx_import
