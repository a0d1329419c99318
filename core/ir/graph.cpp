// graph.cpp — topological order, lookups, bottom-up rebuilding.
#include "core/ir/graph.h"

#include <unordered_set>

namespace lathe {

Graph Graph::from_outputs(std::vector<std::pair<std::string, NodeRef>> outs) {
  Graph g;
  g.outputs = std::move(outs);
  for (NodeRef n : g.toposort())
    if (n->op == Op::Input) g.inputs.push_back(n);
  return g;
}

std::vector<NodeRef> Graph::toposort() const {
  // Iterative DFS post-order from inputs (declaration order) then outputs (in order):
  // deterministic, and no recursion depth limit on 100k-node chains.
  std::vector<NodeRef> order;
  std::unordered_set<NodeRef> done;
  std::vector<std::pair<NodeRef, size_t>> stack;
  auto visit = [&](NodeRef root) {
    if (done.count(root)) return;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        NodeRef c = n->inputs[i++];
        if (!done.count(c)) stack.push_back({c, 0});
        continue;
      }
      NodeRef fin = n;
      stack.pop_back();
      if (done.insert(fin).second) order.push_back(fin);
    }
  };
  for (NodeRef n : inputs) visit(n);
  for (auto& [name, n] : outputs) visit(n);
  return order;
}

NodeRef Graph::output(const std::string& name) const {
  for (auto& [n, r] : outputs) if (n == name) return r;
  return nullptr;
}

NodeRef Graph::input(const std::string& name) const {
  for (NodeRef n : inputs) if (n->attrs.name == name) return n;
  return nullptr;
}

std::unordered_map<NodeRef, std::vector<NodeRef>> Graph::users() const {
  std::unordered_map<NodeRef, std::vector<NodeRef>> u;
  for (NodeRef n : toposort())
    for (NodeRef in : n->inputs) {
      auto& v = u[in];
      if (v.empty() || v.back() != n) v.push_back(n);
    }
  return u;
}

std::vector<std::string> Graph::symbols() const {
  std::set<std::string> s;
  for (NodeRef n : inputs)
    for (auto& d : n->shape) d.free_vars(s);
  return {s.begin(), s.end()};
}

Graph graph_map(const Graph& g, const std::function<NodeRef(NodeRef, const std::vector<NodeRef>&)>& fn) {
  std::unordered_map<NodeRef, NodeRef> m;
  for (NodeRef n : g.toposort()) {
    std::vector<NodeRef> ins;
    ins.reserve(n->inputs.size());
    bool changed = false;
    for (NodeRef in : n->inputs) {
      NodeRef r = m.at(in);
      changed |= r != in;
      ins.push_back(r);
    }
    NodeRef r = fn(n, ins);
    if (!r) r = changed ? make_node(n->op, n->dtype, n->shape, ins, n->attrs, n->prov) : n;
    m[n] = r;
  }
  Graph out;
  for (NodeRef n : g.inputs) {
    NodeRef r = m.at(n);
    if (r->op == Op::Input) out.inputs.push_back(r);
  }
  for (auto& [name, n] : g.outputs) out.outputs.push_back({name, m.at(n)});
  // inputs that appeared through the mapping (rare) are added in topological order
  std::unordered_set<NodeRef> have(out.inputs.begin(), out.inputs.end());
  for (NodeRef n : out.toposort())
    if (n->op == Op::Input && !have.count(n)) out.inputs.push_back(n);
  return out;
}

}  // namespace lathe
