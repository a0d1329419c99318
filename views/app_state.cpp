// app_state.cpp — the commands that change the app's document and shared view state.
#include "views/app_state.h"

#include "views/display_graph.h"

#include <exception>

#include "core/ir/loader.h"
#include "core/rewrite/session.h"

namespace lathe::views {

bool AppState::open(const std::string& file) {
  try {
    Graph g = load_graph(file);
    error.reset();
    set_graph(std::move(g), file, file);
    info("opened " + file + " (" + std::to_string(topo.size()) + (topo.size() == 1 ? " node)" : " nodes)"));
    return true;
  } catch (const UserError& e) {
    error = LoadError{"cannot open " + file, e.diag(), file};
  } catch (const InternalError& e) {
    error = LoadError{"cannot open " + file, Diagnostic{std::string("internal error (a bug in Lathe): ") + e.what(), file}, file};
  } catch (const std::exception& e) {
    error = LoadError{"cannot open " + file, Diagnostic{e.what(), file}, file};
  }
  fail(error->what + ": " + error->diag.format());
  return false;
}

bool AppState::reload() {
  if (path.empty()) {
    warn("nothing to reload: the graph did not come from a file");
    return false;
  }
  return open(path);
}

void AppState::show_version(Graph g) {
  // Nodes are hash-consed: equal outputs are the same graph (a session that made no step
  // yet), which keeps its version, layout and compiled program.
  if (has_graph && g.outputs == graph.outputs && g.inputs == graph.inputs) return;
  diff = VersionDiff{};
  if (has_graph) {
    GraphDiff d = diff_graphs(graph, g);
    diff.from_version = version;
    for (NodeRef n : d.added) diff.added.insert(n->id);
    for (NodeRef n : d.removed) diff.removed.insert(n->id);
    // A rebuilt node is its old self moved on; where a rebuilt node's operand became a new
    // node (the rewrite site), the new node stands in for the removed operand.
    for (auto& [x, y] : d.changed) {
      diff.was[y->id] = x->id;
      for (size_t i = 0; i < x->inputs.size() && i < y->inputs.size(); ++i)
        if (diff.removed.count(x->inputs[i]->id) && diff.added.count(y->inputs[i]->id))
          diff.replaced.emplace(y->inputs[i]->id, x->inputs[i]->id);
    }
    for (auto& [name, y] : g.outputs)
      if (NodeRef x = graph.output(name); x && diff.removed.count(x->id) && diff.added.count(y->id))
        diff.replaced.emplace(y->id, x->id);
  }
  graph = std::move(g);
  has_graph = true;
  ++version;
  reindex();
}

void AppState::set_graph(Graph g, std::string t, std::string p) {
  graph = std::move(g);
  has_graph = true;
  ++version;
  ++document;
  title = std::move(t);
  path = std::move(p);
  step_root = -1;
  step_added.clear();
  diff = VersionDiff{};
  // A different graph: its program, profile and values are gone (the console's `p`
  // stays; compile again to see this graph's kernels).
  compiled.reset();
  run.reset();
  selected_kernel = -1;
  reindex();
  // A large graph opens collapsed at the tensor level; a small one shows every primitive.
  bool large = topo.size() > kLargeGraphNodes;
  if (large && level == Level::Primitive) level = Level::Tensor;
  if (large) collapse_all();
  prim_collapsed.clear();
  if (!large && level == Level::Tensor && expanded.empty()) level = Level::Primitive;
}

void AppState::reindex() {
  topo = graph.toposort();
  topo_index.clear();
  for (size_t i = 0; i < topo.size(); ++i) topo_index[topo[i]] = i;
  users = graph.users();
  output_name.clear();
  for (auto& [name, n] : graph.outputs) {
    auto& s = output_name[n];
    s += (s.empty() ? "" : ", ") + name;
  }
  // Keep the selection when the node survives (reload, rewrite step); else drop it.
  if (!selected_node()) selected = -1;
}

NodeRef AppState::selected_node() const {
  if (selected < 0) return nullptr;
  NodeRef n = node_by_id(static_cast<uint32_t>(selected));
  if (!n) return nullptr;
  // Only nodes of the current graph count (ids are global to the process).
  return topo_index.count(n) ? n : nullptr;
}

void AppState::select_node(int id, bool center) {
  selected = id;
  selected_group.clear();
  center_request = center;
  selected_kernel = -1;
  if (compiled && id >= 0) {
    auto it = compiled->kernel_of.find(static_cast<uint32_t>(id));
    if (it != compiled->kernel_of.end()) selected_kernel = it->second;
  }
}

void AppState::select_kernel(int k, bool center) {
  if (!compiled || k < 0 || k >= compiled->num_kernels()) {
    selected_kernel = -1;
    return;
  }
  NodeRef root = compiled->program().kg.kernels[k].root;
  selected = root ? static_cast<int>(root->id) : -1;
  selected_group.clear();
  selected_kernel = k;
  center_request = center;
}

void AppState::select_group(const std::string& p, bool center) {
  selected = -1;
  selected_group = p;
  center_request = center;
}

std::string AppState::reveal(int id) {
  NodeRef n = id >= 0 ? node_by_id(static_cast<uint32_t>(id)) : nullptr;
  if (!n) return "";
  if (level == Level::Primitive) {   // open the collapsed scopes that hold it
    std::string first;
    for (auto it = prim_collapsed.begin(); it != prim_collapsed.end();) {
      const std::string& p = *it;
      bool holds = n->prov.path == p || (n->prov.path.size() > p.size() && n->prov.path.compare(0, p.size(), p) == 0 &&
                                         n->prov.path[p.size()] == '/');
      if (holds && (first.empty() || p.size() < first.size())) first = p;
      it = holds ? prim_collapsed.erase(it) : std::next(it);
    }
    if (!first.empty()) ++expanded_version;
    return first;
  }
  std::string path = n->prov.path;
  if (level == Level::Kernel) {   // the scope of the kernel that computes it
    if (!compiled) return "";
    auto k = compiled->kernel_of.find(n->id);
    if (k == compiled->kernel_of.end()) return "";
    const Kernel& kn = compiled->program().kg.kernels[k->second];
    NodeRef r = kn.root ? kn.root : (kn.nodes.empty() ? nullptr : kn.nodes.back());
    path = r ? r->prov.path : "";
  }
  std::string first = path.empty() ? "" : collapsed_prefix(path, expanded);
  if (first.empty()) return "";
  expand(path);
  last_toggled.clear();   // the view centres on the selection instead of keeping a scope in place
  return first;
}

void AppState::clear_selection() {
  selected = -1;
  selected_group.clear();
  selected_kernel = -1;
}

void AppState::set_level(Level l) { level = l; }

bool AppState::primitive_frames() const { return topo.size() > kLargeGraphNodes; }

void AppState::expand(const std::string& p) {
  last_toggled = p;
  if (level == Level::Primitive) {   // p and the scopes around it show as frames
    for (auto it = prim_collapsed.begin(); it != prim_collapsed.end();) {
      bool around = p == *it || (p.size() > it->size() && p.compare(0, it->size(), *it) == 0 && p[it->size()] == '/');
      it = around ? prim_collapsed.erase(it) : std::next(it);
    }
    ++expanded_version;
    return;
  }
  // Expanding a/b/c implies its parents are expanded too.
  for (size_t i = 0; i <= p.size(); ++i)
    if (i == p.size() || p[i] == '/') expanded.insert(p.substr(0, i));
  ++expanded_version;
}

void AppState::collapse(const std::string& p) {
  last_toggled = p;
  if (level == Level::Primitive) {
    prim_collapsed.insert(p);
    ++expanded_version;
    return;
  }
  for (auto it = expanded.begin(); it != expanded.end();) {
    bool below = *it == p || (it->size() > p.size() && it->compare(0, p.size(), p) == 0 && (*it)[p.size()] == '/');
    it = below ? expanded.erase(it) : std::next(it);
  }
  ++expanded_version;
}

void AppState::collapse_all() {
  expanded.clear();
  ++expanded_version;
}

void AppState::expand_all() {
  for (NodeRef n : topo)
    if (!n->prov.path.empty()) expand(n->prov.path);
  ++expanded_version;
}

}  // namespace lathe::views
