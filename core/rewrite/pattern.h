// pattern.h — rewrite-rule patterns: parsed trees over primitive op names.
//
// Grammar (SPEC.md "Rules"; one pattern string, whitespace ignored):
//   pattern := '_'                          anything
//            | number                       a scalar constant of that value, also when a
//                                           broadcast View (all strides 0, no mask) of one
//            | name                         lower-case: binds any node; twice = same node
//            | 'Const' '(' (name|number|'_') ')'   Const(a) binds the constant's value to a
//            | OpName attrs? '(' pattern (',' pattern)* ')'
//            | OpName attrs?                (arity-0 ops only: Input, Const, Index)
//   attrs   := '{' key '=' value (',' key '=' value)* '}'
//   keys    := op="add|max|mul" (Reduce), axes=[1, 2] (Reduce), name="s" (Input, Extern),
//              axis=N (Index, Take), dtype="f32" (any op: the node's dtype)
// Op names are ops.def's primitive names; an unknown one is a UserError at its column with
// a suggestion. The same trees serve as replacement templates (rule.h), which use names
// bound by the pattern, numbers, and ops with their attributes.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/ops.h"

namespace lathe {

enum class PatternKind : uint8_t {
  Wildcard,   // _
  Number,     // 2, 0.5, -1
  Bind,       // x: any node, bound under `name`
  ConstBind,  // Const(a): a scalar constant whose value is bound under `name`
  OpNode,     // Op{attrs}(args…)
};

struct PatternNode {
  PatternKind kind = PatternKind::Wildcard;
  Op op = Op::Input;           // OpNode (and ConstBind: Op::Const)
  std::vector<PatternNode> args;
  std::string name;            // Bind, ConstBind
  int slot = -1;               // index of `name` in Pattern::names (Bind, ConstBind)
  double number = 0;           // Number
  bool has_args = false;       // OpNode written with parentheses
  // attribute constraints (OpNode)
  std::optional<ReduceOp> reduce;
  std::optional<std::vector<int>> axes;
  std::optional<std::string> attr_name;
  std::optional<int> axis;
  std::optional<DType> dtype;
  // where it was written: [begin, end) in Pattern::source (0-based)
  int begin = 0, end = 0;
};

struct Pattern {
  std::string source;              // the text as written
  PatternNode root;
  std::vector<std::string> names;  // bound names, in order of first appearance
  // The text of one sub-pattern, for messages ("Mul(x, 2)").
  std::string text_of(const PatternNode& n) const { return source.substr(n.begin, n.end - n.begin); }
  int slot_of(std::string_view name) const;  // -1 if not bound
  // The op a matching root must have; nullopt when any op can match (a name or `_`).
  std::optional<Op> root_op() const;
};

// Parses a pattern. `what` names it in errors ("pattern of rule 'double'"). Errors are
// UserError with the column, the pattern line and a caret.
Pattern parse_pattern(std::string_view text, const std::string& what = "pattern");

// A readable rendering of a number the way a user would write it (2, 0.5, -1, inf).
std::string format_number(double v);

}  // namespace lathe
