// base_offsets.h — constant base offsets moved out of a kernel's code into its launch.
//
// A kernel that reads a slice of a buffer at a fixed position (an unrolled recurrence's
// step t reads row t of the input projections; a layer reads its part of a packed tensor)
// has that position in every load's index as a constant term: in0[(i1 + 160)]. Kernels that
// differ only in such constants are different code, so the compiling backends compile each
// once more (kernel_dedup.h) and a 64-step LSTM compiled 64 copies of one step.
//
// hoist_base_offsets takes, for each buffer a kernel only reads, the smallest constant term
// m > 0 of its loads (and prefetches), subtracts m from every load (and prefetch) of that buffer and records it in
// BufferParam::offset; the executor hands the kernel that buffer's address plus m elements.
// The code no longer depends on the position, so equal steps share one compiled kernel.
// Only additive constants outside any division are moved (in0[(i + 160) / 4] keeps its),
// and only when every load of the buffer has one (the address stays inside the buffer).
#pragma once
#include "core/loop/loop_ir.h"

namespace lathe::loop {

// Returns the number of buffers whose offset it moved.
int hoist_base_offsets(LoopFunc& f);

}  // namespace lathe::loop
