// operand_place.h — concat operands placed inside the concat's output, their copies dropped.
//
// A concat is a sum of zero-padded views (core/frontend/shape.cpp), fused into one elementwise
// kernel that copies each operand into its slice of the output (unswitched by operand:
// core/loop/unswitch.h). Where an operand is an intermediate buffer that the kernel copies
// unchanged into a contiguous run of its output (a concat along an axis whose outer dims are
// 1: batch 1 along channels), the buffer can live there: its producer writes straight into
// the slice, and the concat kernel's copy is a store of each element onto itself, which is
// dropped (unet_small: Concat_2's skip connection, 2 MiB copied a run).
//
// place_concat_operands decides this per kernel from its loop IR, with constant shapes only:
//   * a store out[i] = X[j] (+ 0.0), j = i - c for a constant c, with no mask, is a copy of
//     operand X into out at element c;
//   * every such store of X has the same c, c is a multiple of 64 bytes, and its index stays
//     within [c, c + |X|) over the loop ranges (loop extents constant, `if (v < C)` guards
//     narrow them);
//   * every other store of the kernel stays provably outside [c, c + |X|) (so the kernel
//     writes nothing there once the copies are gone);
//   * X is an intermediate written by one earlier kernel, of the output's dtype, not itself
//     holding a placed operand, and the output is an intermediate placed in nothing.
// The placement is recorded in the LoopFunc (placed: param, element) and in its schedule
// log; the memory plan (memory_plan.cpp) must then put X at that element of the output (the
// copy is gone), and never writes another buffer in place over either. A kernel re-lowered
// from the kernel graph (reset_kernel) has its copies and no placement again.
// Off by default: LATHE_CONCAT_IN_PLACE=1 turns it on. Measured on unet_small (one pool thread,
// per-kernel minima of 20 runs, 5 alternated rounds at load 4-6): the one operand it places
// (Concat_2's skip connection, written by the first encoder block 52 kernels earlier) takes
// the concat kernel from 96-111 to 67-77 µs, but the 3 × 3 convolution that reads the concat
// goes from 2977-3066 to 3110-3329 µs (and the instance norm after it +10-20): the copy had
// brought the skip's 2 MiB back into cache right before the convolution, which now reads
// that half cold from its packing loops; the sum of kernels is 1-3% slower. It pays where
// the operand is still in cache when the concat runs (written just before it), which no
// concat of the six benchmark models satisfies.
#pragma once
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe {

bool concat_in_place_enabled();
// Returns how many operands were placed.
int place_concat_operands(const KernelGraph& kg, std::vector<loop::LoopFunc>& funcs);

}  // namespace lathe
