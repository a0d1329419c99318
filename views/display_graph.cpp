// display_graph.cpp — folding a Graph into boxes for the graph view.
//
// [SECTION] labels
// [SECTION] tensor-level grouping (composite provenance)
// [SECTION] building boxes and edges
#include "views/display_graph.h"

#include <algorithm>
#include <numeric>

#include "core/ir/dot.h"
#include "views/theme.h"

namespace lathe::views {

//-----------------------------------------------------------------------------
// [SECTION] labels
//-----------------------------------------------------------------------------

std::string node_type(NodeRef n) { return std::string(dtype_name(n->dtype)) + " " + shape_to_string(n->shape); }

void size_box(DisplayNode& b, const LabelMetrics& m) {
  float w = 0;
  for (auto& l : b.lines) w = std::max(w, m.text_width(l));
  b.w = std::max(48.0f, w + 2 * m.pad_x);
  b.h = b.lines.size() * m.line_height + 2 * m.pad_y;
}

namespace {

std::string last_component(const std::string& path) {
  auto p = path.rfind('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

//-----------------------------------------------------------------------------
// [SECTION] tensor-level grouping (composite provenance)
//-----------------------------------------------------------------------------

// The box a node folds into: the shortest prefix of its composite path that is not
// expanded, or "" when every prefix is (the node shows on its own).
std::string group_key(NodeRef n, const std::set<std::string>& expanded) {
  if (n->op == Op::Input) return "";
  const std::string& p = n->prov.path;
  for (size_t i = 0; i <= p.size(); ++i) {
    if (i < p.size() && p[i] != '/') continue;
    std::string prefix = p.substr(0, i);
    if (!prefix.empty() && !expanded.count(prefix)) return prefix;
  }
  return "";
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

}  // namespace

uint64_t display_key(const AppState& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(s.version);
  mix(static_cast<uint64_t>(s.level));
  if (s.level == Level::Tensor)
    for (auto& e : s.expanded) mix(std::hash<std::string>()(e));
  if (s.level == Level::Kernel && s.compiled) {   // kernel boxes show their times
    mix(reinterpret_cast<uintptr_t>(s.compiled->exe.get()));
    mix(s.compiled->profile ? s.compiled->serial : 0);
  }
  return h;
}

//-----------------------------------------------------------------------------
// [SECTION] building boxes and edges
//-----------------------------------------------------------------------------

namespace {

DisplayNode single_box(const AppState& s, NodeRef nd) {
  DisplayNode b;
  b.lines = {node_summary(nd), node_type(nd)};
  b.category = static_cast<int>(nd->info().category);
  b.fill = category_color(nd->info().category);
  b.members = {nd->id};
  b.rep = nd->id;
  auto out = s.output_name.find(nd);
  if (out != s.output_name.end()) {
    b.is_output = true;
    b.lines.push_back("→ " + out->second);
  }
  return b;
}

void label_group(const AppState& s, DisplayNode& b) {
  NodeRef rep = node_by_id(b.rep);
  b.lines = {"▶ " + last_component(b.group),
             b.group + " · " + std::to_string(b.members.size()) + (b.members.size() == 1 ? " op" : " ops"),
             node_type(rep)};
  if (!b.is_output) return;
  std::string names;
  for (uint32_t id : b.members) {
    auto out = s.output_name.find(node_by_id(id));
    if (out != s.output_name.end()) names += (names.empty() ? "" : ", ") + out->second;
  }
  b.lines.push_back("→ " + names);
}

// Scalar constants (Const 0, Const 1.44…) are hash-consed, so one node may feed every
// layer of a model; drawn once it would pull edges across the whole drawing. They are
// drawn as attributes instead: folded into a collapsed user's box, or one small copy per
// user box. (A constant that is a graph output keeps its own box.)
bool split_constant(const AppState& s, NodeRef n) {
  return n->is_scalar_const() && !s.output_name.count(n) && s.users.count(n);
}

}  // namespace

DisplayGraph build_display_graph(const AppState& s, const LabelMetrics& m) {
  DisplayGraph dg;
  dg.key = display_key(s);
  if (!s.has_graph) {
    dg.empty_reason = "no graph loaded: File > Open… (Ctrl+O)";
    return dg;
  }
  if (s.level == Level::Kernel) {
    build_kernel_display(s, m, dg);
    return dg;
  }
  const auto& topo = s.topo;
  const size_t n = topo.size();

  // 1. Each node's fold key, then connected components among nodes sharing a key, so two
  //    separate calls of the same composite stay two boxes.
  std::vector<std::string> key(n);
  std::vector<char> split(n, 0);
  for (size_t i = 0; i < n; ++i) split[i] = split_constant(s, topo[i]);
  if (s.level == Level::Tensor)
    for (size_t i = 0; i < n; ++i)
      if (!split[i]) key[i] = group_key(topo[i], s.expanded);
  UnionFind uf(n);
  for (size_t i = 0; i < n; ++i) {
    if (key[i].empty()) continue;
    for (NodeRef in : topo[i]->inputs) {
      size_t j = s.topo_index.at(in);
      if (key[j] == key[i]) uf.join(static_cast<int>(i), static_cast<int>(j));
    }
  }

  // 2. One box per single node or per component, in topological order of first member.
  std::vector<int> box(n, -1);
  std::unordered_map<int, int> box_of_root;
  for (size_t i = 0; i < n; ++i) {
    NodeRef nd = topo[i];
    if (split[i]) continue;
    if (key[i].empty()) {
      box[i] = static_cast<int>(dg.nodes.size());
      dg.nodes.push_back(single_box(s, nd));
      continue;
    }
    int root = uf.find(static_cast<int>(i));
    auto [it, fresh] = box_of_root.try_emplace(root, static_cast<int>(dg.nodes.size()));
    if (fresh) {
      DisplayNode b;
      b.group = key[i];
      b.category = -1;
      b.fill = group_color();
      dg.nodes.push_back(std::move(b));
    }
    box[i] = it->second;
    DisplayNode& b = dg.nodes[it->second];
    b.members.push_back(nd->id);
    b.rep = nd->id;   // the last member in topological order: the group's result
    if (s.output_name.count(nd)) b.is_output = true;
  }

  // 3. Edges between different boxes, each pair once; split constants get a copy per user box.
  std::unordered_map<uint64_t, bool> seen;
  auto add_edge = [&](int a, int b) {
    uint64_t k = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    if (a != b && seen.emplace(k, true).second) dg.edges.push_back({a, b});
  };
  for (size_t i = 0; i < n; ++i) {
    if (split[i]) {
      std::unordered_map<int, bool> done;
      for (NodeRef user : s.users.at(topo[i])) {
        int ub = box[s.topo_index.at(user)];
        if (ub < 0 || !done.emplace(ub, true).second) continue;
        if (!dg.nodes[ub].group.empty()) {
          dg.nodes[ub].members.push_back(topo[i]->id);
          if (box[i] < 0) box[i] = ub;
          continue;
        }
        int copy = static_cast<int>(dg.nodes.size());
        dg.nodes.push_back(single_box(s, topo[i]));
        if (box[i] < 0) box[i] = copy;
        add_edge(copy, ub);
      }
      continue;
    }
    for (NodeRef in : topo[i]->inputs) {
      size_t j = s.topo_index.at(in);
      if (!split[j]) add_edge(box[j], box[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) dg.box_of[topo[i]->id] = box[i];

  // 4. Labels of groups, sources folded into their readers in a huge graph, then sizes.
  for (auto& b : dg.nodes)
    if (!b.group.empty()) label_group(s, b);
  if (s.level == Level::Tensor && dg.nodes.size() > kFoldSourcesBoxes) fold_sources(dg);
  for (auto& b : dg.nodes) size_box(b, m);
  return dg;
}

}  // namespace lathe::views
