// heuristics.cpp — apply_default_schedule: the schedule a kernel gets unless the user
// writes one. Outer loops go parallel over the cores when there is enough work (small
// outer loops are fused first so every core gets rows); innermost loops are vectorized.
// Windowed and strided reductions first get rows of accumulators (row_reduce.h).
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/row_reduce.h"
#include "core/loop/lower.h"
#include "core/loop/transform.h"
#include "core/loop/transform_jam.h"
#include "core/loop/unswitch.h"

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

// Coefficients (of a, of b) of an integer expression affine in loop vars a and b (other
// vars and loads not mentioning them count as constants); nullopt where it is not.
std::optional<std::pair<int64_t, int64_t>> affine_ab(const ExprRef& e, const std::string& a, const std::string& b) {
  if (!mentions(e, a) && !mentions(e, b)) return std::make_pair<int64_t, int64_t>(0, 0);
  if (e->lanes != 1 || !is_int(e->dtype)) return std::nullopt;
  if (e->kind == ExprKind::Var) return e->name == a ? std::make_pair<int64_t, int64_t>(1, 0) : std::make_pair<int64_t, int64_t>(0, 1);
  if (e->kind != ExprKind::Binary || (e->op != Op::Add && e->op != Op::Mul)) return std::nullopt;
  auto l = affine_ab(e->args[0], a, b), r = affine_ab(e->args[1], a, b);
  if (!l || !r) return std::nullopt;
  if (e->op == Op::Add) return std::make_pair(l->first + r->first, l->second + r->second);
  for (int side = 0; side < 2; ++side) {  // c · (affine)
    const ExprRef& c = e->args[side];
    const auto& t = side ? *l : *r;
    if (is_const(c)) return std::make_pair(c->i * t.first, c->i * t.second);
  }
  return std::nullopt;
}

// Whether every use of a and b in e sits in an affine term c·(E·a + b): with a = 0 and b
// running over E·extent(a), each such term keeps its value.
bool collapsible(const ExprRef& e, const std::string& a, const std::string& b, int64_t E) {
  if (!mentions(e, a) && !mentions(e, b)) return true;
  if (auto ab = affine_ab(e, a, b); ab && ab->first == E * ab->second) return true;
  if (e->kind == ExprKind::Var) return false;
  for (const auto& x : e->args)
    if (x && !collapsible(x, a, b, E)) return false;
  return true;
}

// The (parent, leaf) pairs that collapse_short_rows and unroll_tiny_rows rewrite: a loop
// whose body is one innermost loop, neither of them parallel or an edge loop, neither reducing
// (unless `same_reductions` and both reduce the same accumulators with the same op), the leaf
// not yet vectorized; nested pairs first (a pair's parent after its own body). `fn` checks the
// pair's extents and accesses and rewrites it (true) or leaves it (false); it may replace the
// parent. Returns the number rewritten.
int for_row_pairs(std::vector<Stmt>& body, const std::function<bool(Stmt& parent, Stmt& leaf)>& fn,
                  bool same_reductions = false) {
  int n = 0;
  for (auto& s : body) {
    if (s.kind != StmtKind::For && s.kind != StmtKind::If) continue;
    n += for_row_pairs(s.body, fn, same_reductions) + for_row_pairs(s.else_body, fn, same_reductions);
    if (s.kind != StmtKind::For || s.body.size() != 1 || s.body[0].kind != StmtKind::For) continue;
    Stmt& leaf = s.body[0];
    bool inner = false;
    walk(leaf.body, [&](const Stmt& c) { inner |= c.kind == StmtKind::For; return !inner; });
    // two reduction loops of the same accumulators pass where the caller asks (a global average
    // pool's 7 x 7 map: one vectorized sum of 49, not 7 sums of 7 that LLVM left scalar)
    const bool same_reduction =
        same_reductions && !s.reduces.empty() && s.reduces == leaf.reduces && s.reduce_op == leaf.reduce_op;
    if (inner || s.annot.parallel || leaf.annot.parallel ||
        ((!s.reduces.empty() || !leaf.reduces.empty()) && !same_reduction) || leaf.annot.vectorize ||
        s.note == kEdgeNote || leaf.note == kEdgeNote)
      continue;
    if (fn(s, leaf)) ++n;
  }
  return n;
}

