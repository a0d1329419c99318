// runaway.cpp — RunawayGuard: cycle and growth detection for rewrite runs (see runaway.h).
#include "core/rewrite/runaway.h"

#include <algorithm>
#include <set>

#include "core/ir/diag.h"
#include "core/rewrite/session.h"

namespace lathe {

namespace {

size_t state_hash(const Graph& g) {
  size_t h = g.outputs.size();
  for (auto& [name, n] : g.outputs) h = h * 1000003u ^ std::hash<const void*>()(n);
  return h;
}

void add_rules(const StepInfo& s, std::set<std::string>& into) {
  if (s.kind == StepKind::Sweep) for (auto& [r, n] : s.fired) into.insert(r);
  else into.insert(s.rule);
}

}  // namespace

bool same_outputs(const Graph& a, const Graph& b) {
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (a.outputs[i].second != b.outputs[i].second) return false;
  return true;
}

std::string most_fired(const std::map<std::string, int>& fired) {
  std::vector<std::pair<int, std::string>> top;
  for (auto& [r, c] : fired) top.push_back({-c, r});
  std::sort(top.begin(), top.end());
  std::string names;
  for (size_t i = 0; i < top.size() && i < 3; ++i)
    names += (i ? ", '" : "'") + top[i].second + "' (" + std::to_string(-top[i].first) + "x)";
  return names;
}

RunawayGuard::RunawayGuard(const RewriteSession& s) : start_step_(s.current()) {
  for (int k = 0; k <= s.current(); ++k) seen_[state_hash(s.graph_at(k))].push_back({k, s.graph_at(k)});
  start_nodes_ = s.graph().size();
  limit_ = std::max(start_nodes_ * kGrowthFactor, start_nodes_ + kGrowthSlack);
}

int RunawayGuard::earlier_step(const Graph& g) const {
  auto it = seen_.find(state_hash(g));
  if (it == seen_.end()) return -1;
  for (const Seen& e : it->second)
    if (same_outputs(e.graph, g)) return e.step;
  return -1;
}

void RunawayGuard::note(const RewriteSession& s) { seen_[state_hash(s.graph())].push_back({s.current(), s.graph()}); }

std::string RunawayGuard::cycle_message(const RewriteSession& s, int earlier, const std::string& label,
                                        const std::vector<std::string>& closing_rules) {
  std::set<std::string> rules(closing_rules.begin(), closing_rules.end());
  for (int k = earlier + 1; k <= s.current(); ++k) add_rules(s.info(k), rules);
  std::string names;
  for (auto& r : rules) names += (names.empty() ? "'" : ", '") + r + "'";
  return "rewrite cycle: " + label + " brings back the graph of step " + std::to_string(earlier) + "; rules involved: " +
         names + ". Stopped at step " + std::to_string(s.current()) + "; disable one of them or add a where condition";
}

void RunawayGuard::check(const RewriteSession& s, const std::map<std::string, int>& fired) {
  const StepInfo& last = s.info(s.current());
  int k = earlier_step(s.graph());
  if (k >= 0 && k != s.current()) throw UserError(cycle_message(s, k, last.label(), {}));
  size_t n = s.graph().size();
  if (n > limit_) {
    throw UserError("runaway rewrite: the graph grew from " + std::to_string(start_nodes_) + " to " + std::to_string(n) +
                    " nodes in " + std::to_string(s.current() - start_step_) + " steps without a fixpoint; the rules firing most: " +
                    most_fired(fired) + ". A rule whose replacement contains its own pattern fires forever; stopped at step " +
                    std::to_string(s.current()));
  }
  note(s);
}

}  // namespace lathe
