// dot.h — drawing a graph: grouping nodes into boxes per level, and Graphviz DOT text.
//
// Three levels (DESIGN.md, "GraphView"):
//   primitive  every node is a box: op, dtype, shape; coloured by op category.
//   tensor     consecutive nodes (in Graph::toposort() order) with the same non-empty
//              provenance path collapse into one box named after the composite ("softmax");
//              boxes nest in clusters for the enclosing path ("block0" > "attention").
//   kernel     nodes grouped by a caller-supplied node -> group function (the scheduler's
//              kernels); nodes outside every group stay single boxes.
// The grouping is data (group_graph) so the GUI can lay out and draw the same boxes; the
// DOT text is only one renderer of it. Core emits text only: rendering to SVG/PNG with
// libgvc lives in app/graphviz_render.h.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ir/graph.h"

namespace lathe {

enum class DotLevel { Primitive, Tensor, Kernel };
std::optional<DotLevel> dot_level_from_name(std::string_view name);  // "primitive", "tensor", "kernel"
std::string_view dot_level_name(DotLevel level);

struct DotOptions {
  DotLevel level = DotLevel::Tensor;
  // Kernel level: the group index of a node, or -1 for "not in any group"; names by index
  // (a missing name becomes "kernel N"). Without group_of the kernel level cannot be drawn.
  std::function<int(NodeRef)> group_of;
  std::vector<std::string> group_names;
  bool edge_labels = true;   // label edges between boxes with the tensor's dtype[shape]
  std::string title;         // drawn at the top when not empty
};

// One box of the drawing.
struct NodeGroup {
  std::string name;            // label: composite or kernel name, or the op of a lone node
  std::string path;            // full provenance path of a composite box ("" otherwise)
  std::vector<NodeRef> nodes;  // its nodes, in topological order
  bool collapsed = false;      // stands for a composite or kernel (not one primitive node)
};

// One edge between boxes: the tensor `value` (a node of `from`) is read by box `to`.
struct GroupEdge {
  int from, to;
  NodeRef value;
};

struct GroupedGraph {
  std::vector<NodeGroup> groups;             // in topological order of first nodes
  std::unordered_map<NodeRef, int> group_of; // node -> index into groups
  std::vector<GroupEdge> edges;              // deduplicated (from, to, value)
  std::vector<std::pair<std::string, int>> outputs;  // graph output name -> group
  std::vector<NodeRef> order;                // Graph::toposort(): %N numbering as print_graph
};

// Groups g's nodes for opt.level. Throws UserError for the kernel level without group_of.
GroupedGraph group_graph(const Graph& g, const DotOptions& opt);

// "Reduce add [1]", "Const 1.5", "Input x", "View": the op with its key attributes.
std::string node_summary(NodeRef n);
// A stable fill colour (#rrggbb) per op category; composite boxes use kCompositeColor.
std::string_view op_color(Op op);
// s as a DOT string literal: quotes and backslashes escaped, newlines as \n, other control
// characters dropped.
std::string dot_quote(std::string_view s);
inline constexpr std::string_view kCompositeColor = "#f3f3f3";

std::string graph_to_dot(const Graph& g, const DotOptions& opt = {});

}  // namespace lathe