// Short innermost rows (a 14×14 map's 14) under a loop that steps over whole rows of the same
// buffers: one loop over both, so the vectorized loop runs full vectors (196 = 24 × 8 + 4,
// not 14 = 8 + 6 per row). Only when every access collapses (none reads by row alone, as a
// per-channel scale would along the channel loop); never into the parallel loop.
constexpr int64_t kCollapseBelow = 64;
// LATHE_COLLAPSE_REDUCE_ROWS=0: short reduction rows stay apart (A/B runs; read at each
// schedule, so a test can set it)
bool collapse_reductions() {
  const char* e = std::getenv("LATHE_COLLAPSE_REDUCE_ROWS");
  return !(e && std::string(e) == "0");
}
int collapse_short_rows(std::vector<Stmt>& body, std::vector<std::string>& log) {
  return for_row_pairs(body, [&](Stmt& s, Stmt& leaf) {
    int64_t ea = const_extent(s), eb = const_extent(leaf);
    if (ea < 2 || eb < 1 || eb >= kCollapseBelow) return false;
    bool ok = true;
    walk_exprs(leaf.body, [&](const ExprRef& e) { ok = ok && collapsible(e, s.var, leaf.var, eb); });
    if (!ok) return false;
    log.push_back("collapse rows " + s.var + " " + leaf.var + " -> " + leaf.var + " (" + std::to_string(ea * eb) + ")");
    Stmt row = std::move(leaf);
    substitute(row.body, s.var, const_int(0));
    row.extent = const_int(ea * eb);
    row.note = s.note + " × " + row.note;
    s = std::move(row);
    return true;
  }, collapse_reductions());
}

// A tiny innermost loop (2 to 8 iterations) that writes the innermost output axis under a
// parent of at least 16 iterations, out[E·a + b] (the interleaved phases of a Resize, a stack on a new last axis), is
// unrolled in the loop IR: its body copied per value of b with b folded (the copies' locals
// renamed), so the parent becomes the innermost loop and is vectorized (LLVM: contiguous
// loads per phase, interleaved stores) where before the tiny loop ran scalar, one element
// per step. (A 7 × 7 map's rows stay: a parent of 7 fills no vector.)
// LATHE_UNROLL_TINY_ROWS=0: off.
constexpr int64_t kTinyRowMax = 8;
int unroll_tiny_rows(std::vector<Stmt>& body, std::vector<std::string>& log) {
  return for_row_pairs(body, [&](Stmt& s, Stmt& leaf) {
    int64_t ea = const_extent(s), eb = const_extent(leaf);
    if (ea < 2 * kTinyRowMax || eb < 2 || eb > kTinyRowMax) return false;
    bool ok = true, stores = false;
    walk(leaf.body, [&](const Stmt& c) {
      if (c.kind == StmtKind::Store) {
        auto ab = affine_ab(c.index, s.var, leaf.var);
        stores = true;
        ok = ok && ab && ab->first == eb && ab->second == 1;
      } else if (c.kind != StmtKind::Let && c.kind != StmtKind::If) {
        ok = false;
      }
      return ok;
    });
    if (!ok || !stores) return false;
    std::vector<Stmt> flat;
    for (int64_t v = 0; v < eb; ++v) {
      std::vector<Stmt> copy = leaf.body;
      substitute(copy, leaf.var, const_int(v));
      std::vector<std::pair<std::string, DType>> lets;
      walk(copy, [&](const Stmt& c) {
        if (c.kind == StmtKind::Let) lets.emplace_back(c.var, c.dtype);
        return true;
      });
      for (const auto& let : lets) {
        const std::string& name = let.first;
        DType dt = let.second;
        std::string renamed = name + "_u" + std::to_string(v);
        walk(copy, [&](Stmt& c) {
          if (c.kind == StmtKind::Let && c.var == name) c.var = renamed;
          return true;
        });
        substitute(copy, name, var(renamed, dt));
      }
      for (auto& c : copy) flat.push_back(std::move(c));
    }
    log.push_back("unroll row " + leaf.var + " (" + std::to_string(eb) + ") into " + s.var);
    s.body = std::move(flat);
    return true;
  });
}

