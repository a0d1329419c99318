// rewriter.cpp — rule application at a node, first-match search, substitution, sweeps.
#include "core/rewrite/rewriter.h"

#include <chrono>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

namespace {

// New nodes made while a rule runs are stamped with the step (restored on exit).
class StepProvenance {
 public:
  explicit StepProvenance(int step) : saved_(current_provenance().step) { current_provenance().step = step; }
  ~StepProvenance() { current_provenance().step = saved_; }

 private:
  int saved_;
};

std::string type_of(NodeRef n) { return std::string(dtype_name(n->dtype)) + shape_to_string(n->shape); }

std::string rule_at(const Rule& r, int step, NodeRef root) {
  return "rule '" + r.name + "' at step " + std::to_string(step) + " on " + describe_node(root);
}

// A scalar constant of the root's dtype (any shape with one element, e.g. the rank-0
// lathe.const(v, m.dtype)) is broadcast to the root's shape. Any other mismatch is an error:
// silently broadcasting computed values would hide wrong rules.
NodeRef fit_to_root(NodeRef rep, NodeRef root, const Rule& r, int step) {
  if (rep->dtype == root->dtype && rep->shape == root->shape) return rep;
  if (rep->dtype == root->dtype && shape_numel(rep->shape) == SymInt(1)) {
    if (auto v = scalar_constant_value(rep))
      return is_float(rep->dtype) ? prim::constant(*v, rep->dtype, root->shape)
                                  : prim::constant_int(static_cast<int64_t>(*v), rep->dtype, root->shape);
  }
  throw UserError(rule_at(r, step, root) + ": the replacement " + describe_node(rep) + " is " + type_of(rep) +
                  ", expected " + type_of(root) + " (a rewrite must keep the root's dtype and shape)");
}

using Clock = std::chrono::steady_clock;

}  // namespace

std::optional<RewriteSite> rewrite_at(NodeRef n, const RewriteContext& ctx) {
  thread_local Match m;  // reused: matching allocates nothing in the steady state
  const auto& cands = ctx.rules->candidates(n->op);
  for (const RuleIndex::Entry& e : cands) {
    const Rule* r = e.rule;
    if (ctx.only && r != ctx.only) continue;
    RuleStats* st = ctx.stats ? &(*ctx.stats)[e.id] : nullptr;
    auto t0 = st ? Clock::now() : Clock::time_point{};
    NodeRef rep = nullptr;
    bool matched = false;
    try {
      if (match_pattern(r->pattern, n, m) && (!r->where || r->where(m))) {
        matched = true;
        StepProvenance prov(ctx.step);
        rep = r->build_replacement(m);
      }
    } catch (const UserError& e) {
      Diagnostic d = e.diag();
      d.message = rule_at(*r, ctx.step, n) + ": " + d.message;
      throw UserError(d);
    } catch (const std::exception& e) {
      throw UserError(rule_at(*r, ctx.step, n) + ": " + e.what());
    }
    if (rep) {
      StepProvenance prov(ctx.step);
      rep = fit_to_root(rep, n, *r, ctx.step);
    }
    if (st) {
      st->tried++;
      st->matched += matched;
      st->seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (rep && rep != n) return RewriteSite{r, n, rep};
  }
  return std::nullopt;
}

std::vector<NodeRef> topo_order(const Graph& g) {
  // Same traversal as Graph::toposort (inputs, then outputs; iterative DFS post-order).
  std::vector<NodeRef> order;
  std::vector<uint8_t> done(node_store_size(), 0);
  std::vector<std::pair<NodeRef, size_t>> stack;
  auto visit = [&](NodeRef root) {
    if (done[root->id]) return;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        NodeRef c = n->inputs[i++];
        if (!done[c->id]) stack.push_back({c, 0});
        continue;
      }
      NodeRef fin = n;
      stack.pop_back();
      if (!done[fin->id]) {
        done[fin->id] = 1;
        order.push_back(fin);
      }
    }
  };
  for (NodeRef n : g.inputs) visit(n);
  for (auto& [name, n] : g.outputs) visit(n);
  return order;
}

