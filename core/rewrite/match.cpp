// match.cpp — the backtracking matcher behind match_pattern and explain_mismatch.
#include "core/rewrite/match.h"

#include <cmath>

#include "core/runtime/host_tensor.h"

namespace lathe {

namespace {

// One thing still to check: pattern `p` at node `n`, reached as operand `operand` of
// `parent` (nullptr for the root).
struct Goal {
  const PatternNode* p;
  NodeRef n;
  const PatternNode* parent;
  int operand;
  int depth;
};

struct Failure {
  int depth = -1;
  std::string message;
};

class Matcher {
 public:
  Matcher(const Pattern& p, Match& m, Failure* why) : pat_(p), m_(m), why_(why) {}

  bool run(NodeRef n) {
    size_t k = pat_.names.size();
    m_.root = n;
    m_.pattern = &pat_;
    m_.nodes.assign(k, nullptr);
    m_.values.assign(k, 0.0);
    m_.has_value.assign(k, 0);
    goals_.clear();
    goals_.push_back({&pat_.root, n, nullptr, 0, 0});
    return solve();
  }

 private:
  const Pattern& pat_;
  Match& m_;
  Failure* why_;
  std::vector<Goal> goals_;

  // Records a failure (explain mode only); the message is built lazily.
  template <class F>
  void fail(const Goal& g, F&& make_message) {
    if (!why_ || g.depth <= why_->depth) return;
    why_->depth = g.depth;
    std::string where = g.parent ? pat_.text_of(*g.parent) : pat_.text_of(*g.p);
    std::string subject = g.parent ? "operand " + std::to_string(g.operand) + " is " + describe_node(g.n)
                                   : "the node is " + describe_node(g.n);
    why_->message = "at " + where + ": " + subject + ", " + make_message();
  }

  // Solves the remaining goals; on failure the goal stack and bindings are as on entry.
  bool solve() {
    if (goals_.empty()) return true;
    Goal g = goals_.back();
    goals_.pop_back();
    if (try_goal(g)) return true;
    goals_.push_back(g);
    return false;
  }

  bool bind_node(const Goal& g, int slot) {
    NodeRef& b = m_.nodes[slot];
    if (b && b != g.n) {
      fail(g, [&] { return "but " + pat_.names[slot] + " is already bound to " + describe_node(b) + " (same name = same node)"; });
      return false;
    }
    if (b) return solve();
    b = g.n;
    if (solve()) return true;
    b = nullptr;
    return false;
  }

  bool try_goal(const Goal& g) {
    const PatternNode& p = *g.p;
    switch (p.kind) {
      case PatternKind::Wildcard: return solve();
      case PatternKind::Bind: return bind_node(g, p.slot);
      case PatternKind::Number: {
        auto v = scalar_constant_value(g.n);
        bool ok = v && (*v == p.number || (std::isnan(*v) && std::isnan(p.number)));
        if (!ok) {
          fail(g, [&] { return "expected " + pat_.text_of(p); });
          return false;
        }
        return solve();
      }
      case PatternKind::ConstBind: {
        auto v = scalar_constant_value(g.n);
        if (!v) {
          fail(g, [&] { return "expected a scalar constant for Const(" + p.name + ")"; });
          return false;
        }
        int s = p.slot;
        if (m_.has_value[s] && m_.values[s] != *v) {
          fail(g, [&] { return "but " + p.name + " is already bound to " + format_number(m_.values[s]); });
          return false;
        }
        bool fresh = !m_.has_value[s];
        NodeRef prev = m_.nodes[s];
        m_.has_value[s] = 1;
        m_.values[s] = *v;
        if (!m_.nodes[s]) m_.nodes[s] = g.n;
        if (solve()) return true;
        if (fresh) m_.has_value[s] = 0;
        m_.nodes[s] = prev;
        return false;
      }
      case PatternKind::OpNode: return try_op(g);
    }
    return false;
  }

