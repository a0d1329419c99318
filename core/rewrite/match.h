// match.h — matching a Pattern against a node: bindings, and why a match failed.
//
// Matching is a small backtracking search over (pattern, node) goals: commutative ops
// (is_commutative) try both operand orders, and a name bound twice must be bound to the
// same node (pointer equality, which hash-consing makes structural equality). Numbers and
// Const(a) accept a scalar constant (a Const without tensor data, or a one-element tensor
// literal) and the same seen through a broadcast View (all strides 0, no mask).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/node.h"
#include "core/rewrite/pattern.h"

namespace lathe {

// What a successful match exposes to `where` predicates, replacement templates and
// callbacks (the Lua layer turns it into the table `m`: m.x, m.a, m.dtype, m.shape, m.root).
struct Match {
  NodeRef root = nullptr;
  const Pattern* pattern = nullptr;
  std::vector<NodeRef> nodes;        // by slot (Pattern::names); for Const(a): the constant node
  std::vector<double> values;        // by slot; meaningful where has_value
  std::vector<uint8_t> has_value;    // 1 for names bound by Const(a)

  NodeRef node(std::string_view name) const;               // nullptr if `name` is not bound
  std::optional<double> value(std::string_view name) const;  // Const(a) values only
  const std::vector<std::string>& names() const { return pattern->names; }
  DType dtype() const { return root->dtype; }
  const Shape& shape() const { return root->shape; }
};

// True when `p` matches at `n`; fills `out` (reused across calls to avoid allocation).
bool match_pattern(const Pattern& p, NodeRef n, Match& out);

// Why `p` does not match at `n`, at the deepest point reached:
//   "at Mul(x, 2): operand 1 is %7 Const 3 f32[4], expected 2".
// Returns "" when it matches.
std::string explain_mismatch(const Pattern& p, NodeRef n);

// The value of a scalar constant, also seen through a broadcast View; nullopt otherwise.
std::optional<double> scalar_constant_value(NodeRef n);

// "%12 Add f32[4, 3]" / "%5 Const 3 f32[]": how messages name a node.
std::string describe_node(NodeRef n);

}  // namespace lathe
