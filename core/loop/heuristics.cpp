// heuristics.cpp — apply_default_schedule: the schedule a kernel gets unless the user
// writes one. Outer loops go parallel over the cores when there is enough work (small
// outer loops are fused first so every core gets rows); innermost loops are vectorized.
// Windowed and strided reductions first get rows of accumulators (row_reduce.h).
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/row_reduce.h"
#include "core/loop/transform.h"

namespace lathe::loop {

namespace {

int64_t const_extent(const Stmt& s) { return is_const(s.extent) ? s.extent->i : -1; }

// the chain of perfectly nested output loops starting at the kernel's first top-level loop
std::vector<Stmt*> outer_chain(std::vector<Stmt>& body) {
  std::vector<Stmt*> chain;
  Stmt* cur = nullptr;
  for (auto& s : body)
    if (s.kind == StmtKind::For) { cur = &s; break; }
  while (cur && cur->reduces.empty()) {
    chain.push_back(cur);
    if (cur->body.size() != 1 || cur->body[0].kind != StmtKind::For) break;
    cur = &cur->body[0];
  }
  return chain;
}

}  // namespace

void apply_default_schedule(LoopFunc& f, const ScheduleOptions& opts) {
  if (f.kind == "matmul" || f.kind == "attention" || f.kind == "attention_bwd") return;  // lowering chose the blocked schedule
  if (is_depthwise(f)) return;                                // and the direct depthwise nest
  int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // total work of the loop nest (unknown extents count as large)
  auto work_of = [&] {
    int64_t work = 1;
    walk(f.body, [&](Stmt& s) {
      if (s.kind != StmtKind::For) return true;
      int64_t e = const_extent(s);
      work = e < 0 ? (int64_t)1 << 40 : std::min<int64_t>(work * std::max<int64_t>(e, 1), (int64_t)1 << 40);
      return true;
    });
    return work;
  };
  // reductions that do not run along contiguous memory: rows of accumulators (row_reduce.h),
  // split over the cores when the row loop is the one that goes parallel
  apply_row_reductions(f, work_of() >= opts.min_parallel_work ? threads : 1);
  auto chain = outer_chain(f.body);
  if (!chain.empty() && threads > 1) {
    int64_t work = work_of();
    if (work >= opts.min_parallel_work) {
      // fuse small outer loops so that the parallel loop has enough iterations
      while (chain.size() >= 2 && const_extent(*chain[0]) >= 0 && const_extent(*chain[0]) < 4 * threads) {
        try {
          fuse(f, chain[0]->var, chain[1]->var);
        } catch (const UserError&) {
          break;
        }
        chain = outer_chain(f.body);
      }
      if (!chain.empty()) {
        try {
          parallel(f, chain[0]->var);
        } catch (const UserError&) {
        }
      }
    }
  }
  // vectorize innermost loops
  std::vector<std::string> leaves;
  walk(f.body, [&](const Stmt& s) {
    if (s.kind != StmtKind::For) return true;
    bool inner = false;
    walk(s.body, [&](const Stmt& c) { inner |= c.kind == StmtKind::For; return !inner; });
    int64_t e = const_extent(s);
    if (!inner && (e < 0 || e >= 4) && s.note != kEdgeNote) leaves.push_back(s.var);
    return true;
  });
  for (auto& v : leaves) {
    try {
      vectorize(f, v);
    } catch (const UserError&) {
    }
  }
}

}  // namespace lathe::loop
