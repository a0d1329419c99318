// render_gemv_q4.cpp — the packed int4 matrix-vector product (Extern "gemv_q4", backends/library.h)
// as a CUDA kernel: one warp per output element (m, n); its 32 lanes stride over the blocks of
// W's row n (a lane per block when there are fewer bytes than lanes per block), each block's
// bytes unpacked (low nibble: weight j, high nibble: weight j + block/2, value nibble - 8),
// FMA'd with x and scaled by the block's scale; the lanes' sums meet by warp shuffles.
// The same arithmetic as the CPU kernel (backends/library_q4.cpp) up to the summation order.
#include <sstream>

#include "backends/cuda/render.h"
#include "core/ir/diag.h"
#include "core/ir/node.h"

namespace lathe::cuda {

CudaKernel render_gemv_q4(const loop::LoopFunc& f, NodeRef n) {
  LATHE_CHECK(n && n->op == Op::Extern && n->attrs.name == "gemv_q4" && n->attrs.ints.size() == 4 && f.buffers.size() == 4,
              "render_gemv_q4: not a gemv_q4 kernel");
  const auto& v = n->attrs.ints;
  const std::string M = std::to_string(v[0]), N = std::to_string(v[1]), K = std::to_string(v[2]), B = std::to_string(v[3]);
  constexpr int kWarps = 8;
  std::ostringstream o;
  o << "// kernel " << f.name << " (gemv_q4: Y[" << M << ", " << N << "] = X · W^T, W packed int4 in blocks of " << B
    << "; one warp per output, " << kWarps << " warps per block)\n";
  o << "extern \"C\" __global__ void " << f.name << "(float* __restrict__ y, const float* __restrict__ x, "
    << "const unsigned char* __restrict__ w, const float* __restrict__ s) {\n";
  o << "  const long long M = " << M << "LL, N = " << N << "LL, K = " << K << "LL, B = " << B << "LL, H = B / 2, NB = K / B;\n";
  o << "  const int lane = threadIdx.x & 31;\n";
  o << "  for (long long o = (long long)blockIdx.x * " << kWarps << " + (threadIdx.x >> 5); o < M * N; o += (long long)gridDim.x * "
    << kWarps << ") {\n";
  o << "    const long long m = o / N, n = o % N;\n";
  o << "    const unsigned char* wr = w + n * (K / 2);\n";
  o << "    const float* xr = x + m * K;\n";
  o << "    float acc = 0.f;\n";
  o << "    for (long long i = lane; i < K / 2; i += 32) {  // byte i: block i / H, position i % H\n";
  o << "      const long long b = i / H, j = i % H;\n";
  o << "      const int q = wr[i];\n";
  o << "      const float* xb = xr + b * B;\n";
  o << "      acc += s[n * NB + b] * ((float)((q & 15) - 8) * xb[j] + (float)((q >> 4) - 8) * xb[j + H]);\n";
  o << "    }\n";
  o << "    for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);\n";
  o << "    if (lane == 0) y[o] = acc;\n";
  o << "  }\n}\n";
  CudaKernel k;
  k.name = f.name;
  k.launch.work = loop::const_int((v[0] * v[1] + kWarps - 1) / kWarps);
  k.launch.per_block = true;
  k.launch.block = 32 * kWarps;
  k.launch.tiled = "gemv_q4: one warp per output, " + std::to_string(kWarps) + " per block";
  k.source = "// launch: " + k.launch.describe() + "\n" + o.str();
  return k;
}

}  // namespace lathe::cuda
