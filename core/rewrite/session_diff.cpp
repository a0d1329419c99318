// session_diff.cpp — what changed between two graphs, and one-line step summaries.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/rewrite/session.h"

namespace lathe {

std::string_view step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::Start: return "start";
    case StepKind::Rule: return "rule";
    case StepKind::Sweep: return "sweep";
    case StepKind::Pass: return "pass";
  }
  return "?";
}

std::string StepInfo::change_counts() const {
  std::string s = "-" + std::to_string(removed.size() - rebuilt) + " +" + std::to_string(added.size() - rebuilt);
  if (rebuilt > 0) s += " ~" + std::to_string(rebuilt);
  return s;
}

std::string StepInfo::label() const {
  std::string s = "step " + std::to_string(index);
  if (kind == StepKind::Rule) s += " (rule '" + rule + "' on %" + std::to_string(root) + ")";
  else if (kind == StepKind::Pass) s += " (pass '" + rule + "')";
  else if (kind == StepKind::Sweep) s += " (sweep)";
  return s;
}

std::string StepInfo::summary() const {
  std::string s = "step " + std::to_string(index) + ": ";
  switch (kind) {
    case StepKind::Start: return s + "start";
    case StepKind::Rule: s += rule + " %" + std::to_string(root) + " -> %" + std::to_string(replacement); break;
    case StepKind::Pass: s += "pass " + rule; break;
    case StepKind::Sweep: {
      s += "sweep";
      std::string parts;
      for (auto& [r, n] : fired) parts += (parts.empty() ? "" : ", ") + r + " x" + std::to_string(n);
      s += " [" + parts + "]";
      break;
    }
  }
  return s + " (" + change_counts() + ")";
}

namespace {
bool same_kind(NodeRef a, NodeRef b) {
  return a->op == b->op && a->dtype == b->dtype && a->shape == b->shape && a->inputs.size() == b->inputs.size() &&
         a->attrs == b->attrs;
}
}  // namespace

GraphDiff diff_graphs(const Graph& a, const Graph& b) {
  GraphDiff d;
  std::vector<NodeRef> na = a.toposort(), nb = b.toposort();
  std::unordered_set<NodeRef> in_a(na.begin(), na.end()), in_b(nb.begin(), nb.end());
  // Lockstep walk from outputs with the same name: pairs of rebuilt nodes are "changed".
  std::set<std::pair<NodeRef, NodeRef>> visited;
  std::unordered_set<NodeRef> changed_old, changed_new;
  std::vector<std::pair<NodeRef, NodeRef>> work;
  for (auto& [name, x] : a.outputs)
    if (NodeRef y = b.output(name)) work.push_back({x, y});
  while (!work.empty()) {
    auto [x, y] = work.back();
    work.pop_back();
    if (x == y || !visited.insert({x, y}).second) continue;
    if (in_b.count(x) || in_a.count(y) || !same_kind(x, y)) continue;  // a rewrite site, not a rebuild
    if (!changed_old.insert(x).second || !changed_new.insert(y).second) continue;
    d.changed.push_back({x, y});
    for (size_t i = 0; i < x->inputs.size(); ++i) work.push_back({x->inputs[i], y->inputs[i]});
  }
  for (NodeRef n : nb) if (!in_a.count(n) && !changed_new.count(n)) d.added.push_back(n);
  for (NodeRef n : na) if (!in_b.count(n) && !changed_old.count(n)) d.removed.push_back(n);
  // changed pairs in b's topological order
  std::unordered_map<NodeRef, size_t> pos;
  for (size_t i = 0; i < nb.size(); ++i) pos[nb[i]] = i;
  std::sort(d.changed.begin(), d.changed.end(), [&](auto& p, auto& q) { return pos[p.second] < pos[q.second]; });
  return d;
}

std::string GraphDiff::text() const {
  std::string s;
  auto line = [&](char c, NodeRef n) {
    s += c;
    s += describe_node(n);
    s += '\n';
  };
  for (NodeRef n : removed) line('-', n);
  for (NodeRef n : added) line('+', n);
  for (auto& [x, y] : changed) s += "~%" + std::to_string(x->id) + " -> " + describe_node(y) + "\n";
  return s;
}

}  // namespace lathe
