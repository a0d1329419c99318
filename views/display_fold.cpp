// display_fold.cpp — folding source boxes into their reader for very large tensor-level
// graphs (display_graph.h: fold_sources).
//
// A collapsed transformer or MLP still has two or three Input boxes (weights, biases) per
// layer box, each with one edge to the layer that reads it. Above kFoldSourcesBoxes boxes
// every Input or Const box with no inputs, one reader box and no output name is folded
// into that reader: its node joins the reader's members (so selecting or searching for it
// lands on the reader) and the reader gets a label line "+ w3, b3". That divides the box
// count by about three for such graphs, and dot's time by more.
#include <algorithm>

#include "views/display_graph.h"

namespace lathe::views {
namespace {

bool is_source_box(const DisplayNode& b) {
  if (!b.group.empty() || b.is_output || b.members.size() != 1 || b.kernel >= 0) return false;
  return is_weight(node_by_id(b.rep));
}

std::string source_name(NodeRef n) {
  if (n->op == Op::Input) return n->attrs.name;
  return node_summary(n);   // "Const 0.5"
}

}  // namespace

void fold_sources(DisplayGraph& dg) {
  const size_t n = dg.nodes.size();
  std::vector<int> in_degree(n, 0), out_degree(n, 0), reader(n, -1);
  for (auto& e : dg.edges) ++in_degree[e.to], ++out_degree[e.from], reader[e.from] = e.to;
  std::vector<int> into(n, -1);   // the box a folded box goes into
  for (size_t i = 0; i < n; ++i)
    if (in_degree[i] == 0 && out_degree[i] == 1 && is_source_box(dg.nodes[i])) into[i] = reader[i];
  if (std::count_if(into.begin(), into.end(), [](int t) { return t >= 0; }) == 0) return;

  // New indices: kept boxes in their old order.
  std::vector<int> index(n, -1);
  std::vector<DisplayNode> kept;
  kept.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (into[i] < 0) index[i] = static_cast<int>(kept.size()), kept.push_back(std::move(dg.nodes[i]));
  std::vector<std::vector<std::string>> names(kept.size());
  for (size_t i = 0; i < n; ++i) {
    if (into[i] < 0) continue;
    DisplayNode& r = kept[index[into[i]]];
    uint32_t id = dg.nodes[i].rep;
    r.members.push_back(id);
    ++r.folded;
    names[index[into[i]]].push_back(source_name(node_by_id(id)));
    index[i] = index[into[i]];
  }
  for (size_t k = 0; k < kept.size(); ++k) {
    if (names[k].empty()) continue;
    std::string line = "+ ";
    for (size_t j = 0; j < names[k].size(); ++j) {
      if (j == 3) {
        line += ", … (" + std::to_string(names[k].size()) + ")";
        break;
      }
      line += (j ? ", " : "") + names[k][j];
    }
    kept[k].lines.push_back(line);
  }
  std::vector<DisplayEdge> edges;
  edges.reserve(dg.edges.size());
  for (auto& e : dg.edges)
    if (into[e.from] < 0) edges.push_back({index[e.from], index[e.to]});
  for (auto& [id, box] : dg.box_of)
    if (box >= 0) box = index[box];
  dg.folded = n - kept.size();
  dg.nodes = std::move(kept);
  dg.edges = std::move(edges);
}

}  // namespace lathe::views
