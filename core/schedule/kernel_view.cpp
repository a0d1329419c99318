// kernel_view.cpp — kernel_level() and its DOT text (see kernel_view.h).
#include "core/schedule/kernel_view.h"

#include <sstream>

#include "core/ir/dot.h"

namespace lathe {

KernelLevel kernel_level(const KernelGraph& kg) {
  KernelLevel kl;
  const int nb = static_cast<int>(kg.buffers.size());
  auto valid = [nb](int b) { return b >= 0 && b < nb; };
  // which kernel writes each buffer
  std::vector<int> writer(nb, -1);
  for (size_t k = 0; k < kg.kernels.size(); ++k)
    if (valid(kg.kernels[k].output)) writer[kg.kernels[k].output] = static_cast<int>(k);

  // a box per source buffer (input, constant) that some kernel reads
  kl.buffer_box.assign(nb, -1);
  for (const Kernel& k : kg.kernels)
    for (int b : k.inputs) {
      if (!valid(b) || writer[b] >= 0 || kl.buffer_box[b] >= 0) continue;
      const BufferDesc& buf = kg.buffers[b];
      KernelBox box;
      box.buffer = b;
      box.title = (buf.kind == BufferKind::Constant ? "const " : "input ") + buf.name;
      box.detail = std::string(dtype_name(buf.dtype)) + shape_to_string(buf.shape);
      if (buf.node) box.members = {buf.node}, box.rep = buf.node;
      kl.buffer_box[b] = static_cast<int>(kl.boxes.size());
      kl.boxes.push_back(std::move(box));
    }

  // a box per kernel
  std::vector<std::string> out_names(nb);
  for (auto& [name, b] : kg.outputs)
    if (valid(b)) out_names[b] += (out_names[b].empty() ? "" : ", ") + name;
  kl.kernel_box.assign(kg.kernels.size(), -1);
  for (size_t k = 0; k < kg.kernels.size(); ++k) {
    const Kernel& kn = kg.kernels[k];
    KernelBox box;
    box.kernel = static_cast<int>(k);
    box.buffer = kn.output;
    box.title = kn.name;
    box.detail = kn.kind + " · " + std::to_string(kn.nodes.size()) + (kn.nodes.size() == 1 ? " node" : " nodes");
    if (kn.root) box.op = node_summary(kn.root);
    if (valid(kn.output)) box.outputs = out_names[kn.output];
    box.members = kn.nodes;
    box.rep = kn.root ? kn.root : (kn.nodes.empty() ? nullptr : kn.nodes.back());
    kl.kernel_box[k] = static_cast<int>(kl.boxes.size());
    kl.boxes.push_back(std::move(box));
  }

  // an edge per buffer a kernel reads (Kernel::inputs is sorted and unique)
  for (size_t k = 0; k < kg.kernels.size(); ++k)
    for (int b : kg.kernels[k].inputs) {
      if (!valid(b)) continue;
      int from = writer[b] >= 0 ? kl.kernel_box[writer[b]] : kl.buffer_box[b];
      if (from >= 0 && from != kl.kernel_box[k]) kl.edges.push_back({from, kl.kernel_box[k], b});
    }
  return kl;
}


std::string kernel_level_to_dot(const KernelGraph& kg, const std::string& title) {
  KernelLevel kl = kernel_level(kg);
  auto id = [&](int box) {
    const KernelBox& b = kl.boxes[box];
    return b.kernel >= 0 ? "k" + std::to_string(b.kernel) : "b" + std::to_string(b.buffer);
  };
  std::ostringstream os;
  os << "digraph lathe {\n"
     << "  rankdir=TB; newrank=true;\n"
     << "  graph [fontname=\"Helvetica\", fontsize=11";
  if (!title.empty()) os << ", label=" << dot_quote(title) << ", labelloc=t";
  os << "];\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";
  for (size_t i = 0; i < kl.boxes.size(); ++i) {
    const KernelBox& b = kl.boxes[i];
    std::string label = b.title + "\n" + b.detail;
    if (!b.op.empty()) label += "\n" + b.op;
    if (!b.outputs.empty()) label += "\n→ " + b.outputs;
    os << "  " << id(static_cast<int>(i)) << " [label=" << dot_quote(label);
    if (b.kernel >= 0) os << ", fillcolor=\"" << kCompositeColor << "\", peripheries=2";
    else os << ", fillcolor=\"" << (b.rep ? op_color(b.rep->op) : std::string_view("#ffffff")) << "\", shape=invhouse";
    os << "];\n";
  }
  for (const KernelEdge& e : kl.edges) {
    const BufferDesc& buf = kg.buffers[e.buffer];
    os << "  " << id(e.from) << " -> " << id(e.to) << " [label="
       << dot_quote(std::string(dtype_name(buf.dtype)) + shape_to_string(buf.shape)) << "];\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace lathe
