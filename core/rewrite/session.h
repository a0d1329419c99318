// session.h — rewrite sessions: apply rules step by step, travel in time, diff, check.
//
// A session owns a history of graphs: entry 0 is the graph it started from, entry k the
// graph after step k. Snapshots are cheap (nodes are immutable and shared). Navigation
// (back, seek) moves the current index; stepping from an earlier index drops the later
// entries, like an editor's undo.
//
//   step()      one rewrite: the first rule that applies, in rewriter.h's order
//               (nodes in topological order; rules by benefit, ruleset order, written order)
//   step(n)     up to n rewrites
//   run()       to a fixpoint. With batch=true (default), no breakpoints and check=false it
//               applies sweeps (rewriter.h): each sweep is ONE history entry of kind Sweep
//               listing how often each rule fired; otherwise it takes single steps.
//               Stops before a breakpoint rule fires; errors when a step returns the graph
//               to an earlier state (a cycle, naming the rules involved) or after
//               max_steps rewrites without a fixpoint.
//   apply_pass  a custom pass (Graph -> Graph), recorded like a step.
//
// Every step is verified (core/ir/verify.h; for rule steps and sweeps only the nodes the
// step added need checking — everything else is the already-verified previous graph); with check=true the reference interpreter
// runs the graph before and after on seeded random inputs. A throwing rule, an ill-typed
// replacement, a graph that fails to verify or a failing check throws UserError naming
// the step and the rule; the session stays at the graph before that step.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/rewrite/numeric_check.h"
#include "core/rewrite/rewriter.h"
#include "core/rewrite/rule.h"

namespace lathe {

struct SessionOptions {
  bool check = false;       // numeric check of every step (interpreter before/after)
  int max_steps = 100000;   // run(): rewrites allowed without reaching a fixpoint
  uint64_t seed = 0;        // seeds the checks' random inputs
  Bindings bindings;        // symbolic dims for checks; unbound dims are 3
  bool batch = true;        // run() may use sweeps (see above)
  Evaluator evaluate;       // what checks run; default: interpret()
};

enum class StepKind { Start, Rule, Sweep, Pass };
std::string_view step_kind_name(StepKind k);

struct StepInfo {
  int index = 0;                    // history index: 1 = the first step
  StepKind kind = StepKind::Start;
  std::string rule;                 // rule name, pass name, or "sweep"
  int root = -1;                    // Rule: the rewritten node's id; -1 otherwise
  int replacement = -1;             // Rule: the node that replaced it
  std::vector<int> removed, added;  // node ids that left / joined the graph
  int rebuilt = 0;                  // of those, users rebuilt with a new input (:diff's "changed"
                                    // pairs): the step line shows -(removed-rebuilt) +(added-rebuilt) ~rebuilt
  std::map<std::string, int> fired; // Sweep: rewrites per rule
  // One line for listings: "step 3: double %12 -> %15 (-1 +1 ~2)"
  std::string summary() const;
  // "-4 +2 ~18": nodes removed, added and rebuilt, as :diff counts them
  std::string change_counts() const;
  // The step as messages name it: "step 3 (rule 'swap' on %7)", "step 4 (sweep)", "step 5 (pass 'fold')"
  std::string label() const;
};

struct RunResult {
  enum class Stop { Fixpoint, Breakpoint };
  int steps = 0;             // history entries added by this run
  int rewrites = 0;          // rewrites applied (a sweep counts each)
  Stop stop = Stop::Fixpoint;
  std::string breakpoint_rule;  // Breakpoint: the rule about to fire
  int breakpoint_node = -1;     // Breakpoint: where
};

// Between two graphs (diff(a, b)). Walking both graphs from each output in lockstep, a
// pair of different nodes with the same op, attributes, dtype and shape is "changed"
// (typically a user rebuilt because an input was rewritten); the walk continues into
// their inputs. Nodes only in b and not a changed's new side are "added"; nodes only in
// a and not a changed's old side are "removed". Lists are in topological order.
struct GraphDiff {
  std::vector<NodeRef> added, removed;
  std::vector<std::pair<NodeRef, NodeRef>> changed;  // (in a, in b)
  std::string text() const;  // "+%15 Add f32[4]\n-%12 Mul f32[4]\n~%13 -> %16 Neg f32[4]\n"
};
GraphDiff diff_graphs(const Graph& a, const Graph& b);

struct CheckReport {
  bool ok = true;
  int bad_step = -1;         // the first step whose graph computes something else
  std::string rule;          // the rule (or pass / "sweep") of that step
  std::string message;       // what differs; for a sweep, the rule found by replaying it
};

using PassFn = std::function<Graph(const Graph&)>;

class RewriteSession {
 public:
  RewriteSession(Graph g, std::vector<Ruleset> rules, SessionOptions opts = {});
  RewriteSession(Graph g, Ruleset rules, SessionOptions opts = {});

  // Rewriting. step() returns nullopt at a fixpoint.
  std::optional<StepInfo> step();
  std::vector<StepInfo> step(int n);
  RunResult run();
  std::optional<StepInfo> apply_pass(const std::string& name, const PassFn& pass);  // nullopt: no change

  // Time travel.
  int current() const { return cur_; }                 // index of the graph shown
  int last() const { return static_cast<int>(entries_.size()) - 1 ; }  // SPEC's #s
  void back();                                         // UserError at step 0
  void seek(int k);                                    // UserError when out of range
  const Graph& graph() const { return entries_[cur_].graph; }
  const Graph& graph_at(int k) const;
  std::vector<StepInfo> history() const;               // steps 1..last()
  const StepInfo& info(int k) const;

  GraphDiff diff(int a, int b) const;

  // Steering.
  void breakpoint(const std::string& rule);            // UserError for an unknown rule
  void clear_breakpoint(const std::string& rule);
  const std::set<std::string>& breakpoints() const { return breakpoints_; }
  void set_enabled(const std::string& rule, bool on);  // disable / re-enable by name
  RuleStatsTable stats() const;                        // per rule name
  std::string stats_text() const;                      // a table, one rule per line
  // Why `rule` does not rewrite `node` (in the current graph): the deepest point where
  // its pattern failed, or that its where / replacement declined.
  std::string why(const std::string& rule, NodeRef node) const;
  const std::vector<Ruleset>& rulesets() const { return sets_; }
  const SessionOptions& options() const { return opts_; }

  // Without per-step checks: compares step 0 with the current step and, if they differ,
  // bisects the history to the first step that changed the result.
  CheckReport final_check();

 private:
  struct Entry {
    Graph graph;
    StepInfo info;
  };
  std::vector<Ruleset> sets_;
  SessionOptions opts_;
  RuleIndex index_;
  std::set<std::string> disabled_;
  std::set<std::string> breakpoints_;
  std::vector<RuleStats> stats_;  // by RuleIndex id
  std::vector<Entry> entries_;
  int cur_ = 0;
  bool paused_at_breakpoint_ = false;
  std::unique_ptr<NumericChecker> checker_;
  std::optional<TensorMap> cur_outputs_;  // checker outputs for graph() when check=true

  std::string last_failed_rule_;           // the rule whose step last failed a check
  struct Candidate {
    RewriteSite site;
    Graph graph;
    StepInfo info;
  };

  const Rule* rule_named(const std::string& name) const;  // UserError if unknown
  RewriteContext context(int step);
  // Verifies, checks and records a new graph as step cur_+1 (truncating the future).
  StepInfo commit(Graph g, StepInfo info);
  std::optional<Candidate> next_rewrite();  // the next single rewrite, not yet committed
  NumericChecker& checker();
  const TensorMap& outputs_of_current();
};

}  // namespace lathe
