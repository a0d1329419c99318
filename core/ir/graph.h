// graph.h — a tensor graph: named outputs over hash-consed nodes, plus its inputs.
//
// A Graph is a cheap value (a few vectors of pointers): copy it freely; rewriting makes a
// new Graph sharing unchanged nodes. Inputs are the Input nodes in declaration order (an
// input that no output uses is still part of the signature).
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ir/node.h"

namespace lathe {

class Graph {
 public:
  std::vector<NodeRef> inputs;                         // Input nodes, in order
  std::vector<std::pair<std::string, NodeRef>> outputs;  // named results, in order

  Graph() = default;
  // Inputs are collected from the outputs (in topological order) when not given.
  static Graph from_outputs(std::vector<std::pair<std::string, NodeRef>> outs);

  // All nodes reachable from the outputs (and the inputs), inputs before users. Stable:
  // depends only on structure, so printing is deterministic.
  std::vector<NodeRef> toposort() const;
  size_t size() const { return toposort().size(); }
  NodeRef output(const std::string& name) const;  // nullptr if absent
  NodeRef input(const std::string& name) const;   // nullptr if absent
  // Users of each node (within this graph).
  std::unordered_map<NodeRef, std::vector<NodeRef>> users() const;
  // Symbolic dim names used by input shapes.
  std::vector<std::string> symbols() const;
};

// Rebuilds a graph bottom-up: fn(node, new_inputs) returns the replacement for a node
// whose inputs were already replaced (return nullptr to keep the node, re-made with the new
// inputs if they changed). Used by rewriting, autodiff, import.
Graph graph_map(const Graph& g, const std::function<NodeRef(NodeRef, const std::vector<NodeRef>&)>& fn);

}  // namespace lathe