std::optional<RewriteSite> find_first_rewrite(const Graph& g, const RewriteContext& ctx) {
  for (NodeRef n : topo_order(g))
    if (auto s = rewrite_at(n, ctx)) return s;
  return std::nullopt;
}

namespace {

// Rebuilds g bottom-up; replace(n, rebuilt) gives the final node for each (possibly
// rebuilt) node. Rebuilt users keep their composite path and get the step.
template <class F>
Graph rebuild(const Graph& g, int step, F&& replace) {
  std::vector<NodeRef> order = topo_order(g);
  std::vector<NodeRef> map(node_store_size(), nullptr);  // old id -> new node
  std::vector<NodeRef> ins;
  for (NodeRef n : order) {
    ins.clear();
    bool changed = false;
    for (NodeRef in : n->inputs) {
      NodeRef r = map[in->id];
      changed |= r != in;
      ins.push_back(r);
    }
    NodeRef cur = n;
    if (changed) cur = make_node(n->op, n->dtype, n->shape, ins, n->attrs, Provenance{n->prov.path, step, n->prov.backward});
    map[n->id] = replace(n, cur);
  }
  Graph out;
  for (NodeRef n : g.inputs) {
    NodeRef r = map[n->id] ? map[n->id] : n;
    if (r->op == Op::Input) out.inputs.push_back(r);
  }
  for (auto& [name, n] : g.outputs) out.outputs.push_back({name, map[n->id]});
  return out;
}

}  // namespace

NodeRef rebuild_node(NodeRef n, const std::vector<NodeRef>& inputs) {
  if (n->op == Op::View && inputs.size() == 1) return prim::view(inputs[0], *n->attrs.view);
  if (inputs == n->inputs) return n;
  return prim::build(n->op, n->dtype, n->shape, inputs, n->attrs);
}

Graph substitute(const Graph& g, const RewriteSite& site, int step) {
  return rebuild(g, step, [&](NodeRef old, NodeRef cur) { return old == site.root ? site.replacement : cur; });
}

SweepResult sweep(const Graph& g, const RewriteContext& ctx, int per_node_cap) {
  SweepResult res;
  std::vector<RewriteSite> chain;  // the rewrites at the current node, for cycle messages
  auto fail_cycle = [&](const std::string& why, const char* what = "rewrite cycle") {
    // the rules in firing order, a run of one rule written once with its count
    std::string rules;
    int shown = 0;
    for (size_t i = 0; i < chain.size();) {
      size_t j = i;
      while (j < chain.size() && chain[j].rule == chain[i].rule) ++j;
      if (++shown > 6) {
        rules += " -> …";
        break;
      }
      rules += (rules.empty() ? "'" : " -> '") + chain[i].rule->name + "'" + (j - i > 1 ? " (" + std::to_string(j - i) + "x)" : "");
      i = j;
    }
    throw UserError(std::string(what) + " at step " + std::to_string(ctx.step) + " on " + describe_node(chain.front().root) +
                    ": " + why + "; rules involved: " + rules);
  };
  res.graph = rebuild(g, ctx.step, [&](NodeRef, NodeRef cur) {
    chain.clear();
    NodeRef start = cur;
    while (auto s = rewrite_at(cur, ctx)) {
      chain.push_back(*s);
      if (s->replacement == start) fail_cycle("the node was rewritten back to an earlier form");
      for (auto& c : chain)
        if (c.root == s->replacement) fail_cycle("the node was rewritten back to an earlier form");
      if (static_cast<int>(chain.size()) > per_node_cap)
        fail_cycle("the node was still changing after " + std::to_string(per_node_cap) +
                       " rewrites (a rule whose replacement contains its own pattern fires forever)",
                   "runaway rewrite");
      cur = s->replacement;
    }
    for (auto& c : chain) {
      res.fired[c.rule->name]++;
      if (ctx.stats) (*ctx.stats)[ctx.rules->id_of(c.rule)].fired++;
    }
    res.rewrites += static_cast<int>(chain.size());
    return cur;
  });
  return res;
}

}  // namespace lathe
