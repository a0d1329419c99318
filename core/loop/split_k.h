// split_k.h — a reduction split across threads: per-thread partial results plus a combine.
//
// An output loop nest whose reduction is long but whose outputs are few (a column sum of
// 1024 columns, a GEMV with few outputs per thread) cannot use more cores by spreading its
// outputs. split_k(f, r, P) splits reduction loop r (extent E) into P parts of
// C = ceil(E/P) iterations, each computing every output's partial result into a local
// array, then combines them:
//     alloc part: P × N                               (N: the output loops' iterations)
//     parallel for t < P:                              (the partial nest, loops renamed _p)
//       for o…: acc = init; for r_p < min(C, E - t·C): acc += body[r := t·C + r_p]
//               part[t·N + flat(o…)] = acc
//     for o…: acc = part[0·N + flat] ⊕ … ⊕ part[(P-1)·N + flat]; <the original stores>
// The partial nest keeps the original nest's shape, so reduce_rows, tile and vectorize
// apply to it as before (reduce_rows takes its local-array store as output code). Logged
// as "split_k r by P". Refused (UserError, the reason) unless r is the one reduction of its
// loop nest, reduces into one accumulator that starts at the operation's identity (0 for a
// sum, 1 for a product; any constant for a max), has a constant extent ≥ P, and its
// enclosing loops have constant extents; P is 2..64.
#pragma once
#include <cstdint>
#include <string>

#include "core/loop/loop_ir.h"

namespace lathe::loop {

void split_k(LoopFunc& f, const std::string& loop, int64_t parts);

// Whether f's first reduction loop (pre-order) takes split_k with `parts`; sets `loop` to
// its name (the tuner's knob is offered only then).
bool split_k_candidate(const LoopFunc& f, int64_t parts, std::string& loop);

}  // namespace lathe::loop
