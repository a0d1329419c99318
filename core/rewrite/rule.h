// rule.h — rewrite rules, rule sets, and the index of rules by root op.
//
// A rule is (name, pattern, replacement, where?, benefit). The replacement is either a
// template — a pattern over the names the pattern binds, e.g. "Add(x, x)" — or a
// callback returning the new node (nullptr = "no rewrite"; the Lua layer wraps Lua
// functions into one). A number in a template becomes a Const shaped like its sibling
// operand (or like the root when it has none); the root's dtype and shape must be kept
// (a callback may return a one-element scalar constant: it is broadcast to the root).
//
// Application order (documented for users, see session.h): rules are tried in order of
// decreasing benefit, then in ruleset order, then in the order they were written.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/rewrite/match.h"
#include "core/rewrite/pattern.h"

namespace lathe {

using ReplaceFn = std::function<NodeRef(const Match&)>;
using WherePredicate = std::function<bool(const Match&)>;

struct RuleOptions {
  WherePredicate where;   // the rule fires only where this returns true
  int benefit = 1;        // higher is tried first (MLIR's PatternBenefit)
};

struct Rule {
  std::string name;
  Pattern pattern;
  std::optional<Pattern> replacement;  // template form
  std::vector<int> template_slots;     // template slot -> pattern slot
  ReplaceFn callback;                  // function form
  WherePredicate where;
  int benefit = 1;

  // Builds the replacement for a match (after `where` passed). nullptr = no rewrite.
  // Throws what callbacks throw and UserError from the prim:: builders.
  NodeRef build_replacement(const Match& m) const;
  // "Add(x, x)" or "<function>": how listings show the right-hand side.
  std::string replacement_text() const;
};

// Builds a rule. Pattern and template errors are UserError with the column and a caret,
// naming the rule; a template may use only names its pattern binds.
Rule make_rule(std::string name, std::string_view pattern, std::string_view replacement, RuleOptions opts = {});
Rule make_rule(std::string name, std::string_view pattern, ReplaceFn replacement, RuleOptions opts = {});

// A named, ordered list of rules. Copies share the rules (they are immutable).
class Ruleset {
 public:
  Ruleset() = default;
  explicit Ruleset(std::string name, std::vector<Rule> rules = {});

  const std::string& name() const { return name_; }
  void add(Rule r);                                  // UserError on a duplicate name
  const std::vector<std::shared_ptr<const Rule>>& rules() const { return rules_; }
  const Rule* find(std::string_view rule_name) const;  // nullptr if absent
  size_t size() const { return rules_.size(); }

  // Disabled rules stay listed but never fire (MLIR's "disable patterns by name").
  void set_enabled(std::string_view rule_name, bool on);  // UserError if unknown
  bool enabled(std::string_view rule_name) const { return !disabled_.count(std::string(rule_name)); }

 private:
  std::string name_;
  std::vector<std::shared_ptr<const Rule>> rules_;
  std::set<std::string> disabled_;
};

// The enabled rules of several rule sets, bucketed by the op their pattern's root needs
// (tinygrad's "rule tables indexed by root op"), each bucket in application order.
class RuleIndex {
 public:
  RuleIndex() = default;
  RuleIndex(const std::vector<Ruleset>& sets, const std::set<std::string>& also_disabled = {});
  struct Entry {
    const Rule* rule;
    int id;  // position in all()
  };
  const std::vector<Entry>& candidates(Op op) const { return by_op_[static_cast<size_t>(op)]; }
  const Rule* find(std::string_view name) const;  // any rule, enabled or not
  const std::vector<const Rule*>& all() const { return all_; }
  // Dense id of a rule (its position in all()), for per-rule tables; -1 if unknown.
  int id_of(const Rule* r) const;

 private:
  std::array<std::vector<Entry>, kNumOps> by_op_;
  std::vector<const Rule*> all_;
  std::vector<std::shared_ptr<const Rule>> keep_alive_;
};

}  // namespace lathe
