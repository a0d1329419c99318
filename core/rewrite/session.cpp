// session.cpp — RewriteSession: stepping, running to a fixpoint, time travel, steering.
// (Diffs and step summaries: session_diff.cpp; final_check's bisection: session_check.cpp.)
#include "core/rewrite/session.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/ir/verify.h"
#include "core/rewrite/runaway.h"

namespace lathe {

namespace {

// The verifier restricted to what a rewrite can break: the nodes it added (the rest of the
// graph is the verified previous step), plus the graph-level rules about them.
std::vector<Diagnostic> verify_added(const Graph& g, const std::vector<NodeRef>& added) {
  std::vector<Diagnostic> out;
  auto add = [&](NodeRef n, std::string msg) {
    Diagnostic d;
    d.node = n ? static_cast<int>(n->id) : -1;
    d.message = std::move(msg);
    out.push_back(std::move(d));
  };
  for (auto& [name, n] : g.outputs) if (!n) add(nullptr, "output '" + name + "' has no node");
  for (NodeRef n : added) {
    std::string e = prim::check_node(n->op, n->dtype, n->shape, n->inputs, n->attrs);
    if (!e.empty()) add(n, e);
    if (n->op == Op::Input && std::find(g.inputs.begin(), g.inputs.end(), n) == g.inputs.end())
      add(n, "Input '" + n->attrs.name + "' is not declared as a graph input");
    if (n->op == Op::Assign) {
      bool is_output = false;
      for (auto& [name, o] : g.outputs) is_output |= o == n;
      if (!is_output) add(n, "Assign must be a graph output (its write is a side effect)");
    }
  }
  return out;
}

}  // namespace

RewriteSession::RewriteSession(Graph g, std::vector<Ruleset> rules, SessionOptions opts)
    : sets_(std::move(rules)), opts_(std::move(opts)), index_(sets_), stats_(index_.all().size()) {
  verify_or_throw(g, "rewrite session: the starting graph");
  Entry e;
  e.graph = std::move(g);
  entries_.push_back(std::move(e));
  if (opts_.max_steps < 1) throw UserError("rewrite session: max_steps must be at least 1");
  if (opts_.check) {
    try {
      outputs_of_current();
    } catch (const UserError& err) {
      throw UserError("rewrite session with check=true: cannot run the starting graph: " + err.diag().message);
    }
  }
}

RewriteSession::RewriteSession(Graph g, Ruleset rules, SessionOptions opts)
    : RewriteSession(std::move(g), std::vector<Ruleset>{std::move(rules)}, std::move(opts)) {}

const Rule* RewriteSession::rule_named(const std::string& name) const {
  if (const Rule* r = index_.find(name)) return r;
  std::string known;
  for (const Rule* r : index_.all()) known += (known.empty() ? "" : ", ") + r->name;
  throw UserError("no rule named '" + name + "' in this session (rules: " + (known.empty() ? "none" : known) + ")");
}

RewriteContext RewriteSession::context(int step) {
  RewriteContext c;
  c.rules = &index_;
  c.stats = &stats_;
  c.step = step;
  return c;
}

NumericChecker& RewriteSession::checker() {
  if (!checker_) checker_ = std::make_unique<NumericChecker>(entries_[0].graph, opts_.seed, opts_.bindings, opts_.evaluate);
  return *checker_;
}

const TensorMap& RewriteSession::outputs_of_current() {
  if (!cur_outputs_) cur_outputs_ = checker().run(graph());
  return *cur_outputs_;
}

StepInfo RewriteSession::commit(Graph g, StepInfo info) {
  info.index = cur_ + 1;
  std::vector<NodeRef> old_nodes = topo_order(graph()), new_nodes = topo_order(g);
  std::vector<uint8_t> mark(node_store_size(), 0);  // 1: in old, 2: in new
  for (NodeRef n : old_nodes) mark[n->id] |= 1;
  for (NodeRef n : new_nodes) mark[n->id] |= 2;
  std::vector<NodeRef> added;
  for (NodeRef n : old_nodes) if (mark[n->id] == 1) info.removed.push_back(static_cast<int>(n->id));
  for (NodeRef n : new_nodes)
    if (mark[n->id] == 2) {
      info.added.push_back(static_cast<int>(n->id));
      added.push_back(n);
    }
  info.rebuilt = static_cast<int>(diff_graphs(graph(), g).changed.size());  // counted as :diff counts
  auto problems = info.kind == StepKind::Pass ? verify(g) : verify_added(g, added);
  if (!problems.empty()) {
    last_failed_rule_ = info.rule;
    Diagnostic d = problems[0];
    d.message = info.label() + ": the rewritten graph does not verify: " + d.message;
    throw UserError(d);
  }
  std::optional<TensorMap> outs;
  if (opts_.check) {
    const TensorMap& before = outputs_of_current();
    try {
      outs = checker().run(g);
    } catch (const UserError& e) {
      last_failed_rule_ = info.rule;
      throw UserError(info.label() + ": check failed: the interpreter cannot run the rewritten graph: " +
                      e.diag().message + "; the session stays at step " + std::to_string(cur_));
    }
    std::string why = checker().compare(before, *outs);
    if (!why.empty()) {
      last_failed_rule_ = info.rule;
      throw UserError(info.label() + ": check failed: " + why + "; the session stays at step " + std::to_string(cur_));
    }
  }
  entries_.resize(cur_ + 1);
  entries_.push_back(Entry{std::move(g), info});
  cur_ = info.index;
  cur_outputs_ = std::move(outs);
  paused_at_breakpoint_ = false;
  return info;
}

std::optional<RewriteSession::Candidate> RewriteSession::next_rewrite() {
  int idx = cur_ + 1;
  auto site = find_first_rewrite(graph(), context(idx));
  if (!site) return std::nullopt;
  Candidate c;
  c.site = *site;
  c.graph = substitute(graph(), *site, idx);
  c.info.index = idx;
  c.info.kind = StepKind::Rule;
  c.info.rule = site->rule->name;
  c.info.root = static_cast<int>(site->root->id);
  c.info.replacement = static_cast<int>(site->replacement->id);
  return c;
}

std::optional<StepInfo> RewriteSession::step() {
  auto c = next_rewrite();
  if (!c) return std::nullopt;
  StepInfo info = commit(std::move(c->graph), c->info);
  stats_[index_.id_of(c->site.rule)].fired++;
  return info;
}

std::vector<StepInfo> RewriteSession::step(int n) {
  std::vector<StepInfo> out;
  for (int i = 0; i < n; ++i) {
    auto s = step();
    if (!s) break;
    out.push_back(std::move(*s));
  }
  return out;
}

RunResult RewriteSession::run() {
  RunResult res;
  bool batch = opts_.batch && !opts_.check && breakpoints_.empty();
  RunawayGuard guard(*this);  // cycles (an earlier graph again) and unbounded growth
  std::map<std::string, int> fired_this_run;
  auto cycle_error = [&](int earlier, const StepInfo& closing) {
    std::vector<std::string> closing_rules;
    if (closing.kind == StepKind::Sweep) for (auto& [r, n] : closing.fired) closing_rules.push_back(r);
    else closing_rules.push_back(closing.rule);
    std::string msg = RunawayGuard::cycle_message(*this, earlier, closing.label(), closing_rules);
    throw UserError("run: " + msg.replace(msg.find(". Stopped at step"), std::string::npos,
                                          ". The session stays at step " + std::to_string(cur_) +
                                              "; disable one of them or add a where condition"));
  };
  while (true) {
    if (res.rewrites >= opts_.max_steps) {
      throw UserError("run: no fixpoint after " + std::to_string(res.rewrites) + " rewrites (max_steps = " +
                      std::to_string(opts_.max_steps) + "); the rules firing most: " + most_fired(fired_this_run) +
                      ". Look for rules that keep growing the graph, or raise max_steps");
    }
    if (batch) {
      int idx = cur_ + 1;
      SweepResult sr = sweep(graph(), context(idx));
      if (sr.rewrites == 0) break;
      StepInfo info;
      info.index = idx;
      info.kind = StepKind::Sweep;
      info.rule = "sweep";
      info.fired = sr.fired;
      if (int k = guard.earlier_step(sr.graph); k >= 0) cycle_error(k, info);
      commit(std::move(sr.graph), info);
      for (auto& [r, n] : sr.fired) fired_this_run[r] += n;
      res.rewrites += sr.rewrites;
    } else {
      auto c = next_rewrite();
      if (!c) break;
      if (breakpoints_.count(c->info.rule) && !paused_at_breakpoint_) {
        paused_at_breakpoint_ = true;
        res.stop = RunResult::Stop::Breakpoint;
        res.breakpoint_rule = c->info.rule;
        res.breakpoint_node = c->info.root;
        return res;
      }
      if (int k = guard.earlier_step(c->graph); k >= 0) cycle_error(k, c->info);
      commit(std::move(c->graph), c->info);
      stats_[index_.id_of(c->site.rule)].fired++;
      fired_this_run[c->info.rule]++;
      res.rewrites++;
    }
    res.steps++;
    guard.check(*this, fired_this_run);  // growth (a repeat was refused before the commit)
  }
  paused_at_breakpoint_ = false;
  return res;
}

std::optional<StepInfo> RewriteSession::apply_pass(const std::string& name, const PassFn& pass) {
  StepInfo info;
  info.index = cur_ + 1;
  info.kind = StepKind::Pass;
  info.rule = name;
  Graph g;
  try {
    ProvenanceContext& pc = current_provenance();
    int saved = pc.step;
    pc.step = info.index;
    try {
      g = pass(graph());
    } catch (...) {
      pc.step = saved;
      throw;
    }
    pc.step = saved;
  } catch (const UserError& e) {
    throw UserError(info.label() + ": " + e.diag().message);
  } catch (const std::exception& e) {
    throw UserError(info.label() + ": " + e.what());
  }
  if (g.outputs.empty() && !graph().outputs.empty())
    throw UserError(info.label() + ": the pass returned a graph without outputs");
  if (same_outputs(g, graph()) && g.inputs == graph().inputs) return std::nullopt;
  return commit(std::move(g), info);
}

void RewriteSession::back() {
  if (cur_ == 0) throw UserError("back: already at step 0 (the starting graph)");
  seek(cur_ - 1);
}

void RewriteSession::seek(int k) {
  if (k < 0 || k > last())
    throw UserError("seek: step " + std::to_string(k) + " does not exist (steps 0.." + std::to_string(last()) + ")");
  if (k != cur_) cur_outputs_.reset();
  cur_ = k;
  paused_at_breakpoint_ = false;
}

const Graph& RewriteSession::graph_at(int k) const {
  if (k < 0 || k > last())
    throw UserError("step " + std::to_string(k) + " does not exist (steps 0.." + std::to_string(last()) + ")");
  return entries_[k].graph;
}

const StepInfo& RewriteSession::info(int k) const {
  graph_at(k);
  return entries_[k].info;
}

std::vector<StepInfo> RewriteSession::history() const {
  std::vector<StepInfo> h;
  for (size_t k = 1; k < entries_.size(); ++k) h.push_back(entries_[k].info);
  return h;
}

GraphDiff RewriteSession::diff(int a, int b) const { return diff_graphs(graph_at(a), graph_at(b)); }

void RewriteSession::breakpoint(const std::string& rule) { breakpoints_.insert(rule_named(rule)->name); }

void RewriteSession::clear_breakpoint(const std::string& rule) {
  rule_named(rule);
  breakpoints_.erase(rule);
}

void RewriteSession::set_enabled(const std::string& rule, bool on) {
  rule_named(rule);
  if (on) disabled_.erase(rule);
  else disabled_.insert(rule);
  index_ = RuleIndex(sets_, disabled_);
}

RuleStatsTable RewriteSession::stats() const {
  RuleStatsTable t;
  for (size_t i = 0; i < index_.all().size(); ++i) t[index_.all()[i]->name] = stats_[i];
  return t;
}

std::string RewriteSession::stats_text() const {
  std::ostringstream os;
  os << "rule                      tried    matched      fired    time ms\n";
  for (const Rule* r : index_.all()) {
    const RuleStats& s = stats_[index_.id_of(r)];
    char line[160];
    std::snprintf(line, sizeof line, "%-22s %8llu %10llu %10llu %10.3f\n", r->name.c_str(),
                  static_cast<unsigned long long>(s.tried), static_cast<unsigned long long>(s.matched),
                  static_cast<unsigned long long>(s.fired), s.seconds * 1e3);
    os << line;
  }
  return os.str();
}

std::string RewriteSession::why(const std::string& rule, NodeRef node) const {
  const Rule* r = rule_named(rule);
  if (!node) throw UserError("why: no node given");
  std::string head = "rule '" + r->name + "' on " + describe_node(node) + ": ";
  bool enabled = !disabled_.count(r->name);
  for (auto& s : sets_) if (s.find(r->name) && !s.enabled(r->name)) enabled = false;
  if (!enabled) return head + "the rule is disabled";
  std::string note;
  auto nodes = graph().toposort();
  if (std::find(nodes.begin(), nodes.end(), node) == nodes.end())
    note = " (note: this node is not in the graph at step " + std::to_string(cur_) + ")";
  std::string miss = explain_mismatch(r->pattern, node);
  if (!miss.empty()) return head + miss + note;
  Match m;
  match_pattern(r->pattern, node, m);
  try {
    if (r->where && !r->where(m)) return head + "the pattern " + r->pattern.source + " matches, but its where condition is false" + note;
    NodeRef rep = r->build_replacement(m);
    if (!rep) return head + "the pattern matches, but the replacement function returned nil (no rewrite)" + note;
    if (rep == node) return head + "the pattern matches, but the replacement is the node itself (no change)" + note;
    return head + "the rule applies: it would become " + describe_node(rep) + note;
  } catch (const std::exception& e) {
    return head + "the pattern matches, but the rule fails: " + e.what() + note;
  }
}

}  // namespace lathe
