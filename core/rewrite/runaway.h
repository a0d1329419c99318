// runaway.h — telling a rewrite run that will never end from one that is merely long, early
// and with one message: a step that brings back a graph seen earlier in the run (a cycle:
// rules that undo each other, `Mul(x, y) -> Mul(y, x)`), or a graph that keeps growing (a
// rule whose replacement contains its own pattern, `Exp2(x) -> x:exp()`). Used by
// RewriteSession::run() (s:run(), the REPL's :run, the app's Run) and by `lathe rewrite`,
// which steps one rewrite at a time to print each.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/graph.h"

namespace lathe {

class RewriteSession;
struct StepInfo;

// The same output nodes, in order: the same graph (nodes are hash-consed), whatever the
// outputs' names.
bool same_outputs(const Graph& a, const Graph& b);
// The three rules that fired most ("'swap' (40x), 'grow' (12x)"), for the messages of a run
// that does not end.
std::string most_fired(const std::map<std::string, int>& fired);

class RunawayGuard {
 public:
  // Watches from the session's current step on: its graph and those before it count as
  // seen; the growth limit is relative to the current graph's size.
  explicit RunawayGuard(const RewriteSession& s);

  // The step seen so far whose graph equals g (the same output nodes), or -1.
  int earlier_step(const Graph& g) const;
  // Records the session's current graph as seen (check() does this).
  void note(const RewriteSession& s);
  // After a step was committed: UserError when the session's graph repeats an earlier
  // step's or grew past the limit. `fired` counts this run's rewrites per rule (for the message).
  void check(const RewriteSession& s, const std::map<std::string, int>& fired);
  // The message for a step `label` (StepInfo::label: "step 3 (rule 'swap' on %7)") that brings
  // back step `earlier`.
  static std::string cycle_message(const RewriteSession& s, int earlier, const std::string& label,
                                   const std::vector<std::string>& closing_rules);

  // The graph may grow to max(kGrowthFactor × its size at the start, start + kGrowthSlack)
  // nodes during one run; more is a runaway.
  static constexpr size_t kGrowthFactor = 8, kGrowthSlack = 2000;
  size_t limit() const { return limit_; }

 private:
  struct Seen {
    int step;
    Graph graph;
  };
  std::unordered_map<size_t, std::vector<Seen>> seen_;
  size_t start_nodes_ = 0, limit_ = 0;
  int start_step_ = 0;
};

}  // namespace lathe
