// render_gemv_q4.cpp — the packed int4 matrix-vector product (Extern "gemv_q4", backends/library.h)
// as a CUDA kernel. X is quantized to int16 per block once per thread block (core/interp/
// gemv_q4_act.h: one warp per block of B values finds max|x| by shuffles and rounds the block
// into shared memory), then the weights stream through integer dot products:
//
//   a tile = up to MT (≤ 4) rows of X × ROWS rows of W; 8 warps, each warp split into sub-warps
//   of S lanes, one sub-warp per group of R (4) rows of W. A lane owns a run of G bytes of a
//   weight row (G = 16: one coalesced 16-byte load, 32 weights of one block; smaller when half
//   a block is not a multiple of 16 bytes) at the same position in its R rows, so the G·2
//   int16 values of X it needs are read from shared memory once for the R rows. Each 4 bytes
//   of weights are 8 nibbles: four __dp2a (16-bit x 8-bit pairs) against X's int16 pairs sum
//   Σ nibble·q exactly in int32, and Σ (nibble − 8)·q = that − 8·Σ q (Σ q by __dp2a against
//   ones, once per run for all rows). A run's integer sum is scaled by both scales into an
//   f32 accumulator per (row of X, row of W); the S lanes of a row meet by shuffles.
//   K longer than the shared-memory chunk (8192 values of X) goes chunk by chunk.
//
// The same arithmetic as the interpreter and the CPU kernel (backends/library_q4.cpp) up to
// the f32 summation order of the runs' scaled sums (each run's integer sum is exact).
#include <algorithm>
#include <sstream>

#include "backends/cuda/render.h"
#include "core/ir/diag.h"
#include "core/ir/node.h"

