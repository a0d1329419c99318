// display_kernels.cpp — the kernel level of the graph view: the compiled program's
// KernelGraph as boxes: core's kernel_level() (core/schedule/kernel_view.h, shared with
// `lathe dot --level kernel` and the REPL's :dot): one box per fused kernel (name, kind
// and node count, root op, the outputs it writes; here also its time after a profile) and
// one per input or constant buffer a kernel reads; an edge per buffer read. Every primitive node a
// kernel computes maps to that kernel's box (box_of), so a node selected at the primitive
// level shows its kernel here, and the other way round.
#include <algorithm>
#include <cstdio>

#include "core/ir/dot.h"
#include "core/schedule/kernel_view.h"
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
  // The boxes and edges are core's kernel_level(), the same `lathe dot --level kernel`
  // and the REPL's :dot draw; the app adds colours, times and selection.
  KernelLevel kl = kernel_level(kg);
  dg.kernel_box.assign(kg.kernels.size(), -1);
  for (const KernelBox& kb : kl.boxes) {
    DisplayNode box;
    box.lines = {kb.title, kb.detail};
    if (kb.kernel < 0) {
      box.category = static_cast<int>(OpCategory::Source);
      box.fill = category_color(OpCategory::Source);
    } else {
      box.kernel = kb.kernel;
      box.category = -2;
      box.fill = kernel_fill(kb.kernel);
      if (!kb.op.empty()) box.lines.push_back(kb.op);
      double ms = s.compiled->kernel_ms(kb.kernel);
      if (ms >= 0) box.lines.push_back(ms_text(ms));
      if (!kb.outputs.empty()) {
        box.is_output = true;
        box.lines.push_back("→ " + kb.outputs);
      }
      dg.kernel_box[kb.kernel] = static_cast<int>(dg.nodes.size());
    }
    for (NodeRef n : kb.members) box.members.push_back(n->id);
    box.rep = kb.rep ? kb.rep->id : 0;
    dg.nodes.push_back(std::move(box));
  }
  for (const KernelEdge& e : kl.edges) dg.edges.push_back({e.from, e.to});

  // Node -> box: a kernel's nodes map to the first kernel computing them; buffers' nodes
  // to their box.
  for (size_t b = 0; b < kg.buffers.size(); ++b)
    if (kl.buffer_box[b] >= 0 && kg.buffers[b].node) dg.box_of[kg.buffers[b].node->id] = kl.buffer_box[b];
  for (size_t k = kg.kernels.size(); k-- > 0;)
    for (NodeRef n : kg.kernels[k].nodes) dg.box_of[n->id] = dg.kernel_box[k];

  // Scopes: a kernel sits in the scope of the node it computes (its root); kernels of a
  // collapsed scope fold into one box, expanded scopes are frames. Weights read by one
  // box are its attributes.
  std::vector<std::string> scope(dg.nodes.size());
  std::vector<int> writer(kg.buffers.size(), -1);   // the kernel that writes each buffer
  for (size_t k = 0; k < kg.kernels.size(); ++k)
    if (kg.kernels[k].output >= 0 && kg.kernels[k].output < static_cast<int>(writer.size()))
      writer[kg.kernels[k].output] = static_cast<int>(k);
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
