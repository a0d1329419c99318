// render_gemv_q4.cpp — the packed int4 matrix-vector product (Extern "gemv_q4", backends/library.h)
// as a CUDA kernel: one warp per output element (m, n); its 32 lanes stride over the blocks of
// W's row n (a lane per block when there are fewer bytes than lanes per block), each block's
// bytes unpacked (low nibble: weight j, high nibble: weight j + block/2, value nibble - 8),
// multiplied with x quantized per block to int16 (core/interp/gemv_q4_act.h: each lane
// finds its block's max|x| itself) and scaled by both scales; the lanes' sums meet by warp shuffles.
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
  // X's block quantized to int16 as core/interp/gemv_q4_act.h does (IEEE division, round-half-even)
  o << "      float mx = 0.f;\n";
  o << "      for (long long k = 0; k < B; ++k) mx = fmaxf(mx, fabsf(xb[k]));\n";
  o << "      const float xs = __fdiv_rn(mx, 32767.f);\n";
  o << "      const float q0 = xs > 0.f ? fminf(32767.f, fmaxf(-32767.f, rintf(__fdiv_rn(xb[j], xs)))) : 0.f;\n";
  o << "      const float q1 = xs > 0.f ? fminf(32767.f, fmaxf(-32767.f, rintf(__fdiv_rn(xb[j + H], xs)))) : 0.f;\n";
  o << "      const int is = ((q & 15) - 8) * (int)q0 + ((q >> 4) - 8) * (int)q1;\n";
  o << "      acc += (float)is * (xs * s[n * NB + b]);\n";
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
