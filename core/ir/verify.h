// verify.h — the graph verifier: runs after every change (rewrite step, pass, import).
//
// Checks each node's arity, dtypes, shapes and attributes (prim::check_node), that Assign
// targets are graph inputs and Assigns are outputs, that input names are unique, and that
// every output exists. Returns the problems found; each names the node and what was
// expected. An empty list means the graph is well-formed. (Acyclicity holds by
// construction: nodes are immutable and can only refer to older nodes; the text parser
// reports a forward reference as a use before definition.)
#pragma once
#include <vector>

#include "core/ir/diag.h"
#include "core/ir/graph.h"

namespace lathe {

std::vector<Diagnostic> verify(const Graph& g);
// Throws UserError with the first problem (and a count of the rest).
void verify_or_throw(const Graph& g, const std::string& context = "");

}  // namespace lathe