// Short f32 rows (32 or more) whose length the vector width does not divide (a softmax over 77): the
// compiler's loop interleaves 4 vectors and runs the remainder scalar (13 of 77, each exp
// ~25 scalar instructions: more time than the 64 in vectors). Such a loop is peeled: whole
// vectors of the host's width (peel_lanes: 16 on AVX-512, where the row runs in half the
// steps: softmax-77 one thread 0.047 -> 0.035 ms on Zen 5; 8 on AVX2), then one masked vector
// (peel ... masked). A row under 4 of those vectors takes 8 lanes. Only where the interleaved
// loop's scalar remainder would be over 1/8 of the row; LATHE_PEEL_ROWS=0 turns it off.
void peel_short_rows(LoopFunc& f, const std::vector<std::string>& vectorized) {
  if (const char* e = std::getenv("LATHE_PEEL_ROWS"); e && std::string(e) == "0") return;
  for (const auto& b : f.buffers)
    if (b.dtype != DType::F32) return;  // other element types get other vector widths
  // the extent of each loop, and whether it sits inside a reduction loop (a row of 7 inside a
  // 7 × 7 window sum: each peeled step would fold its vector horizontally; measured slower)
  std::map<std::string, std::pair<int64_t, bool>> info;
  std::function<void(const std::vector<Stmt>&, bool)> scan = [&](const std::vector<Stmt>& body, bool in_reduce) {
    for (const Stmt& s : body) {
      if (s.kind == StmtKind::For) info[s.var] = {const_extent(s), in_reduce};
      scan(s.body, in_reduce || (s.kind == StmtKind::For && !s.reduces.empty()));
      scan(s.else_body, in_reduce);
    }
  };
  scan(f.body, false);
  for (const auto& v : vectorized) {
    auto it = info.find(v);
    if (it == info.end()) continue;
    auto [e, in_reduce] = it->second;
    constexpr int64_t kW = 8;
    // at least 4 vectors (a shorter row is not interleaved: softmax over 13, 1 vector + 5
    // scalar, measured 3% faster than 1 + a masked 5), and an interleaved remainder over 1/8
    if (in_reduce || e < 4 * kW || e % kW == 0 || (e % (4 * kW)) * 8 <= e) continue;
    try {
      peel(f, v, e >= 4 * peel_lanes() ? peel_lanes() : kW, true);
    } catch (const UserError&) {
    }
  }
}

