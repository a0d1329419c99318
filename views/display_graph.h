// display_graph.h — what the graph view draws, before layout: boxes with label lines and a
// colour, edges between boxes, and frames for expanded scopes. It is built from the
// AppState's graph at one level.
//
//   tensor level     every node whose scope path (Provenance.path) has a collapsed prefix
//                    is folded into one box per scope call (connected nodes sharing the
//                    shortest collapsed prefix); expanded scopes are frames around their
//                    contents (display_scope.cpp). Graph inputs built at the top stay
//                    boxes; weights and constants are attributes of their readers
//                    (fold_sources) unless AppState::show_weights.
//   primitive level  one box per node (in scope frames when the graph is large)
//   kernel level     one box per fused kernel of the compiled program (display_kernels.cpp),
//                    grouped by the scope of its root node the same way, plus one per
//                    input buffer; edges are the buffers kernels read. Empty, with a
//                    reason, until the graph is compiled.
//
// The builder measures label text through a callback so that it has no ImGui dependency
// beyond the colours, and the layout (graph_layout.h) gets box sizes in layout units.
#pragma once
#include <cstdint>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/dot.h"
#include "views/app_state.h"

namespace lathe::views {

// Sets of box indices joined by find/join with path halving (grouping boxes by scope).
struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

struct DisplayNode {
  std::vector<std::string> lines;  // lines[0] is the title (op or composite name)
  uint32_t fill = 0;               // ImU32 box colour
  int category = -1;               // OpCategory, or -1 for a composite group
  std::string group;               // composite path when this box is a collapsed group
  std::vector<uint32_t> members;   // ids of the primitive nodes this box stands for
  uint32_t rep = 0;                // the node whose dtype/shape the box shows
  bool is_output = false;
  int kernel = -1;                 // kernel level: the kernel index (-1 for a buffer box)
  float w = 0, h = 0;              // size in layout units (1 unit = 1 px at zoom 1)
  int folded = 0;                  // source boxes folded into this one (fold_sources)
  std::string scope;               // the expanded scope it sits in ("" = top)
  int frame = -1;                  // that scope's DisplayGraph::frames index; -1 = top
};

// An expanded scope drawn as a frame around its contents (its boxes and inner frames).
// Each frame is laid out on its own (layout_layered.cpp: nested_layout).
struct DisplayFrame {
  std::string path;                // "h.3/attn", "/h.3/attn" (ONNX node names)
  std::string title;               // "▼ attn"
  int parent = -1;                 // enclosing frame, -1 = top
  float title_w = 0;               // title width in layout units
};

struct DisplayEdge {
  int from = 0, to = 0;            // box indices; from produces a value `to` reads
};

struct DisplayGraph {
  std::vector<DisplayNode> nodes;
  std::vector<DisplayEdge> edges;
  std::unordered_map<uint32_t, int> box_of;   // primitive node id -> box index
  std::vector<int> kernel_box;                // kernel level: kernel index -> box index
  uint64_t key = 0;                           // identifies (graph version, level, expanded)
  std::string empty_reason;                   // why there are no boxes (kernel level, …)
  size_t folded = 0;                          // source boxes fold_sources folded away
  std::vector<DisplayFrame> frames;           // expanded scopes, parents before children
};

struct LabelMetrics {
  std::function<float(const std::string&)> text_width;   // in layout units
  float line_height = 16.0f;
  float pad_x = 10.0f, pad_y = 6.0f;
};

// The cache key for the display graph of `s` at its current level and expansion.
uint64_t display_key(const AppState& s);
DisplayGraph build_display_graph(const AppState& s, const LabelMetrics& m);
// The kernel level's boxes (called by build_display_graph; `dg.key` is already set).
void build_kernel_display(const AppState& s, const LabelMetrics& m, DisplayGraph& dg);
// Weights (is_weight), constant buffers and constant-only kernels are folded into every
// box that reads them ("+ w3, b3" on its label; display_fold.cpp).
void fold_sources(DisplayGraph& dg);
// Scopes: a node's scope path ("h.3/attn/softmax") names the groups it sits in. The
// display name of a path component: ONNX paths' "/h.3/attn/MatMul:MatMul" -> "MatMul".
std::string scope_title(const std::string& path);
// The parent scope of a path ("" at the top): "h.3/attn" -> "h.3", "/h.3" -> "".
std::string parent_scope(const std::string& path);
// The shortest prefix of `path` not in `expanded` ("" when every prefix is expanded).
std::string collapsed_prefix(const std::string& path, const std::set<std::string>& expanded);
// Puts every box in the frame of its `scope` (creating frames for the scopes and their
// parents), dropping frames that would hold a single item.
void assign_frames(DisplayGraph& dg, const LabelMetrics& m);
// Kernel level: kernels whose scope has a collapsed prefix fold into one box per scope
// call (display_kernels.cpp); `scope_of` is each box's full scope.
void group_kernels_by_scope(const AppState& s, DisplayGraph& dg, const std::vector<std::string>& scope_of);
// Whether a box may fold into its reader as an attribute: a Const, or an Input built
// inside a scope (a weight), or a View / Copy / Cast chain of one; never a graph input
// built at the top, nor an integer one (ids). weight_root is that Const or Input.
NodeRef weight_root(NodeRef n);
bool is_weight(NodeRef n);
// Sizes a box to its label lines.
void size_box(DisplayNode& b, const LabelMetrics& m);

// The second label line of a node: "f32 [32, 784]". (The first is core/ir/dot.h's
// node_summary: "Reduce add [1]", "Const 0.5", "Input x".)
std::string node_type(NodeRef n);

}  // namespace lathe::views
