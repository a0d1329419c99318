// display_kernels.cpp — the kernel level of the graph view: the compiled program's
// KernelGraph (core/schedule/kernel_graph.h) as boxes. One box per fused kernel (name,
// kind and node count, the buffer it writes, its time after a profile) and one per input
// or constant buffer a kernel reads; an edge per buffer read. Every primitive node a
// kernel computes maps to that kernel's box (box_of), so a node selected at the primitive
// level shows its kernel here, and the other way round.
#include <algorithm>
#include <cstdio>

#include "core/ir/dot.h"
#include "views/display_graph.h"
#include "views/theme.h"

namespace lathe::views {

namespace {

std::string ms_text(double ms) {
  char buf[48];
  if (ms >= 1) std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  else std::snprintf(buf, sizeof buf, "%.1f µs", ms * 1000);
  return buf;
}

}  // namespace

void build_kernel_display(const AppState& s, const LabelMetrics& m, DisplayGraph& dg) {
  if (!s.compiled) {
    dg.empty_reason = "not compiled yet: press Compile (Kernels panel) or type :compile in the console";
    return;
  }
  const Program& p = s.compiled->program();
  const KernelGraph& kg = p.kg;
  if (kg.kernels.empty()) {
    dg.empty_reason = "the " + s.compiled->backend + " backend runs the graph as a whole: there are no kernels";
    return;
  }
  // Which kernel writes each buffer.
  std::vector<int> writer(kg.buffers.size(), -1);
  for (size_t k = 0; k < kg.kernels.size(); ++k)
    if (kg.kernels[k].output >= 0 && kg.kernels[k].output < static_cast<int>(writer.size()))
      writer[kg.kernels[k].output] = static_cast<int>(k);

  // Source buffers (inputs, constants) that some kernel reads get a small box each.
  std::vector<int> buffer_box(kg.buffers.size(), -1);
  for (const Kernel& k : kg.kernels)
    for (int b : k.inputs) {
      if (b < 0 || b >= static_cast<int>(kg.buffers.size()) || writer[b] >= 0 || buffer_box[b] >= 0) continue;
      const BufferDesc& buf = kg.buffers[b];
      DisplayNode box;
      box.lines = {(buf.kind == BufferKind::Constant ? "const " : "input ") + buf.name,
                   std::string(dtype_name(buf.dtype)) + " " + shape_to_string(buf.shape)};
      box.category = static_cast<int>(OpCategory::Source);
      box.fill = category_color(OpCategory::Source);
      if (buf.node) box.members = {buf.node->id}, box.rep = buf.node->id;
      buffer_box[b] = static_cast<int>(dg.nodes.size());
      dg.nodes.push_back(std::move(box));
    }

  // One box per kernel.
  std::vector<std::string> out_names(kg.buffers.size());
  for (auto& [name, b] : kg.outputs)
    if (b >= 0 && b < static_cast<int>(out_names.size())) out_names[b] += (out_names[b].empty() ? "" : ", ") + name;
  dg.kernel_box.assign(kg.kernels.size(), -1);
  for (size_t k = 0; k < kg.kernels.size(); ++k) {
    const Kernel& kn = kg.kernels[k];
    DisplayNode box;
    box.kernel = static_cast<int>(k);
    box.category = -2;
    box.fill = kernel_fill(static_cast<int>(k));
    std::string kind = kn.kind + " · " + std::to_string(kn.nodes.size()) + (kn.nodes.size() == 1 ? " node" : " nodes");
    box.lines = {kn.name, kind};
    if (kn.root) box.lines.push_back(node_type(kn.root));
    double ms = s.compiled->kernel_ms(static_cast<int>(k));
    if (ms >= 0) box.lines.push_back(ms_text(ms));
    if (kn.output >= 0 && kn.output < static_cast<int>(out_names.size()) && !out_names[kn.output].empty()) {
      box.is_output = true;
      box.lines.push_back("→ " + out_names[kn.output]);
    }
    for (NodeRef n : kn.nodes) box.members.push_back(n->id);
    box.rep = kn.root ? kn.root->id : (kn.nodes.empty() ? 0 : kn.nodes.back()->id);
    dg.kernel_box[k] = static_cast<int>(dg.nodes.size());
    dg.nodes.push_back(std::move(box));
  }

  // Edges: each buffer a kernel reads, from its writer (or its source box).
  for (size_t k = 0; k < kg.kernels.size(); ++k)
    for (int b : kg.kernels[k].inputs) {
      if (b < 0 || b >= static_cast<int>(kg.buffers.size())) continue;
      int from = writer[b] >= 0 ? dg.kernel_box[writer[b]] : buffer_box[b];
      if (from >= 0 && from != dg.kernel_box[k]) dg.edges.push_back({from, dg.kernel_box[k]});
    }

  // Node -> box: a kernel's nodes map to the first kernel computing them; buffers' nodes
  // to their box.
  for (size_t b = 0; b < kg.buffers.size(); ++b)
    if (buffer_box[b] >= 0 && kg.buffers[b].node) dg.box_of[kg.buffers[b].node->id] = buffer_box[b];
  for (size_t k = kg.kernels.size(); k-- > 0;)
    for (NodeRef n : kg.kernels[k].nodes) dg.box_of[n->id] = dg.kernel_box[k];

  // Scopes: a kernel sits in the scope of the node it computes (its root); kernels of a
  // collapsed scope fold into one box, expanded scopes are frames. Weights read by one
  // box are its attributes.
  std::vector<std::string> scope(dg.nodes.size());
  for (size_t k = 0; k < kg.kernels.size(); ++k) {
    const Kernel& kn = kg.kernels[k];
    NodeRef r = kn.root ? kn.root : (kn.nodes.empty() ? nullptr : kn.nodes.back());
    // A kernel that reads only weights and constants (a causal mask, a transposed weight)
    // computes a constant: it belongs to no scope and folds into its readers.
    bool constant = true;
    for (int b : kn.inputs)
      if (b < 0 || b >= static_cast<int>(kg.buffers.size()) || writer[b] >= 0 || !is_weight(kg.buffers[b].node))
        constant = false;
    if (r && !constant) scope[dg.kernel_box[k]] = r->prov.path;
  }
  group_kernels_by_scope(s, dg, scope);
  if (!s.show_weights) fold_sources(dg);
  assign_frames(dg, m);
  for (auto& b : dg.nodes) size_box(b, m);
}

}  // namespace lathe::views
