// cuda_backend.h — the pieces of the `cuda` backend that tests and tools use directly:
// the GPU form of a program's loop IR, the rendered translation unit, and the compiled
// program with device buffers and per-kernel event timing.
//
// The Backend object itself registers as "cuda" (cuda_backend.cpp): available() is ""
// only where a driver and a device are present; compile() needs neither (NVRTC only), so
// `--show source` and the tests work everywhere; launch() needs the GPU.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/render.h"

namespace lathe::cuda {

// Kernel i of p as the CUDA renderer wants it: the CPU's packed matmul (vector registers,
// packing buffers) is re-lowered as a plain reduction, one output element per thread.
loop::LoopFunc gpu_loop_func(const Program& p, int kernel);

// Kernel i of p rendered, named `prefix` + its name: the fused attention forward as the
// shared-memory FlashAttention kernel (render_attention.cpp; LATHE_CUDA_FLASH=0 keeps the
// one-row-per-thread loop IR kernel), the rest from gpu_loop_func. `f` receives the loop IR.
CudaKernel render_program_kernel(const Program& p, int kernel, const std::string& prefix = "", const RenderOptions& o = {},
                                 loop::LoopFunc* f = nullptr);

// The whole translation unit for p (prelude + every kernel) and each kernel's launch.
struct CudaUnit {
  std::string source;
  std::vector<CudaKernel> kernels;
  std::vector<loop::LoopFunc> funcs;   // the GPU loop IR actually rendered
};
// `prefix` is prepended to every kernel name (several programs in one NVRTC call).
CudaUnit render_unit(const Program& p, const std::string& prefix = "", const RenderOptions& o = {});

// The architecture to compile for: $LATHE_CUDA_ARCH, else the GPU's, else "sm_90".
std::string target_arch();

}  // namespace lathe::cuda
