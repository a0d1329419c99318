// row_reduce.h — reduction rows: output loops made innermost inside the reductions they do.
//
// The lowering computes a fused reduction once per output element, inside the output loops:
//     for ow: acc = 0; for r: for s: acc += x[oh+r, ow+s] · w[r, s]; out[ow] = f(acc)
// which leaves only a tiny (3-element) or strided (a column sum's) loop to vectorize.
// reduce_rows() turns an output loop whose body does such reductions into blocks of a row
// of accumulators, with the output loop innermost, contiguous and vectorizable:
//     for ob: row[0:B] = 0
//             for r: [for s:] for i < B: row[i] += x[oh+r, ob·B+i+s] · w[r, s]
//             for i < B: out[ob·B+i] = f(row[i])
// A small window (the innermost reduction loops, up to 16 iterations: 3×3, 1×7) is
// unrolled inside the row loop and its terms summed as a tree, so each accumulator is
// loaded and stored once per window (or window row when larger). Range
// conditions (the padding of a window) are split out of the row loop: per reduction
// iteration, the range of i where every condition affine in i holds is computed and run
// unmasked, and the edges (or the whole row, when a condition that does not depend on i
// fails: a padding row) run the original masked code in one scalar loop.
//
// apply_row_reductions() is the default schedule's use of it: every innermost output loop
// whose reductions are not already contiguous (the innermost reduction loop reads with
// stride 1 over many elements), whose loads depend on the output position affinely with a
// small stride (1-4), gets reduction rows. Depthwise and grouped convolutions, pooling,
// reductions over non-innermost axes and vector-matrix products take this path.
#pragma once
#include <string>

#include "core/loop/loop_ir.h"

namespace lathe::loop {

// Reduction rows for output loop `loop` (blocks of `block` elements). Throws UserError
// (the reason) when the loop's body is not output code around reduction nests.
void reduce_rows(LoopFunc& f, const std::string& loop, int64_t block);

// The note of a row's masked edge loop: the default schedule leaves it scalar (its index is
// not affine; vectorizing it would gather).
extern const char* const kEdgeNote;

// The heuristic: applies reduce_rows where it pays; returns how many loops it changed.
// `threads`: the cores the kernel's outermost loop is spread over (1: it stays serial).
int apply_row_reductions(LoopFunc& f, int threads = 1);

// The heuristic's row block for a row loop of `extent` elements: up to 256 for a window's
// reduction, 2048 for a long one (a column sum, x·W: kilobytes of contiguous memory per
// reduction step); a long one over 2048 whose row loop is the kernel's outermost (parallel)
// loop on `threads` > 1 cores gets a multiple of `threads` blocks of up to kMaxThreadRow
// (the accumulators stay in L2): a 1×768·768×50257 GEMV streams 2 runs of 100 KB per
// reduction step instead of 25 runs of 8 KB (measured ~1.5-2x faster).
int64_t row_block(int64_t extent, bool long_reduction, bool outermost, int threads);
inline constexpr int64_t kMaxThreadRow = 32768;

}  // namespace lathe::loop
