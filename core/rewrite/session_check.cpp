// session_check.cpp — final_check(): compare the first and current graphs numerically and
// bisect the history to the first step that changed the result.
#include "core/ir/diag.h"
#include "core/rewrite/session.h"

namespace lathe {

CheckReport RewriteSession::final_check() {
  NumericChecker& c = checker();
  auto run_step = [&](int k) {
    try {
      return c.run(entries_[k].graph);
    } catch (const UserError& e) {
      throw UserError("final check: the interpreter cannot run the graph of step " + std::to_string(k) + ": " +
                      e.diag().message);
    }
  };
  TensorMap ref = run_step(0);
  CheckReport rep;
  if (cur_ == 0 || c.compare(ref, run_step(cur_)).empty()) return rep;
  // Invariant: step lo computes the reference result, step hi does not.
  int lo = 0, hi = cur_;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (c.compare(ref, run_step(mid)).empty()) lo = mid;
    else hi = mid;
  }
  const StepInfo& bad = entries_[hi].info;
  rep.ok = false;
  rep.bad_step = hi;
  rep.rule = bad.rule;
  std::string what = c.compare(run_step(hi - 1), run_step(hi));
  rep.message = "step " + std::to_string(hi) + " (" + std::string(step_kind_name(bad.kind)) + " '" + bad.rule + "'" +
                (bad.root >= 0 ? " on %" + std::to_string(bad.root) : "") + ") changed the result: " + what;
  if (bad.kind == StepKind::Sweep) {
    // A sweep applied many rewrites: replay it one rewrite at a time, checking each.
    SessionOptions o = opts_;
    o.check = true;
    o.batch = false;
    o.bindings = c.bindings();
    RewriteSession replay(entries_[hi - 1].graph, sets_, o);
    for (auto& r : disabled_) replay.set_enabled(r, false);
    try {
      replay.run();
      rep.message += "; replaying the sweep one rewrite at a time did not reproduce it";
    } catch (const UserError& e) {
      rep.rule = replay.last_failed_rule_.empty() ? rep.rule : replay.last_failed_rule_;
      rep.message += "; replaying the sweep one rewrite at a time: " + e.diag().message;
    }
  }
  return rep;
}

}  // namespace lathe
