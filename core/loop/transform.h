// transform.h — schedule primitives on loop IR, and the default schedule.
//
// Each primitive names loops by their variable (see print_loop), checks legality and
// either applies the change (appending a line to LoopFunc::schedule_log) or throws
// UserError saying why it refused — e.g. `parallel r0: axis r0 carries a reduction into
// acc0`. They are what `p:kernel(i):split("i1", 16)` calls from Lua.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/ir/diag.h"
#include "core/loop/loop_ir.h"

namespace lathe::loop {

// for v in 0..E  →  for v_o in 0..ceil(E/f): for v_i in 0..f: (guard) body[v := v_o*f + v_i]
void split(LoopFunc& f, std::string loop, int64_t factor);
// swaps two perfectly nested loops (`inner` must be the only statement of `outer`)
void reorder(LoopFunc& f, std::string outer, std::string inner);
// split both, then reorder to (a_o, b_o, a_i, b_i)
void tile(LoopFunc& f, std::string a, std::string b, int64_t fa, int64_t fb);
// merges two perfectly nested loops into one loop over their product
void fuse(LoopFunc& f, std::string outer, std::string inner);
// SIMD across iterations of an innermost loop (reductions become SIMD reductions)
void vectorize(LoopFunc& f, std::string loop);
// Vector body + tail of an innermost loop: for v in 0..E  →  vectorized(W) for v in 0..E/W*W:
// body; for v_t in 0..E%W: body[v := E/W*W + v_t]. The body runs whole vectors of `width`
// lanes, one per step (no compiler interleave that leaves a scalar remainder of up to
// 4W-1: a softmax row of 77 ran 13 of 77 scalar); the tail runs scalar, or with `masked`
// as one masked vector. A constant E that W divides keeps one loop (the width hint only).
void peel(LoopFunc& f, std::string loop, int64_t width, bool masked = false);
// unroll hint: factor 0 = fully (constant extent ≤ 64)
void unroll(LoopFunc& f, std::string loop, int factor = 0);
// spread iterations over threads; refused for reductions and racing stores
void parallel(LoopFunc& f, std::string loop);
// Stages the tile of buffer parameter `buffer` ("in0", "out"; see print_loop) that one
// iteration of `loop` touches in a local array declared at the top of the loop's body, and
// points the body's accesses at it (Halide's compute_at/store_at of a copy; TVM's
// cache_read/cache_write + compute_at). `loop` = "root" stages before the whole kernel. A
// buffer the body only reads is copied in first; one it writes (an output, an accumulator)
// lives in the tile and is written back at the end of the body (copied in first when the
// body also reads it). The tile is indexed by the loops inside the body that the accesses
// use, which need constant extents; accesses of the same shape (softmax's passes over a
// row) share one tile. Refused, with the reason, for indirect or vector accesses, indices
// that use values the body computes, a written buffer whose accesses differ or may
// collide, and tiles over kMaxCacheBytes. Returns the local array's name ("in0_tile").
std::string cache(LoopFunc& f, std::string loop, std::string buffer);
inline constexpr int64_t kMaxCacheBytes = 64 * 1024;

// Names of all loops, outermost first (pre-order).
std::vector<std::string> loop_names(const LoopFunc& f);

struct ScheduleOptions {
  int threads = 0;             // 0 = hardware concurrency
  int64_t min_parallel_work = 1 << 15;  // fewer elements than this stay on one thread
};
// The default heuristics: parallelize the outer loop(s) over the cores (fusing small outer
// loops first), vectorize innermost loops. Matmul kernels come pre-scheduled by lowering.
void apply_default_schedule(LoopFunc& f, const ScheduleOptions& opts = {});
// The vector width the default schedule peels short odd f32 rows of 4 such vectors or more
// by: the host's f32 lanes, 16 with AVX-512, else 8; LATHE_PEEL_LANES=8 keeps 8 (A/B runs).
// Shorter rows (32 to 63 on AVX-512) are peeled by 8.
int64_t peel_lanes();

}  // namespace lathe::loop
