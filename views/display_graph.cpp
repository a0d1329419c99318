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

//-----------------------------------------------------------------------------
// [SECTION] tensor-level grouping (composite provenance)
//-----------------------------------------------------------------------------

// The box a node folds into: the shortest prefix of its composite path that is not
// expanded, or "" when every prefix is (the node shows on its own). Graph inputs built at
// the top stay boxes of their own; weights built inside a scope belong to it.
std::string group_key(NodeRef n, const std::set<std::string>& expanded) {
  if (n->op == Op::Input && !is_weight(n)) return "";
  return collapsed_prefix(n->prov.path, expanded);
}

// The shortest prefix of `path` that is in `collapsed` ("" when none is).
std::string collapsed_member(const std::string& p, const std::set<std::string>& collapsed) {
  for (size_t i = 1; i <= p.size(); ++i) {
    if (i < p.size() && p[i] != '/') continue;
    std::string prefix = p.substr(0, i);
    if (collapsed.count(prefix)) return prefix;
  }
  return "";
}

}  // namespace

uint64_t display_key(const AppState& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(s.version);
  mix(static_cast<uint64_t>(s.level));
  mix(s.show_weights ? 7 : 3);
  if (s.level != Level::Primitive)
    for (auto& e : s.expanded) mix(std::hash<std::string>()(e));
  else
    for (auto& e : s.prim_collapsed) mix(std::hash<std::string>()(e) + 17);
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
  b.lines = {"▶ " + scope_title(b.group),
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
  // Expanded scopes are frames at the tensor level, and at the primitive level of a large
  // graph (a flat drawing of a whole network reads as a hairball).
  const bool frames = s.level == Level::Tensor || s.primitive_frames();

  // 1. Each node's fold key, then connected components among nodes sharing a key, so two
  //    separate calls of the same composite stay two boxes.
  std::vector<std::string> key(n);
  std::vector<char> split(n, 0);
  for (size_t i = 0; i < n; ++i) split[i] = split_constant(s, topo[i]);
  if (s.level == Level::Tensor)
    for (size_t i = 0; i < n; ++i)
      if (!split[i]) key[i] = group_key(topo[i], s.expanded);
  if (s.level == Level::Primitive && frames && !s.prim_collapsed.empty())   // scopes collapsed there
    for (size_t i = 0; i < n; ++i)
      if (!split[i] && !(topo[i]->op == Op::Input && !is_weight(topo[i])))
        key[i] = collapsed_member(topo[i]->prov.path, s.prim_collapsed);
  UnionFind uf(n);
  for (size_t i = 0; i < n; ++i) {
    if (key[i].empty()) continue;
    for (NodeRef in : topo[i]->inputs) {
      size_t j = s.topo_index.at(in);
      if (key[j] == key[i]) uf.join(static_cast<int>(i), static_cast<int>(j));
    }
  }

  // 1b. Constant subgraphs (a causal mask: Index, compares, a View) are hash-consed too:
  //     built once, read by every layer, they belong to the first layer's scope and would
  //     pull an edge from it into each other one. When everything that reads such a node
  //     sits in collapsed scopes, it is drawn in none of them: a member of each (shared).
  std::vector<char> const_like(n, 0), shared(n, 0);
  std::vector<std::vector<int>> readers(n);   // per const-like node: the components that read it
  if (s.level == Level::Tensor) {
    for (size_t i = 0; i < n; ++i) {
      NodeRef nd = topo[i];
      bool c = nd->op == Op::Const || nd->op == Op::Index;
      if (!c && nd->op != Op::Input && !nd->inputs.empty()) {
        c = true;
        for (NodeRef in : nd->inputs) c = c && const_like[s.topo_index.at(in)];
      }
      const_like[i] = c && !s.output_name.count(nd);   // split scalars count: a View of one is constant too
    }
    // A scope call that only makes a constant (an ONNX Constant node) is no box of its
    // own: its nodes are loose, so its constants fold into their readers.
    std::unordered_map<int, bool> all_const;
    for (size_t i = 0; i < n; ++i)
      if (!key[i].empty()) {
        auto [it, fresh] = all_const.try_emplace(uf.find(static_cast<int>(i)), true);
        it->second = it->second && const_like[i];
      }
    for (size_t i = 0; i < n; ++i)
      if (!key[i].empty() && all_const[uf.find(static_cast<int>(i))]) key[i].clear();
    for (size_t i = n; i-- > 0;) {
      if (!const_like[i] || split[i]) continue;
      auto u = s.users.find(topo[i]);
      if (u == s.users.end()) continue;
      bool all_grouped = true;
      auto& r = readers[i];
      for (NodeRef user : u->second) {
        size_t j = s.topo_index.at(user);
        if (const_like[j]) {
          if (!shared[j]) all_grouped = false;
          r.insert(r.end(), readers[j].begin(), readers[j].end());
        } else if (key[j].empty()) {
          all_grouped = false;
        } else {
          r.push_back(uf.find(static_cast<int>(j)));
        }
      }
      std::sort(r.begin(), r.end());
      r.erase(std::unique(r.begin(), r.end()), r.end());
      shared[i] = all_grouped && r.size() >= 2;
      if (!shared[i]) r.clear();
    }
  }

  // 2. One box per single node or per component, in topological order of first member.
  std::vector<int> box(n, -1);
  std::unordered_map<int, int> box_of_root;
  for (size_t i = 0; i < n; ++i) {
    NodeRef nd = topo[i];
    if (split[i] || shared[i]) continue;
    if (key[i].empty()) {
      box[i] = static_cast<int>(dg.nodes.size());
      dg.nodes.push_back(single_box(s, nd));
      if (frames) dg.nodes.back().scope = nd->prov.path;
      continue;
    }
    int root = uf.find(static_cast<int>(i));
    auto [it, fresh] = box_of_root.try_emplace(root, static_cast<int>(dg.nodes.size()));
    if (fresh) {
      DisplayNode b;
      b.group = key[i];
      b.scope = parent_scope(key[i]);
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
  for (size_t i = 0; i < n; ++i)   // shared constant subgraphs: members of each reader
    for (int root : readers[i]) {
      auto it = box_of_root.find(root);
      if (it == box_of_root.end()) continue;
      dg.nodes[it->second].members.push_back(topo[i]->id);
      if (box[i] < 0) box[i] = it->second;
    }
  for (size_t i = 0; i < n; ++i) {
    if (shared[i]) continue;
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
        dg.nodes.back().scope = dg.nodes[ub].scope;
        if (box[i] < 0) box[i] = copy;
        add_edge(copy, ub);
      }
      continue;
    }
    for (NodeRef in : topo[i]->inputs) {
      size_t j = s.topo_index.at(in);
      if (!split[j] && !shared[j]) add_edge(box[j], box[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) dg.box_of[topo[i]->id] = box[i];

  // 4. Labels of groups, sources folded into their readers in a huge graph, then sizes.
  // A scope holding one op (an ONNX node's own name scope, "/h.5/Add:Add") is that op's
  // box: a "▶ Add · 1 op" box that opens onto the same Add says nothing.
  // (Its weights, and views of them, stay members: selecting one lands there.)
  for (auto& b : dg.nodes) {
    if (b.group.empty()) continue;
    NodeRef op = nullptr;
    int ops = 0;
    for (uint32_t id : b.members)
      if (NodeRef m = node_by_id(id); m && !is_weight(m)) op = m, ++ops;
    if (ops != 1) continue;
    std::vector<uint32_t> members = std::move(b.members);
    b = single_box(s, op);
    b.members = std::move(members);
    if (frames) b.scope = parent_scope(op->prov.path);
  }
  for (auto& b : dg.nodes)
    if (!b.group.empty()) label_group(s, b);
  if (!s.show_weights) fold_sources(dg);
  if (frames) assign_frames(dg, m);
  for (auto& b : dg.nodes) size_box(b, m);
  return dg;
}

}  // namespace lathe::views
