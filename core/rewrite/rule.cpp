// rule.cpp — building rules, instantiating replacement templates, rule sets and the index.
#include "core/rewrite/rule.h"

#include <algorithm>

#include "core/ir/build.h"
#include "core/ir/diag.h"

namespace lathe {

namespace {

[[noreturn]] void template_error(const Pattern& t, const PatternNode& n, const std::string& rule, const std::string& msg) {
  Diagnostic d;
  d.file = "<replacement>";
  d.line = 1;
  d.col = n.begin + 1;
  d.source_line = t.source;
  d.message = "replacement of rule '" + rule + "': " + msg;
  throw UserError(d);
}

bool is_number(const PatternNode& n) { return n.kind == PatternKind::Number || n.kind == PatternKind::ConstBind; }

// Checks once, at rule creation, what instantiate() relies on.
void check_template(const Pattern& t, const PatternNode& n, const Pattern& pat, const std::string& rule, bool typed_from_outside) {
  switch (n.kind) {
    case PatternKind::Wildcard: template_error(t, n, rule, "'_' cannot appear in a replacement (what would it build?)");
    case PatternKind::Bind:
      if (pat.slot_of(n.name) < 0)
        template_error(t, n, rule, "'" + n.name + "' is not bound by the pattern " + pat.source);
      return;
    case PatternKind::Number: case PatternKind::ConstBind:
      if (n.kind == PatternKind::ConstBind && pat.slot_of(n.name) < 0)
        template_error(t, n, rule, "'" + n.name + "' is not bound by the pattern " + pat.source);
      if (!typed_from_outside) template_error(t, n, rule, "cannot tell the dtype and shape of this constant here");
      return;
    case PatternKind::OpNode: break;
  }
  OpCategory cat = op_info(n.op).category;
  bool ok = cat == OpCategory::Unary || cat == OpCategory::Binary || cat == OpCategory::Ternary ||
            cat == OpCategory::Reduce || n.op == Op::Copy;
  if (!ok)
    template_error(t, n, rule, std::string(op_name(n.op)) + " cannot be built from a template; use a function replacement");
  if (n.op == Op::Cast && !n.dtype) template_error(t, n, rule, "Cast in a replacement needs its target: Cast{dtype=\"f32\"}(x)");
  if (n.op == Op::Reduce && (!n.reduce || !n.axes))
    template_error(t, n, rule, "Reduce in a replacement needs op and axes: Reduce{op=\"add\", axes=[1]}(x)");
  bool has_typed_sibling = std::any_of(n.args.begin(), n.args.end(), [](const PatternNode& a) { return !is_number(a); });
  for (size_t i = 0; i < n.args.size(); ++i) {
    bool typed = false;
    if (cat == OpCategory::Unary && n.op != Op::Cast) typed = typed_from_outside;
    else if (n.op == Op::Copy) typed = typed_from_outside;
    else if (cat == OpCategory::Binary) typed = has_typed_sibling || (typed_from_outside && n.op != Op::CmpLT && n.op != Op::CmpNE);
    else if (cat == OpCategory::Ternary) typed = i == 0 ? typed_from_outside || has_typed_sibling : has_typed_sibling || typed_from_outside;
    check_template(t, n.args[i], pat, rule, typed);
  }
}

struct TypeHint {
  DType dtype;
  const Shape* shape;
};

class TemplateBuilder {
 public:
  TemplateBuilder(const Rule& r, const Match& m) : r_(r), m_(m) {}

  NodeRef build(const PatternNode& n, std::optional<TypeHint> hint) {
    switch (n.kind) {
      case PatternKind::Bind: return m_.nodes[r_.template_slots[n.slot]];
      case PatternKind::Number: return prim::constant(n.number, hint->dtype, *hint->shape);
      case PatternKind::ConstBind: return prim::constant(m_.values[r_.template_slots[n.slot]], hint->dtype, *hint->shape);
      case PatternKind::Wildcard: break;
      case PatternKind::OpNode: return build_op(n, hint);
    }
    LATHE_CHECK(false, "template was validated by make_rule");
  }

 private:
  const Rule& r_;
  const Match& m_;

  // Non-constant operands first; constants then take the type of their first sibling.
  std::vector<NodeRef> build_args(const PatternNode& n, std::optional<TypeHint> outside, size_t first_value_arg) {
    std::vector<NodeRef> args(n.args.size(), nullptr);
    std::optional<TypeHint> sibling;
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (is_number(n.args[i])) continue;
      args[i] = build(n.args[i], std::nullopt);
      if (i >= first_value_arg && !sibling) sibling = TypeHint{args[i]->dtype, &args[i]->shape};
    }
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (args[i]) continue;
      std::optional<TypeHint> h = (i >= first_value_arg && sibling) ? sibling : outside;
      if (i < first_value_arg && h) h = TypeHint{DType::Bool, h->shape};  // Where's condition
      if (!h && sibling) h = sibling;
      args[i] = build(n.args[i], h);
    }
    return args;
  }

