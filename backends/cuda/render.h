// render.h — CUDA C from loop IR: one `extern "C" __global__` function per kernel.
//
// Calling convention (the C backend's, as kernel parameters): the LoopFunc's buffers in
// order, then its runtime dims as `long long d_NAME`:
//     extern "C" __global__ void k0_add(float* __restrict__ out, const float* __restrict__ in0, long long d_B)
// Thread mapping. The outermost chain of perfectly nested output loops (not reductions) is
// flattened into one iteration space that a grid-stride loop walks, `block` threads per
// block (default 256); the flat index is split back into the loop variables with / and %,
// so consecutive threads touch consecutive elements (coalesced). A schedule overrides
// this by splitting: a parallel loop whose only child is a loop of constant extent that
// is a multiple of 32 (≤ 1024) maps to blocks × threads (`split i0 128; parallel i0_o`).
// Contractions (matmul, batched matmul, convolution: an accumulator of sums of products
// whose factors each miss one group of output loops) are tiled through shared memory
// instead, one block per output tile (render_tiled.cpp).
// Reductions run inside each thread (the loop IR's accumulators). Kernels with no output
// loop (a full reduction) run on one block: every thread of it takes a strided share of
// the outermost reduction loop and the partial results are combined with warp shuffles and
// shared memory (when the reduction is a single add/max/mul loop nest over an accumulator).
//
// Numerics follow the interpreter (core/interp/kernels.h): f16/bf16 compute in float and
// round to the storage type after every op; integer x/0 and x%0 give 0 and MIN/-1 wraps;
// Max propagates NaN; float→int casts saturate with NaN → 0; integers wrap.
#pragma once
#include <string>

#include "core/loop/loop_ir.h"

namespace lathe::cuda {

struct RenderOptions {
  int block = 256;    // threads per block of the default (flattened) mapping
  bool tiled = true;  // contractions as shared-memory tiled kernels (render_tiled.cpp)
  bool row_cache = true;  // block-per-row kernels keep rows read or written twice in registers
  bool split_k = true;    // tiled contractions with few tiles and a long K split K over blocks
};

// How a rendered kernel is launched: grid = min(ceil(work / block), max_blocks) blocks of
// `block` threads (a grid-stride loop covers the rest). work == nullptr: one block.
struct LaunchShape {
  loop::ExprRef work;        // i64 expression over the runtime dims: iterations to spread
  int block = 256;           // threads per block
  bool block_reduce = false; // one block cooperates on a full reduction
  bool per_block = false;    // work counts blocks (schedule-bound loops), not threads
  std::string tiled;         // a tiled contraction: its tile shape ("64x64 tiles, …")
  std::string describe() const;  // "grid-stride over 4096*d_B threads, 256 per block"
};

struct CudaKernel {
  std::string name;      // the extern "C" symbol
  std::string source;    // the __global__ function (without the prelude)
  LaunchShape launch;
  // A kernel launched just before this one on the same stream, with the same parameters
  // (the rnn's input projections, a parallel GEMM phase before the recurrence); "" if none.
  // Its __global__ function is part of `source`.
  std::string pre_name;
  LaunchShape pre_launch;
  // Device scratch that both kernels take as one extra parameter (`float*`) right after the
  // buffers (before any dims), owned by the compiled program and reused by every launch;
  // 0: no such parameter.
  int64_t scratch_bytes = 0;
};

// Typedefs and helpers every kernel may use: once per translation unit.
std::string cuda_prelude();
// "" when the CUDA renderer handles dtype dt.
std::string cuda_dtype_unsupported(DType dt);
// Renders one kernel. UserError when the loop IR uses something the renderer cannot
// express (vector lanes, very large local arrays).
CudaKernel render_cuda_kernel(const loop::LoopFunc& f, const RenderOptions& o = {});

}  // namespace lathe::cuda
