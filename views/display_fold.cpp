// display_fold.cpp — weights and constants as attributes of the box that reads them
// (display_graph.h: fold_sources).
//
// A weight (a Const, or an Input built inside a scope), a constant buffer, or a kernel
// that computes from constants only (a causal mask) is not drawn as a box: its node joins
// the members of each box that reads it (so selecting or searching for it lands there)
// and the reader gets a label line "+ w3, b3", or "+ 8 weights · 7.1M" for many. The
// inspector lists them with shape, dtype and value statistics. Graph inputs built at the
// top (the data) stay boxes. gui.weights(true) / the toolbar's Weights box turn it off.
#include <algorithm>
#include <unordered_map>

#include "views/display_graph.h"

namespace lathe::views {
namespace {

bool is_source_box(const DisplayNode& b, int in_degree) {
  if (!b.group.empty() || b.is_output || in_degree > 0) return false;
  if (b.kernel >= 0) return true;   // a kernel that reads nothing computed: constants only
  return b.members.size() == 1 && is_weight(node_by_id(b.rep));
}

std::string source_name(const DisplayNode& b) {
  NodeRef n = node_by_id(b.rep);
  if (b.kernel >= 0) return b.lines.empty() ? "kernel" : b.lines[0];
  if (NodeRef w = weight_root(n)) n = w;
  if (n->op == Op::Input) return n->attrs.name;
  return node_summary(n);   // "Const 0.5"
}

std::string count_text(double v) {
  char buf[32];
  if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

void fold_sources(DisplayGraph& dg) {
  const size_t n = dg.nodes.size();
  std::vector<std::vector<int>> readers(n), writers(n);
  for (auto& e : dg.edges) writers[e.to].push_back(e.from), readers[e.from].push_back(e.to);
  // Boxes are in topological order: a box whose inputs all fold (a View of a weight)
  // folds too.
  std::vector<char> fold(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int in_degree = 0;
    for (int w : writers[i]) in_degree += fold[w] ? 0 : 1;
    fold[i] = !readers[i].empty() && is_source_box(dg.nodes[i], in_degree);
  }
  // A folded box's readers that are folded too (a constant kernel reading a constant
  // buffer) pass it on to theirs.
  auto final_readers = [&](int i) {
    std::vector<int> out, todo = readers[i];
    std::vector<char> seen(n, 0);
    while (!todo.empty()) {
      int r = todo.back();
      todo.pop_back();
      if (seen[r]) continue;
      seen[r] = 1;
      if (fold[r]) todo.insert(todo.end(), readers[r].begin(), readers[r].end());
      else out.push_back(r);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  if (std::count(fold.begin(), fold.end(), 1) == 0) return;

  std::vector<int> index(n, -1);
  std::vector<DisplayNode> kept;
  kept.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!fold[i]) index[i] = static_cast<int>(kept.size()), kept.push_back(std::move(dg.nodes[i]));
  std::vector<std::vector<std::string>> names(kept.size());
  std::vector<double> params(kept.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    if (!fold[i]) continue;
    std::vector<int> rs = final_readers(static_cast<int>(i));
    if (rs.empty()) continue;
    index[i] = index[rs.front()];
    double numel = 0;
    if (NodeRef r = weight_root(node_by_id(dg.nodes[i].rep)); r && dg.nodes[i].kernel < 0 && writers[i].empty()) {
      numel = 1;
      for (auto& d : r->shape) numel *= d.is_const() ? static_cast<double>(d.value()) : 1.0;
    }
    for (int r : rs) {
      DisplayNode& into = kept[index[r]];
      into.members.insert(into.members.end(), dg.nodes[i].members.begin(), dg.nodes[i].members.end());
      if (!writers[i].empty() && dg.nodes[i].kernel < 0) continue;   // a view of a weight named already
      ++into.folded;
      names[index[r]].push_back(source_name(dg.nodes[i]));
      params[index[r]] += numel;
    }
  }
  for (size_t k = 0; k < kept.size(); ++k) {
    if (names[k].empty()) continue;
    std::string line = "+ ";
    size_t len = 0;
    for (auto& nm : names[k]) len += nm.size() + 2;
    if (names[k].size() <= 3 && len <= 48) {
      for (size_t j = 0; j < names[k].size(); ++j) line += (j ? ", " : "") + names[k][j];
    } else {
      line += std::to_string(names[k].size()) + " weights";
      if (params[k] > 0) line += " · " + count_text(params[k]) + " values";
    }
    kept[k].lines.push_back(line);
  }
  std::vector<DisplayEdge> edges;
  edges.reserve(dg.edges.size());
  for (auto& e : dg.edges)
    if (!fold[e.from] && !fold[e.to]) edges.push_back({index[e.from], index[e.to]});
  for (auto& [id, box] : dg.box_of)
    if (box >= 0) box = index[box];
  for (int& kb : dg.kernel_box)
    if (kb >= 0) kb = index[kb];
  dg.folded = n - kept.size();
  dg.nodes = std::move(kept);
  dg.edges = std::move(edges);
}

}  // namespace lathe::views
