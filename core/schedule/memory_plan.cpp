// memory_plan.cpp — plan_memory: lifetime-based arena packing plus in-place updates.
#include "core/schedule/memory_plan.h"

#include "core/ir/diag.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

namespace lathe {

namespace {

constexpr int64_t kAlign = 64;

std::string mib(int64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return s;
}

// Does kernel `f` read param `p` only at the element it stores (so it may overwrite it)?
bool reads_only_in_place(const loop::LoopFunc& f, int p) {
  std::string store_key;
  int stores = 0;
  loop::walk(f.body, [&](const loop::Stmt& s) {
    if (s.kind == loop::StmtKind::Store) {
      ++stores;
      store_key = loop::expr_key(s.index);
    }
    return true;
  });
  if (stores != 1) return false;
  bool ok = true, any = false;
  std::function<void(const loop::ExprRef&)> visit = [&](const loop::ExprRef& e) {
    if (e->kind == loop::ExprKind::Load && e->buffer == p) {
      any = true;
      if (loop::expr_key(e->args[0]) != store_key || e->lanes != 1) ok = false;
    }
    for (auto& a : e->args) visit(a);
  };
  loop::walk_exprs(f.body, visit);
  return ok && any;
}

}  // namespace

bool arena_stagger() {
  const char* e = std::getenv("LATHE_ARENA_STAGGER");
  return e && std::string(e) == "1";
}

// Power-of-two feature maps packed end to end all start at the same offset modulo 4 KiB
// (the same L1 sets, and the store-to-load 4K-alias check) and modulo 64 KiB (the same sets
// of a 512 KiB 8-way L2): a kernel reading one and writing another then fights itself for
// those sets. Each large buffer instead starts at its own phase: the n-th one at n * 1088
// bytes (17 lines) past a multiple of P, P = 64 KiB for buffers of 512 KiB or more and 4 KiB
// for those of 16 KiB or more (the pad at most 1/8 of the buffer); smaller ones are not moved.
// Off by default (LATHE_ARENA_STAGGER=1): not yet shown to pay (see arena_alloc.h).
std::pair<int64_t, int64_t> stagger_of(int64_t bytes, int& count) {
  int64_t period = bytes >= (int64_t(512) << 10) ? int64_t(64) << 10 : bytes >= (int64_t(16) << 10) ? 4096 : 1;
  if (period == 1) return {1, 0};
  int64_t phase = (int64_t(++count) * 1088) % period;
  return {period, phase};
}

std::string MemoryPlan::summary() const {
  return "intermediates " + mib(unshared_bytes) + " in a " + mib(arena_bytes) + " arena; peak " +
         mib(arena_bytes + io_bytes) + " with inputs and outputs";
}

MemoryPlan plan_memory(const KernelGraph& kg, const std::vector<loop::LoopFunc>& funcs, const Bindings& dims) {
  size_t nb = kg.buffers.size();
  MemoryPlan plan;
  plan.offset.assign(nb, -1);
  plan.bytes.assign(nb, 0);
  plan.in_place_of.assign(nb, -1);
  for (size_t b = 0; b < nb; ++b) {
    int64_t n = 1;
    for (auto& d : kg.buffers[b].shape) n *= d.eval(dims).value_or(0);
    plan.bytes[b] = n * static_cast<int64_t>(dtype_size(kg.buffers[b].dtype));
    if (kg.buffers[b].kind != BufferKind::Intermediate) plan.io_bytes += plan.bytes[b];
  }
  // lifetimes of intermediates: [first kernel writing, last kernel reading]
  std::vector<int> first(nb, -1), last(nb, -1);
  for (auto& k : kg.kernels) {
    if (first[k.output] < 0) first[k.output] = k.id;
    last[k.output] = std::max(last[k.output], k.id);
    for (int b : k.inputs) last[b] = std::max(last[b], k.id);
  }
  // operands placed inside a concat's output (operand_place.h): the concat kernel no longer
  // copies them, so they must live there; the output lives from the first operand's writing
  std::vector<int> inside(nb, -1);
  std::vector<int64_t> inside_at(nb, 0);
  std::vector<bool> holds(nb, false);
  for (auto& k : kg.kernels) {
    if (k.id >= (int)funcs.size()) continue;
    for (auto& pl : funcs[k.id].placed) {
      const int x = funcs[k.id].buffers[static_cast<size_t>(pl.param)].buffer, y = k.output;
      inside[x] = y;
      inside_at[x] = pl.at * static_cast<int64_t>(dtype_size(kg.buffers[y].dtype));
      holds[y] = true;
      LATHE_CHECK(kg.buffers[x].kind == BufferKind::Intermediate && kg.buffers[y].kind == BufferKind::Intermediate &&
                      inside_at[x] >= 0 && inside_at[x] + plan.bytes[x] <= plan.bytes[y],
                  "memory plan: a placed operand outside its concat's output");
    }
  }
  for (size_t x = 0; x < nb; ++x)
    if (inside[x] >= 0 && first[x] >= 0) {
      const int y = inside[x];
      first[y] = first[y] < 0 ? first[x] : std::min(first[y], first[x]);
      last[y] = std::max(last[y], last[x]);
    }
  // in place: kernel k's output takes over an input whose life ends at k
  std::vector<int> group(nb);
  for (size_t b = 0; b < nb; ++b) group[b] = (int)b;
  for (auto& k : kg.kernels) {
    if (kg.buffers[k.output].kind != BufferKind::Intermediate || k.id >= (int)funcs.size()) continue;
    if (inside[k.output] >= 0 || holds[k.output]) continue;
    const loop::LoopFunc& f = funcs[k.id];
    for (size_t p = 1; p < f.buffers.size(); ++p) {
      int in = f.buffers[p].buffer;
      if (kg.buffers[in].kind != BufferKind::Intermediate || last[in] != k.id || group[in] != in) continue;
      if (inside[in] >= 0 || holds[in]) continue;
      if (plan.bytes[in] != plan.bytes[k.output] || !reads_only_in_place(f, (int)p)) continue;
      group[k.output] = in;
      plan.in_place_of[k.output] = in;
      last[in] = std::max(last[in], last[k.output]);
      break;
    }
  }
  // greedy packing of groups, largest first
  std::vector<int> roots;
  for (size_t b = 0; b < nb; ++b)
    if (kg.buffers[b].kind == BufferKind::Intermediate) {
      plan.unshared_bytes += plan.bytes[b];
      if (group[b] == (int)b && first[b] >= 0 && inside[b] < 0) roots.push_back((int)b);
    }
  std::sort(roots.begin(), roots.end(), [&](int a, int b) { return plan.bytes[a] > plan.bytes[b]; });
  struct Placed { int64_t off, size; int lo, hi; };
  std::vector<Placed> placed;
  const bool stagger = arena_stagger();
  int staggered = 0;
  for (int b : roots) {
    int64_t size = (plan.bytes[b] + kAlign - 1) / kAlign * kAlign;
    // where the buffer starts within a period P of the arena (stagger_of): the first offset
    // at or after `at` that is `phase` past a multiple of P
    int64_t period = 1, phase = 0;
    if (stagger) std::tie(period, phase) = stagger_of(size, staggered);
    auto start_at = [&](int64_t at) { return at + ((phase - at) % period + period) % period; };
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (auto& p : placed)
      if (!(p.hi < first[b] || last[b] < p.lo)) busy.push_back({p.off, p.off + p.size});
    std::sort(busy.begin(), busy.end());
    int64_t off = start_at(0);
    for (auto& [lo, hi] : busy) {
      if (off + size <= lo) break;
      off = start_at(std::max(off, hi));
    }
    placed.push_back({off, size, first[b], last[b]});
    plan.offset[b] = off;
    plan.arena_bytes = std::max(plan.arena_bytes, off + size);
  }
  for (size_t b = 0; b < nb; ++b)
    if (group[b] != (int)b) plan.offset[b] = plan.offset[group[b]];
  for (size_t b = 0; b < nb; ++b)
    if (inside[b] >= 0) plan.offset[b] = plan.offset[inside[b]] + inside_at[b];
  return plan;
}

}  // namespace lathe