  NodeRef build_op(const PatternNode& n, std::optional<TypeHint> hint) {
    OpCategory cat = op_info(n.op).category;
    if (n.op == Op::Cast) return prim::cast(build(n.args[0], std::nullopt), *n.dtype);
    if (n.op == Op::Copy) return prim::copy(build(n.args[0], hint));
    if (cat == OpCategory::Unary) return prim::unary(n.op, build(n.args[0], hint));
    if (cat == OpCategory::Reduce) return prim::reduce(*n.reduce, build(n.args[0], std::nullopt), *n.axes);
    if (cat == OpCategory::Binary) {
      bool cmp = n.op == Op::CmpLT || n.op == Op::CmpNE;
      auto args = build_args(n, cmp ? std::nullopt : hint, 0);
      return prim::binary(n.op, args[0], args[1]);
    }
    auto args = build_args(n, hint, 1);  // Where(c, a, b)
    return prim::where(args[0], args[1], args[2]);
  }
};

}  // namespace

NodeRef Rule::build_replacement(const Match& m) const {
  if (callback) return callback(m);
  TypeHint root{m.root->dtype, &m.root->shape};
  return TemplateBuilder(*this, m).build(replacement->root, root);
}

std::string Rule::replacement_text() const { return replacement ? replacement->source : "<function>"; }

static Rule rule_skeleton(std::string name, std::string_view pattern, RuleOptions& opts) {
  if (name.empty()) throw UserError("a rule needs a name");
  Rule r;
  r.name = std::move(name);
  r.pattern = parse_pattern(pattern, "pattern of rule '" + r.name + "'");
  r.where = std::move(opts.where);
  r.benefit = opts.benefit;
  return r;
}

Rule make_rule(std::string name, std::string_view pattern, std::string_view replacement, RuleOptions opts) {
  Rule r = rule_skeleton(std::move(name), pattern, opts);
  Pattern t = parse_pattern(replacement, "replacement of rule '" + r.name + "'");
  check_template(t, t.root, r.pattern, r.name, true);
  for (auto& nm : t.names) r.template_slots.push_back(r.pattern.slot_of(nm));
  r.replacement = std::move(t);
  return r;
}

Rule make_rule(std::string name, std::string_view pattern, ReplaceFn replacement, RuleOptions opts) {
  Rule r = rule_skeleton(std::move(name), pattern, opts);
  if (!replacement) throw UserError("rule '" + r.name + "' needs a replacement");
  r.callback = std::move(replacement);
  return r;
}

Ruleset::Ruleset(std::string name, std::vector<Rule> rules) : name_(std::move(name)) {
  for (auto& r : rules) add(std::move(r));
}

void Ruleset::add(Rule r) {
  if (find(r.name)) throw UserError("ruleset '" + name_ + "' already has a rule named '" + r.name + "'");
  rules_.push_back(std::make_shared<const Rule>(std::move(r)));
}

const Rule* Ruleset::find(std::string_view rule_name) const {
  for (auto& r : rules_) if (r->name == rule_name) return r.get();
  return nullptr;
}

void Ruleset::set_enabled(std::string_view rule_name, bool on) {
  if (!find(rule_name)) throw UserError("ruleset '" + name_ + "' has no rule named '" + std::string(rule_name) + "'");
  if (on) disabled_.erase(std::string(rule_name));
  else disabled_.insert(std::string(rule_name));
}

RuleIndex::RuleIndex(const std::vector<Ruleset>& sets, const std::set<std::string>& also_disabled) {
  std::vector<Entry> enabled;
  for (auto& s : sets)
    for (auto& r : s.rules()) {
      keep_alive_.push_back(r);
      if (s.enabled(r->name) && !also_disabled.count(r->name)) enabled.push_back({r.get(), static_cast<int>(all_.size())});
      all_.push_back(r.get());
    }
  std::stable_sort(enabled.begin(), enabled.end(), [](const Entry& a, const Entry& b) { return a.rule->benefit > b.rule->benefit; });
  for (const Entry& e : enabled) {
    const Rule* r = e.rule;
    const PatternNode& root = r->pattern.root;
    for (int o = 0; o < kNumOps; ++o) {
      Op op = static_cast<Op>(o);
      bool fits = false;
      switch (root.kind) {
        case PatternKind::Wildcard: case PatternKind::Bind: fits = true; break;
        case PatternKind::Number: case PatternKind::ConstBind: fits = op == Op::Const || op == Op::View; break;
        case PatternKind::OpNode: fits = op == root.op; break;
      }
      if (fits) by_op_[o].push_back(e);
    }
  }
}

int RuleIndex::id_of(const Rule* r) const {
  for (size_t i = 0; i < all_.size(); ++i) if (all_[i] == r) return static_cast<int>(i);
  return -1;
}

const Rule* RuleIndex::find(std::string_view name) const {
  for (const Rule* r : all_) if (r->name == name) return r;
  return nullptr;
}

}  // namespace lathe
