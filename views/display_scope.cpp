// display_scope.cpp — the scope hierarchy of the graph view (display_graph.h).
//
// A node's provenance path ("h.3/attn/softmax": Lua scopes and composite calls; ONNX node
// names such as "/h.3/attn/c_attn/MatMul:MatMul") names the nested groups it sits in. A
// collapsed scope is one box; an expanded one is a frame around its contents, laid out on
// its own (layout_layered.cpp). This file has the path helpers, the frames, and the kernel
// level's grouping of kernels by the scope of their root node.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "views/display_graph.h"
#include "views/theme.h"

namespace lathe::views {

std::string parent_scope(const std::string& path) {
  auto p = path.rfind('/');
  return p == std::string::npos ? std::string() : path.substr(0, p);
}

std::string scope_title(const std::string& path) {
  auto p = path.rfind('/');
  std::string c = p == std::string::npos ? path : path.substr(p + 1);
  // ONNX: "MatMul:MatMul" (node name, op type) reads "MatMul"; "fc1:Gemm" reads "fc1 · Gemm".
  auto colon = c.rfind(':');
  if (colon != std::string::npos && colon > 0 && colon + 1 < c.size()) {
    std::string name = c.substr(0, colon), op = c.substr(colon + 1);
    return name.compare(0, op.size(), op) == 0 ? name : name + " · " + op;
  }
  return c;
}

std::string collapsed_prefix(const std::string& p, const std::set<std::string>& expanded) {
  for (size_t i = 0; i <= p.size(); ++i) {
    if (i < p.size() && p[i] != '/') continue;
    if (i == 0) continue;   // ONNX paths start with '/': the empty prefix is the top
    std::string prefix = p.substr(0, i);
    if (!expanded.count(prefix)) return prefix;
  }
  return "";
}

NodeRef weight_root(NodeRef n) {
  // A weight seen through views (a broadcast bias, a transposed matrix) is still a weight.
  for (int hops = 0; n && hops < 8; ++hops) {
    if (n->inputs.empty()) {
      // An Input is a weight when built inside a scope and floating point (token ids and
      // positions built in a scope are data).
      if (n->op == Op::Const || (n->op == Op::Input && !n->prov.path.empty() && is_float(n->dtype))) return n;
      return nullptr;
    }
    if (n->inputs.size() != 1 || !(n->op == Op::View || n->op == Op::Copy || n->op == Op::Cast)) return nullptr;
    n = n->inputs[0];
  }
  return nullptr;
}

bool is_weight(NodeRef n) { return weight_root(n) != nullptr; }

void assign_frames(DisplayGraph& dg, const LabelMetrics& m) {
  dg.frames.clear();
  std::unordered_map<std::string, int> index;
  auto frame_for = [&](auto& self, const std::string& path) -> int {
    if (path.empty() || path == "/") return -1;
    auto it = index.find(path);
    if (it != index.end()) return it->second;
    int parent = self(self, parent_scope(path));
    int f = static_cast<int>(dg.frames.size());
    dg.frames.push_back({path, "▼ " + scope_title(path), parent, 0});
    index.emplace(path, f);
    return f;
  };
  for (auto& b : dg.nodes) b.frame = frame_for(frame_for, b.scope);
  if (dg.frames.empty()) return;

  // A frame around one item says nothing: its item moves to the enclosing frame. Children
  // come after their parents, so walking backwards sees a frame's final count.
  const size_t nf = dg.frames.size();
  std::vector<int> items(nf, 0);
  for (auto& b : dg.nodes)
    if (b.frame >= 0) ++items[b.frame];
  for (size_t f = 0; f < nf; ++f)
    if (dg.frames[f].parent >= 0) ++items[dg.frames[f].parent];
  std::vector<char> drop(nf, 0);
  for (size_t f = nf; f-- > 0;)
    if (items[f] <= 1) drop[f] = 1;   // its one item counts for its parent instead of it
  std::vector<int> up(nf);           // nearest kept frame at or above
  std::vector<int> renum(nf, -1);
  std::vector<DisplayFrame> kept;
  for (size_t f = 0; f < nf; ++f) {
    int p = dg.frames[f].parent;
    int kp = p < 0 ? -1 : up[p];
    if (drop[f]) {
      up[f] = kp;
      continue;
    }
    renum[f] = static_cast<int>(kept.size());
    up[f] = renum[f];
    DisplayFrame fr = std::move(dg.frames[f]);
    fr.parent = kp;
    fr.title_w = m.text_width(fr.title);
    kept.push_back(std::move(fr));
  }
  for (auto& b : dg.nodes)
    if (b.frame >= 0) b.frame = up[b.frame];
  dg.frames = std::move(kept);
}

void group_kernels_by_scope(const AppState& s, DisplayGraph& dg, const std::vector<std::string>& scope_of) {
  const size_t n = dg.nodes.size();
  std::vector<std::string> key(n);
  for (size_t i = 0; i < n; ++i) {
    dg.nodes[i].scope = scope_of[i];
    if (dg.nodes[i].kernel >= 0) key[i] = collapsed_prefix(scope_of[i], s.expanded);
  }
  UnionFind uf(n);
  for (auto& e : dg.edges)
    if (!key[e.from].empty() && key[e.from] == key[e.to]) uf.join(e.from, e.to);
  // A scope call with one kernel shows that kernel (a box saying "1 kernel" hides it).
  std::unordered_map<int, int> size_of_root;
  for (size_t i = 0; i < n; ++i)
    if (!key[i].empty()) ++size_of_root[uf.find(static_cast<int>(i))];
  for (size_t i = 0; i < n; ++i)
    if (!key[i].empty() && size_of_root[uf.find(static_cast<int>(i))] == 1) key[i].clear();

  std::vector<int> index(n, -1);
  std::unordered_map<int, int> group_of_root;
  std::vector<DisplayNode> out;
  std::vector<int> kernels;   // per new box: kernels folded into it
  for (size_t i = 0; i < n; ++i) {
    if (key[i].empty()) {
      index[i] = static_cast<int>(out.size());
      out.push_back(std::move(dg.nodes[i]));
      kernels.push_back(0);
      continue;
    }
    auto [it, fresh] = group_of_root.try_emplace(uf.find(static_cast<int>(i)), static_cast<int>(out.size()));
    if (fresh) {
      DisplayNode g;
      g.group = key[i];
      g.scope = parent_scope(key[i]);
      g.category = -1;
      g.fill = group_color();
      out.push_back(std::move(g));
      kernels.push_back(0);
    }
    DisplayNode& g = out[it->second];
    DisplayNode& k = dg.nodes[i];
    g.members.insert(g.members.end(), k.members.begin(), k.members.end());
    g.rep = k.rep;
    g.is_output = g.is_output || k.is_output;
    ++kernels[it->second];
    index[i] = it->second;
  }
  for (size_t b = 0; b < out.size(); ++b) {
    DisplayNode& g = out[b];
    if (g.group.empty()) continue;
    g.lines = {"▶ " + scope_title(g.group),
               g.group + " · " + std::to_string(kernels[b]) + (kernels[b] == 1 ? " kernel" : " kernels")};
    if (NodeRef rep = node_by_id(g.rep)) g.lines.push_back(node_type(rep));
    if (g.is_output) {
      std::string names;
      for (uint32_t id : g.members) {
        auto o = s.output_name.find(node_by_id(id));
        if (o != s.output_name.end() && names.find(o->second) == std::string::npos)
          names += (names.empty() ? "" : ", ") + o->second;
      }
      g.lines.push_back("→ " + names);
    }
  }
  std::vector<DisplayEdge> edges;
  std::unordered_map<uint64_t, bool> seen;
  for (auto& e : dg.edges) {
    int a = index[e.from], b = index[e.to];
    uint64_t k = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    if (a != b && seen.emplace(k, true).second) edges.push_back({a, b});
  }
  for (auto& [id, box] : dg.box_of)
    if (box >= 0) box = index[box];
  for (int& kb : dg.kernel_box)
    if (kb >= 0) kb = index[kb];
  dg.nodes = std::move(out);
  dg.edges = std::move(edges);
}

}  // namespace lathe::views