// Short reduced rows (a softmax over 77: per row a max pass, an exp-and-sum pass and a scale
// pass, each a few vectors and a horizontal reduction long) are one chain of dependent steps
// per row, which the core overlaps little with the next row's. R rows jammed (jam: each pass
// runs R rows' copies in one loop) give it R independent chains: softmax-77 one thread on
// Zen 5 0.035 -> 0.024 ms with R = 4 (16 lanes), 0.047 -> 0.037 ms with 8 lanes. R = 4, else 2,
// where it divides the row loop; else the row loop is fused with its parent first (12 × 77 =
// 924 rows = 4 × 231). Only f32 kernels whose row loop holds nothing but innermost loops of
// constant extent up to kJamRowMax, at least one a reduction. LATHE_JAM_ROWS=0 turns it off.
constexpr int64_t kJamRowMax = 256;
void jam_short_rows(LoopFunc& f) {
  if (const char* e = std::getenv("LATHE_JAM_ROWS"); e && std::string(e) == "0") return;
  for (const auto& b : f.buffers)
    if (b.dtype != DType::F32) return;
  // the row loop: an output loop whose body's loops are innermost, short, constant, one a reduction
  auto is_row_loop = [](const Stmt& s) {
    if (s.kind != StmtKind::For || !s.reduces.empty() || const_extent(s) < 2) return false;
    bool reduces = false, ok = true;
    for (const Stmt& c : s.body) {
      if (c.kind == StmtKind::If || c.kind == StmtKind::Alloc) return false;
      if (c.kind != StmtKind::For) continue;
      int64_t e = const_extent(c);
      ok &= e >= 1 && e <= kJamRowMax;
      reduces |= !c.reduces.empty();
      walk(c.body, [&](const Stmt& x) { ok &= x.kind != StmtKind::For; return ok; });
    }
    return ok && reduces;
  };
  // (parent loop or null, row loop)
  Stmt* row = nullptr;
  Stmt* parent = nullptr;
  std::function<void(std::vector<Stmt>&, Stmt*)> find = [&](std::vector<Stmt>& body, Stmt* up) {
    for (Stmt& s : body) {
      if (row) return;
      if (s.kind != StmtKind::For) continue;
      if (is_row_loop(s)) {
        row = &s, parent = up;
        return;
      }
      if (s.reduces.empty()) find(s.body, &s);
    }
  };
  find(f.body, nullptr);
  if (!row) return;
  auto factor = [](int64_t e) { return e % 4 == 0 ? 4 : e % 2 == 0 ? 2 : 0; };
  std::string v = row->var;
  if (!factor(const_extent(*row))) {
    // fuse with the parent when that makes an even row count (a perfect nest of two loops)
    if (!parent || parent->body.size() != 1 || const_extent(*parent) < 1 || !factor(const_extent(*parent) * const_extent(*row)))
      return;
    LoopFunc backup = f;
    try {
      fuse(f, parent->var, v);
    } catch (const UserError&) {
      f = std::move(backup);
      return;
    }
    v = f.schedule_log.back().substr(f.schedule_log.back().rfind("-> ") + 3);
  }
  int64_t e = -1;
  walk(f.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For && s.var == v) e = const_extent(s);
    return e < 0;
  });
  if (int r = factor(e)) {
    LoopFunc backup = f;
    try {
      jam(f, v, r);
    } catch (const UserError&) {
      f = std::move(backup);
    }
  }
}

}  // namespace

int64_t peel_lanes() {
  const char* e = std::getenv("LATHE_PEEL_LANES");
  if (e && std::string(e) == "8") return 8;
  static const int64_t host = host_matmul_params().lanes >= 16 ? 16 : 8;
  return host;
}

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
  jam_short_rows(f);
  // vectorize innermost loops, short rows first collapsed with their parents
  if (!(getenv("LATHE_COLLAPSE_ROWS") && std::string(getenv("LATHE_COLLAPSE_ROWS")) == "0"))
    while (collapse_short_rows(f.body, f.schedule_log) > 0) {
    }
  if (!(getenv("LATHE_UNROLL_TINY_ROWS") && std::string(getenv("LATHE_UNROLL_TINY_ROWS")) == "0"))
    unroll_tiny_rows(f.body, f.schedule_log);
  std::vector<std::string> leaves;
  walk(f.body, [&](const Stmt& s) {
    if (s.kind != StmtKind::For) return true;
    bool inner = false;
    walk(s.body, [&](const Stmt& c) { inner |= c.kind == StmtKind::For; return !inner; });
    int64_t e = const_extent(s);
    if (!inner && (e < 0 || e >= 4) && s.note != kEdgeNote) leaves.push_back(s.var);
    return true;
  });
  std::vector<std::string> vectorized;
  for (auto& v : leaves) {
    try {
      vectorize(f, v);
      vectorized.push_back(v);
    } catch (const UserError&) {
    }
  }
  peel_short_rows(f, vectorized);
  // conditions on one outer loop's variable (a concat's input, a pad's border): one copy of the
  // body per version, with the inner loops free of them (unswitch.h)
  unswitch_invariant_guards(f);
}

}  // namespace lathe::loop
