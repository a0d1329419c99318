// kernel_view.h — the kernel level of a drawing: a KernelGraph as boxes and edges. The one
// code path for `lathe dot --level kernel`, the REPL's `:dot FILE kernel` and the app's
// kernel level (views/display_kernels.cpp), so they draw the same picture.
//
// One box per fused kernel (name, "kind · N nodes" with the node count `lathe kernels`
// lists, the root op, the graph outputs it writes) and one per input or constant buffer
// some kernel reads. One edge per buffer a kernel reads, from the kernel that writes it or
// from its source box: the data that really flows between kernels (an inlined constant or
// a recomputed node is not a flow).
#pragma once
#include <string>
#include <vector>

#include "core/schedule/kernel_graph.h"

namespace lathe {

struct KernelBox {
  int kernel = -1;              // kernel index; -1 for a source buffer's box
  int buffer = -1;              // a source box's buffer; a kernel box's output buffer
  std::string title;            // "k0_relu"; "input x" / "const w"
  std::string detail;           // "matmul · 9 nodes"; "f32[32, 784]"
  std::string op;               // a kernel's root: "Max", "Reduce add [1]" ("" for sources)
  std::string outputs;          // graph outputs the kernel writes, "probs" ("" for none)
  std::vector<NodeRef> members;  // the kernel's primitive nodes; a source box: its node
  NodeRef rep = nullptr;        // the node that stands for the box (root / the buffer's node)
};

struct KernelEdge {
  int from = -1, to = -1;  // box indices
  int buffer = -1;         // the buffer read
};

struct KernelLevel {
  std::vector<KernelBox> boxes;   // source boxes first (in buffer order), then kernels in order
  std::vector<KernelEdge> edges;  // per kernel, per buffer it reads (kernels in order)
  std::vector<int> kernel_box;    // kernel index -> box
  std::vector<int> buffer_box;    // buffer -> its source box, or -1
};

KernelLevel kernel_level(const KernelGraph& kg);

// Graphviz DOT text of kernel_level(kg): kernel boxes k<i>, source boxes b<buffer>, each
// edge labelled with the buffer's dtype and shape.
std::string kernel_level_to_dot(const KernelGraph& kg, const std::string& title = "");

}  // namespace lathe
