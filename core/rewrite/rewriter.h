// rewriter.h — applying rules to graphs: one rewrite at a time, or a whole sweep.
//
// Every change goes through here (MLIR's "rewriter"): the replacement is built with
// current_provenance().step set to the step index (so new nodes remember the step that
// made them), checked to keep the root's dtype and shape, and substituted for the root
// in all its users, which are rebuilt bottom-up (hash-consing shares everything else).
//
// Order (deterministic): nodes are visited in Graph::toposort() order (inputs before
// users); at each node the candidate rules of its op (RuleIndex) are tried by decreasing
// benefit, then ruleset order, then written order. The first rule whose pattern matches,
// whose `where` holds and whose replacement is not nullptr and not the root itself fires.
//
// A sweep is the fast path run() uses: one bottom-up pass that rebuilds each node from
// its already-rewritten inputs and then rewrites it until no rule applies (like
// tinygrad's graph_rewrite). Each node is visited once, so a sweep is O(nodes × rules
// per op) instead of the O(nodes²) of one-rewrite-per-rebuild.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/rewrite/rule.h"

namespace lathe {

struct RuleStats {
  uint64_t tried = 0;    // pattern attempted at a node
  uint64_t matched = 0;  // pattern matched and `where` held
  uint64_t fired = 0;    // the rewrite was applied
  double seconds = 0;    // time spent matching and building replacements
};
using RuleStatsTable = std::map<std::string, RuleStats, std::less<>>;

// One candidate rewrite: `rule` turns `root` into `replacement`.
struct RewriteSite {
  const Rule* rule = nullptr;
  NodeRef root = nullptr;
  NodeRef replacement = nullptr;
};

struct RewriteContext {
  const RuleIndex* rules = nullptr;
  std::vector<RuleStats>* stats = nullptr;  // optional, indexed by RuleIndex::id_of
  int step = 0;                      // for provenance and messages
  const Rule* only = nullptr;        // when set, try just this rule (breakpoints, tests)
};

// Graph::toposort()'s order, computed with dense per-id marks (faster on big graphs).
std::vector<NodeRef> topo_order(const Graph& g);

// The first rule that rewrites node `n`, with its checked replacement; nullopt if none.
// Errors (a throwing callback or `where`, an ill-typed replacement) are UserError naming
// the rule, the step and the node.
std::optional<RewriteSite> rewrite_at(NodeRef n, const RewriteContext& ctx);

// The first rewrite in the graph's deterministic order; nullopt at a fixpoint.
std::optional<RewriteSite> find_first_rewrite(const Graph& g, const RewriteContext& ctx);

// The graph with `site.root` replaced by `site.replacement` in all its users.
Graph substitute(const Graph& g, const RewriteSite& site, int step);

// `n` rebuilt on other inputs, validated like any builder (UserError on bad operands).
// A View goes through prim::view, so View(View(x)) folds and an identity view vanishes.
// The Lua layer exposes it as node:with_inputs{…} (assets/rules/views.lua uses it).
NodeRef rebuild_node(NodeRef n, const std::vector<NodeRef>& inputs);

struct SweepResult {
  Graph graph;
  std::map<std::string, int> fired;  // per rule, in this sweep
  int rewrites = 0;
};
// One bottom-up pass (see above). A node rewritten more than `per_node_cap` times, or
// rewritten back to an earlier form, is a UserError naming the rules involved.
SweepResult sweep(const Graph& g, const RewriteContext& ctx, int per_node_cap = 64);

}  // namespace lathe
