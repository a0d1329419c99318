// base_offsets.cpp — see base_offsets.h.
#include "core/loop/base_offsets.h"

#include <limits>
#include <vector>

namespace lathe::loop {

namespace {

bool is_index(const ExprRef& e) { return e && e->lanes == 1 && e->dtype == DType::I64; }

// A flat index as (its terms but the constants, the sum of the constant terms of its tree of
// additions): ((i0*21 + 70) + i1) -> ((i0*21) + i1, 70). Constants under a product or a
// division stay where they are. `rest` is null when the index is a constant.
struct Split {
  ExprRef rest;
  int64_t c = 0;
};
Split split_index(const ExprRef& e) {
  if (!is_index(e)) return {e, 0};
  if (e->kind == ExprKind::Const) return {nullptr, e->i};
  if (e->kind != ExprKind::Binary || e->op != Op::Add || !is_index(e->args[0]) || !is_index(e->args[1])) return {e, 0};
  Split a = split_index(e->args[0]), b = split_index(e->args[1]);
  ExprRef rest = !a.rest ? b.rest : !b.rest ? a.rest : add(a.rest, b.rest);
  return {rest, a.c + b.c};
}
int64_t const_term(const ExprRef& idx) { return split_index(idx).c; }

void visit_loads(const ExprRef& e, const std::function<void(const ExprRef&)>& fn) {
  if (!e) return;
  if (e->kind == ExprKind::Load) fn(e);
  for (auto& a : e->args) visit_loads(a, fn);
}

// a flat index `by` elements lower, its constants gathered at the end, so that equal code at
// other offsets prints equal
ExprRef lowered(const ExprRef& idx, int64_t by) {
  Split s = split_index(idx);
  int64_t c = s.c - by;
  return s.rest ? add(s.rest, const_int(c)) : const_int(c);
}

// e with every load of a buffer in `shift` reading shift[buffer] elements lower.
ExprRef rewrite(const ExprRef& e, const std::vector<int64_t>& shift) {
  if (!e || e->args.empty()) return e;
  std::vector<ExprRef> args;
  bool changed = false;
  for (auto& a : e->args) {
    args.push_back(rewrite(a, shift));
    changed |= args.back() != a;
  }
  if (e->kind == ExprKind::Load && shift[e->buffer] != 0) {
    args[0] = lowered(args[0], shift[e->buffer]);
    changed = true;
  }
  return changed ? with_args(e, std::move(args)) : e;
}

}  // namespace

int hoist_base_offsets(LoopFunc& f) {
  if (f.kind == "extern" || f.body.empty()) return 0;
  const size_t n = f.buffers.size();
  std::vector<int64_t> lo(n, std::numeric_limits<int64_t>::max());
  std::vector<bool> stored(n, false);
  auto in_range = [&](int b) { return b >= 0 && static_cast<size_t>(b) < n; };
  walk(f.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::Store && in_range(s.buffer)) stored[s.buffer] = true;
    if (s.kind == StmtKind::Prefetch && in_range(s.buffer)) lo[s.buffer] = std::min(lo[s.buffer], const_term(s.index));
    return true;
  });
  walk_exprs(f.body, [&](const ExprRef& e) {
    visit_loads(e, [&](const ExprRef& ld) {
      if (in_range(ld->buffer)) lo[ld->buffer] = std::min(lo[ld->buffer], const_term(ld->args[0]));
    });
  });
  std::vector<int64_t> shift(n, 0);
  int moved = 0;
  for (size_t b = 0; b < n; ++b) {
    if (f.buffers[b].written || stored[b] || lo[b] == std::numeric_limits<int64_t>::max() || lo[b] <= 0) continue;
    shift[b] = lo[b];
    ++moved;
  }
  if (!moved) return 0;
  walk(f.body, [&](Stmt& s) {
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
      if (*e) *e = rewrite(*e, shift);
    if (s.kind == StmtKind::Prefetch && shift[s.buffer] != 0) s.index = lowered(s.index, shift[s.buffer]);  // a read-only buffer's
    return true;
  });
  for (size_t b = 0; b < n; ++b) f.buffers[b].offset += shift[b];
  return moved;
}

}  // namespace lathe::loop