  bool try_op(const Goal& g) {
    const PatternNode& p = *g.p;
    NodeRef n = g.n;
    if (n->op != p.op) {
      fail(g, [&] { return "expected " + std::string(op_name(p.op)); });
      return false;
    }
    if (p.dtype && n->dtype != *p.dtype) {
      fail(g, [&] { return "expected dtype " + std::string(dtype_name(*p.dtype)) + " for " + pat_.text_of(p); });
      return false;
    }
    if (p.reduce && n->attrs.reduce != *p.reduce) {
      fail(g, [&] { return "reduce op is " + std::string(reduce_op_name(n->attrs.reduce)) + ", expected " +
                           std::string(reduce_op_name(*p.reduce)); });
      return false;
    }
    if (p.axes && n->attrs.axes != *p.axes) {
      fail(g, [&] {
        std::string s;
        for (int a : n->attrs.axes) s += (s.empty() ? "" : ", ") + std::to_string(a);
        return "reduces axes [" + s + "], expected those of " + pat_.text_of(p);
      });
      return false;
    }
    if (p.attr_name && n->attrs.name != *p.attr_name) {
      fail(g, [&] { return "name is '" + n->attrs.name + "', expected '" + *p.attr_name + "'"; });
      return false;
    }
    if (p.axis && n->attrs.axis != *p.axis) {
      fail(g, [&] { return "axis is " + std::to_string(n->attrs.axis) + ", expected " + std::to_string(*p.axis); });
      return false;
    }
    if (!p.has_args || p.args.empty()) return solve();
    if (p.args.size() != n->inputs.size()) {
      fail(g, [&] { return "has " + std::to_string(n->inputs.size()) + " inputs, expected " + std::to_string(p.args.size()); });
      return false;
    }
    size_t mark = goals_.size();
    auto push_args = [&](bool swapped) {
      for (size_t i = p.args.size(); i-- > 0;) {
        size_t in = swapped ? 1 - i : i;
        goals_.push_back({&p.args[i], n->inputs[in], &p, static_cast<int>(in), g.depth + 1});
      }
    };
    push_args(false);
    if (solve()) return true;
    goals_.resize(mark);
    if (is_commutative(p.op) && p.args.size() == 2 && n->inputs[0] != n->inputs[1]) {
      push_args(true);
      if (solve()) return true;
      goals_.resize(mark);
    }
    return false;
  }
};

}  // namespace

NodeRef Match::node(std::string_view name) const {
  int s = pattern ? pattern->slot_of(name) : -1;
  return s < 0 ? nullptr : nodes[s];
}

std::optional<double> Match::value(std::string_view name) const {
  int s = pattern ? pattern->slot_of(name) : -1;
  if (s < 0 || !has_value[s]) return std::nullopt;
  return values[s];
}

bool match_pattern(const Pattern& p, NodeRef n, Match& out) { return Matcher(p, out, nullptr).run(n); }

std::string explain_mismatch(const Pattern& p, NodeRef n) {
  Match m;
  Failure f;
  if (Matcher(p, m, &f).run(n)) return "";
  if (f.message.empty()) return "the pattern " + p.source + " does not match " + describe_node(n);
  return f.message;
}

std::optional<double> scalar_constant_value(NodeRef n) {
  if (n->op == Op::View) {
    const ViewSpec& v = *n->attrs.view;
    if (v.has_mask()) return std::nullopt;
    for (auto& s : v.strides) if (s != SymInt(0)) return std::nullopt;
    n = n->inputs[0];
  }
  if (n->op != Op::Const) return std::nullopt;
  if (!n->attrs.data) return n->const_value();
  if (n->attrs.data->numel() == 1) return n->attrs.data->get_f64(0);
  return std::nullopt;
}

std::string describe_node(NodeRef n) {
  std::string s = "%" + std::to_string(n->id) + " " + std::string(op_name(n->op));
  if (auto v = scalar_constant_value(n); v && n->op == Op::Const) s += " " + format_number(*v);
  return s + " " + std::string(dtype_name(n->dtype)) + shape_to_string(n->shape);
}

}  // namespace lathe
