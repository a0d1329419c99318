// repack.h — a kernel's prepacked constant GEMM operands packed again for other blocks
// (the tuner's candidates and applied records: core/tune, backends/tune_measure.cpp).
#pragma once
#include "core/loop/lower.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

// Where the build packed kernel `kernel`'s constant A or B (prepack.h) for the host's blocks,
// packs them again as the build would for P (KC from matmul_blocking with P, MR = P.mr,
// NR = P.nr): new Constant buffers appended to kg, the kernel pointed at them (Kernel::packed_b,
// and packed_a_<kernel> renamed away from the old copy), so that lowering the kernel with P
// reads the weights in place instead of packing them on every run. The build's copies stay
// (other kernels may read them). Returns false, kg unchanged, when the build packed nothing
// for this kernel or P's layouts are the ones it packed.
bool repack_for(KernelGraph& kg, int kernel, const MatmulParams& P);

}  // namespace lathe::loop
