// verify.cpp — see verify.h.
#include "core/ir/verify.h"

#include <set>

#include "core/ir/build.h"

namespace lathe {

std::vector<Diagnostic> verify(const Graph& g) {
  std::vector<Diagnostic> out;
  auto add = [&](int node, std::string msg) {
    Diagnostic d;
    d.node = node;
    d.message = std::move(msg);
    out.push_back(std::move(d));
  };
  std::set<std::string> names;
  for (NodeRef n : g.inputs) {
    if (n->op != Op::Input) add(n->id, "graph input is a " + std::string(op_name(n->op)) + ", expected an Input");
    else if (!names.insert(n->attrs.name).second) add(n->id, "duplicate input name '" + n->attrs.name + "'");
  }
  std::set<std::string> onames;
  for (auto& [name, n] : g.outputs) {
    if (!n) { add(-1, "output '" + name + "' has no node"); continue; }
    if (!onames.insert(name).second) add(n->id, "duplicate output name '" + name + "'");
  }
  if (g.outputs.empty()) add(-1, "graph has no outputs");
  std::set<NodeRef> declared(g.inputs.begin(), g.inputs.end());
  std::set<NodeRef> out_nodes;
  for (auto& [name, n] : g.outputs) if (n) out_nodes.insert(n);
  for (NodeRef n : g.toposort()) {
    std::string e = prim::check_node(n->op, n->dtype, n->shape, n->inputs, n->attrs);
    if (!e.empty()) add(n->id, e);
    if (n->op == Op::Input && !declared.count(n)) add(n->id, "Input '" + n->attrs.name + "' is not declared as a graph input");
    if (n->op == Op::Assign && !out_nodes.count(n)) add(n->id, "Assign must be a graph output (its write is a side effect)");
  }
  return out;
}

void verify_or_throw(const Graph& g, const std::string& context) {
  auto probs = verify(g);
  if (probs.empty()) return;
  Diagnostic d = probs[0];
  if (!context.empty()) d.message = context + ": " + d.message;
  if (probs.size() > 1) d.note = std::to_string(probs.size() - 1) + " more problem(s)";
  throw UserError(d);
}

}  // namespace lathe