namespace lathe::cuda {

CudaKernel render_gemv_q4(const loop::LoopFunc& f, NodeRef n) {
  LATHE_CHECK(n && n->op == Op::Extern && n->attrs.name == "gemv_q4" && n->attrs.ints.size() == 4 && f.buffers.size() == 4,
              "render_gemv_q4: not a gemv_q4 kernel");
  const auto& v = n->attrs.ints;
  const int64_t M = v[0], N = v[1], K = v[2], B = v[3];
  LATHE_CHECK(B > 0 && B % 2 == 0 && K % B == 0, "render_gemv_q4: the block must be even and divide K");
  constexpr int kWarps = 8, R = 4, kChunk = 8192;  // threads 256; rows of W per lane; int16 values of X in shared memory
  const int64_t H = B / 2, NB = K / B;
  if (B > kChunk)
    throw UserError("backend 'cuda': gemv_q4 blocks of " + std::to_string(B) + " weights do not fit the kernel's shared memory (at most " +
                    std::to_string(kChunk) + ")");
  const int64_t MT = std::min<int64_t>(M, 4);  // rows of X per tile
  const int64_t NBC = std::max<int64_t>(1, std::min<int64_t>(NB, kChunk / (MT * B)));  // blocks of X per chunk
  const int64_t KC = NBC * B;
  int G = 16;  // bytes a lane reads per row: a divisor of half a block
  while (H % G != 0) G /= 2;
  const int64_t GPB = H / G, GPC = NBC * GPB;  // runs per block, per chunk
  int S = 32;  // lanes per row of W: the fewest padded runs, then the most lanes
  for (int s = 32; s >= 1; s /= 2)
    if ((GPC + s - 1) / s * s < (GPC + S - 1) / S * S) S = s;
  const int64_t ROWS = int64_t(kWarps) * (32 / S) * R;  // rows of W per tile
  const int64_t tiles = (N + ROWS - 1) / ROWS * ((M + MT - 1) / MT);
  auto L = [](int64_t x) { return std::to_string(x) + "LL"; };
  std::ostringstream o;
  o << "// kernel " << f.name << " (gemv_q4: Y[" << M << ", " << N << "] = X · W^T, W packed int4 in blocks of " << B
    << "; X quantized to int16 in shared memory, " << MT << " row(s) of X × " << ROWS << " rows of W a tile, " << S
    << " lanes × " << G << " bytes per row, " << R << " rows per lane, __dp2a)\n";
  o << "extern \"C\" __global__ void " << f.name << "(float* __restrict__ y, const float* __restrict__ x, "
    << "const unsigned char* __restrict__ w, const float* __restrict__ s) {\n";
  o << "  const long long M = " << L(M) << ", N = " << L(N) << ", K = " << L(K) << ";\n";
  o << "  constexpr int B = " << B << ", H = " << H << ", NB = " << NB << ", MT = " << MT << ", NBC = " << NBC << ", KC = " << KC
    << ", G = " << G << ", GPB = " << GPB << ", S = " << S << ", R = " << R << ", RS = 32 / S;\n";
  o << "  constexpr long long ROWS = " << L(ROWS) << ", TN = (N + ROWS - 1) / ROWS;\n";
  o << "  __shared__ __align__(16) short xq[MT * KC];  // X's rows of this tile, this chunk, int16\n";
  o << "  __shared__ float xsc[MT * NBC];               // their scales, one a block\n";
  o << "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % S, slot = lane / S;\n";
  if (G >= 4) o << "  const bool aligned = ((unsigned long long)w & " << (G - 1) << "ull) == 0ull;  // vector loads of the weights\n";
  o << "  for (long long tile = blockIdx.x; tile < TN * ((M + MT - 1) / MT); tile += gridDim.x) {\n";
  o << "    const long long m0 = tile / TN * MT, n0 = tile % TN * ROWS + (long long)warp * RS * R + slot;  // rows n0 + r·RS\n";
  o << "    float acc[MT][R];\n";
  o << "    for (int mi = 0; mi < MT; ++mi)\n      for (int r = 0; r < R; ++r) acc[mi][r] = 0.f;\n";
  o << "    for (int c0 = 0; c0 < NB; c0 += NBC) {  // chunks of NBC blocks\n";
  o << "      const int nbc = NB - c0 < NBC ? NB - c0 : NBC;\n";
  o << "      __syncthreads();  // the last chunk's readers are done\n";
  // quantization, as core/interp/gemv_q4_act.h: s = max|x| / 32767 (IEEE division), q = round-half-even(x / s)
  o << "      for (int q = warp; q < MT * nbc; q += " << kWarps << ") {  // one warp per (row of X, block)\n";
  o << "        const int mi = q / nbc, bi = q % nbc;\n";
  o << "        const long long m = m0 + mi < M ? m0 + mi : M - 1;  // rows past M: a copy, never written\n";
  o << "        const float* xb = x + m * K + (long long)(c0 + bi) * B;\n";
  o << "        short* qb = xq + mi * KC + bi * B;\n";
  o << "        float mx = 0.f;\n";
  o << "        for (int j = lane; j < B; j += 32) mx = fmaxf(mx, fabsf(xb[j]));\n";
  o << "        for (int d = 16; d > 0; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));\n";
  o << "        const float xs = __fdiv_rn(mx, 32767.f);\n";
  o << "        for (int j = lane; j < B; j += 32)\n";
  o << "          qb[j] = xs > 0.f ? (short)fmaxf(-32767.f, fminf(32767.f, rintf(__fdiv_rn(xb[j], xs)))) : (short)0;\n";
  o << "        if (lane == 0) xsc[mi * NBC + bi] = xs;\n";
  o << "      }\n";
  o << "      __syncthreads();\n";
  o << "      for (int g = sub; g < nbc * GPB; g += S) {  // this lane's runs of G bytes\n";
  o << "        const int bi = g / GPB, j = g % GPB * G;  // block in the chunk, byte in the block\n";
  o << "        const long long kb = (long long)(c0 + bi) * H + j;  // byte in a row of W\n";
  const int WW = std::max(1, G / 4);  // 32-bit words of weights per run (G ≥ 4)
  if (G >= 4) {
    o << "        unsigned wv[R][" << WW << "];\n";
  } else {
    o << "        unsigned char wv[R][" << G << "];\n";
  }
  o << "        float d[R];\n";
  o << "        #pragma unroll\n        for (int r = 0; r < R; ++r) {\n";
  o << "          const long long nr = n0 + (long long)r * RS;\n";
  o << "          const bool on = nr < N;\n";
  o << "          const unsigned char* wp = w + (on ? nr : 0) * (K / 2) + kb;\n";
  o << "          d[r] = on ? s[nr * NB + c0 + bi] : 0.f;\n";
  if (G == 16)
    o << "          if (aligned) { const uint4 u = *(const uint4*)wp; wv[r][0] = u.x; wv[r][1] = u.y; wv[r][2] = u.z; wv[r][3] = u.w; }\n";
  else if (G == 8)
    o << "          if (aligned) { const uint2 u = *(const uint2*)wp; wv[r][0] = u.x; wv[r][1] = u.y; }\n";
  else if (G == 4)
    o << "          if (aligned) wv[r][0] = *(const unsigned*)wp;\n";
  if (G >= 4) {
    o << "          else\n";
    o << "            for (int i = 0; i < " << WW << "; ++i)\n";
    o << "              wv[r][i] = wp[4 * i] | (unsigned)wp[4 * i + 1] << 8 | (unsigned)wp[4 * i + 2] << 16 | (unsigned)wp[4 * i + 3] << 24;\n";
  } else {
    o << "          for (int i = 0; i < G; ++i) wv[r][i] = wp[i];\n";
  }
  o << "        }\n";
  o << "        for (int mi = 0; mi < MT; ++mi) {\n";
  o << "          const short* xl = xq + mi * KC + bi * B + j;  // X at the low nibbles; + H at the high ones\n";
  o << "          const float sx = xsc[mi * NBC + bi];\n";
  if (G >= 4) {
    // int16 pairs of X as 32-bit words: 2 per 4 weights' bytes, G/2 words for the low and the high half
    o << "          int xlo[" << G / 2 << "], xhi[" << G / 2 << "];\n";
    if (G == 16)
      o << "          { const int4* p = (const int4*)xl; const int4* h = (const int4*)(xl + H);\n"
           "            const int4 a = p[0], b = p[1], c = h[0], e = h[1];\n"
           "            xlo[0] = a.x; xlo[1] = a.y; xlo[2] = a.z; xlo[3] = a.w; xlo[4] = b.x; xlo[5] = b.y; xlo[6] = b.z; xlo[7] = b.w;\n"
           "            xhi[0] = c.x; xhi[1] = c.y; xhi[2] = c.z; xhi[3] = c.w; xhi[4] = e.x; xhi[5] = e.y; xhi[6] = e.z; xhi[7] = e.w; }\n";
    else if (G == 8)
      o << "          { const int4 a = *(const int4*)xl, c = *(const int4*)(xl + H);\n"
           "            xlo[0] = a.x; xlo[1] = a.y; xlo[2] = a.z; xlo[3] = a.w; xhi[0] = c.x; xhi[1] = c.y; xhi[2] = c.z; xhi[3] = c.w; }\n";
    else
      o << "          { const int2 a = *(const int2*)xl, c = *(const int2*)(xl + H);\n"
           "            xlo[0] = a.x; xlo[1] = a.y; xhi[0] = c.x; xhi[1] = c.y; }\n";
    o << "          int qs = 0;  // Σ q over the run's 2G values\n";
    o << "          #pragma unroll\n          for (int i = 0; i < " << G / 2 << "; ++i) qs = __dp2a_lo(xhi[i], 0x0101, __dp2a_lo(xlo[i], 0x0101, qs));\n";
    o << "          #pragma unroll\n          for (int r = 0; r < R; ++r) {\n";
    o << "            int dot = -8 * qs;\n";
    o << "            #pragma unroll\n            for (int i = 0; i < " << WW << "; ++i) {\n";
    o << "              const int lo = (int)(wv[r][i] & 0x0f0f0f0fu), hi = (int)((wv[r][i] >> 4) & 0x0f0f0f0fu);\n";
    o << "              dot = __dp2a_lo(xlo[2 * i], lo, dot);\n";
    o << "              dot = __dp2a_hi(xlo[2 * i + 1], lo, dot);\n";
    o << "              dot = __dp2a_lo(xhi[2 * i], hi, dot);\n";
    o << "              dot = __dp2a_hi(xhi[2 * i + 1], hi, dot);\n";
    o << "            }\n";
    o << "            acc[mi][r] += (float)dot * (sx * d[r]);\n";
    o << "          }\n";
  } else {
    o << "          #pragma unroll\n          for (int r = 0; r < R; ++r) {\n";
    o << "            int dot = 0;\n";
    o << "            for (int i = 0; i < G; ++i) dot += ((wv[r][i] & 15) - 8) * (int)xl[i] + ((wv[r][i] >> 4) - 8) * (int)xl[i + H];\n";
    o << "            acc[mi][r] += (float)dot * (sx * d[r]);\n";
    o << "          }\n";
  }
  o << "        }\n";
  o << "      }\n";
  o << "    }\n";
  o << "    for (int mi = 0; mi < MT; ++mi)\n";
  o << "      for (int r = 0; r < R; ++r) {\n";
  o << "        float a = acc[mi][r];\n";
  o << "        for (int dd = S / 2; dd > 0; dd >>= 1) a += __shfl_xor_sync(0xffffffffu, a, dd);\n";
  o << "        const long long nr = n0 + (long long)r * RS;\n";
  o << "        if (sub == 0 && nr < N && m0 + mi < M) y[(m0 + mi) * N + nr] = a;\n";
  o << "      }\n";
  o << "  }\n}\n";
  CudaKernel k;
  k.name = f.name;
  k.launch.work = loop::const_int(tiles);
  k.launch.per_block = true;
  k.launch.block = 32 * kWarps;
  k.launch.tiled = "gemv_q4: X int16 in shared memory, " + std::to_string(MT) + "x" + std::to_string(ROWS) + " tiles, " +
                   std::to_string(S) + " lanes x " + std::to_string(G) + " bytes a row, dp2a";
  k.source = "// launch: " + k.launch.describe() + "\n" + o.str();
  return k;
}

}  // namespace lathe::cuda
