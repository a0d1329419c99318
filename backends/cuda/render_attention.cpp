// render_attention.cpp — the fused attention forward (Extern "attention", kind "attention") as a
// FlashAttention-style CUDA kernel with shared-memory K/V tiles:
//
//   one block of BQ threads per (batch·head, query tile of BQ rows); each thread owns one
//   query row: its Q row (× scale·log2 e) and its output accumulator live in registers.
//   for each K/V tile of BK keys (up to the tile's last query when causal: tiles above the
//   diagonal are skipped):
//     the block stages K[BK×E] and V[BK×Ev] in shared memory (coalesced, zero past the end)
//     each thread: BK scores from shared memory (every thread reads the same element: a
//     broadcast), the mask and the causal test per key, then the base-2 online softmax
//     (m' = max(m, max x); alpha = 2^(m - m'); l = l·alpha + Σ 2^(x - m'); o = o·alpha + p·V)
//   out = o / l (and, for the stats form, m + log2 l after the row)
// The same arithmetic as the CPU kernel (core/loop/lower_attention.cpp): a row all -inf so far
// shifts by 0, a row that stays so gives 0/0 = NaN as the unfused softmax does.
// Head dims above kMaxHead keep the one-row-per-thread loop IR kernel (registers).
#include <algorithm>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/emitter.h"
#include "core/ir/diag.h"
#include "core/loop/attention_layout.h"

namespace lathe::cuda {

namespace {

constexpr int kBQ = 64, kBK = 32;
constexpr int64_t kMaxHead = 128;

}  // namespace

bool flash_attention_applies(const loop::AttentionDesc& d) { return d.E >= 1 && d.Ev >= 1 && d.E <= kMaxHead && d.Ev <= kMaxHead; }

CudaKernel render_flash_attention(const loop::LoopFunc& f, const loop::AttentionDesc& d) {
  LATHE_CHECK(flash_attention_applies(d), "render_flash_attention: head dims " + std::to_string(d.E) + "/" + std::to_string(d.Ev));
  CudaEmitter em(f);
  auto X = [&](const loop::ExprRef& e) { return "(" + em.expr(e) + ")"; };
  auto buf = [&](int p) { return f.buffers.at(p).name; };
  const std::string E = std::to_string(d.E), Ev = std::to_string(d.Ev), BQ = std::to_string(kBQ), BK = std::to_string(kBK);
  const double log2e = 1.4426950408889634;
  char c2[64], l2[64];
  std::snprintf(c2, sizeof c2, "%.9ef", (double)d.scale * log2e);
  std::snprintf(l2, sizeof l2, "%.9ef", log2e);
  std::ostringstream o;
  o << "// kernel " << f.name << " (attention: one block per " << BQ << " query rows, K/V tiles of " << BK
    << " keys in shared memory, online softmax" << (d.causal ? ", causal tiles above the diagonal skipped" : "") << ")\n";
  o << em.signature();
  o << "  const long long lathe_L = " << X(d.L) << ", lathe_S = " << X(d.S) << ";\n";
  o << "  const long long lathe_nt = (lathe_L + " << BQ << " - 1) / " << BQ << ";\n";
  o << "  __shared__ float lathe_Ks[" << BK << "][" << E << "];\n";
  o << "  __shared__ float lathe_Vs[" << BK << "][" << Ev << "];\n";
  o << "  for (long long lathe_blk = blockIdx.x; lathe_blk < " << X(d.B) << " * lathe_nt; lathe_blk += gridDim.x) {\n";
  o << "    const long long bh = lathe_blk / lathe_nt;\n";
  o << "    const long long lathe_q0 = (lathe_blk % lathe_nt) * " << BQ << ";\n";
  o << "    const long long lathe_i = lathe_q0 + threadIdx.x;  // this thread's query row\n";
  o << "    const bool lathe_on = lathe_i < lathe_L;\n";
  o << "    const long long lathe_qo = " << X(d.qoff) << ", lathe_ko = " << X(d.koff) << ", lathe_vo = " << X(d.voff) << ";\n";
  if (d.has_mask) o << "    const long long lathe_mo = " << X(d.moff) << ";\n";
  o << "    float lathe_q[" << E << "], lathe_o[" << Ev << "];\n";
  o << "    #pragma unroll\n    for (int e = 0; e < " << E << "; ++e)\n";
  o << "      lathe_q[e] = lathe_on ? " << buf(d.q) << "[lathe_qo + lathe_i * " << X(d.qsL) << " + e * " << X(d.qsE) << "] * " << c2
    << " : 0.0f;\n";
  o << "    #pragma unroll\n    for (int c = 0; c < " << Ev << "; ++c) lathe_o[c] = 0.0f;\n";
  o << "    float lathe_m = -LATHE_INF_F, lathe_l = 0.0f;\n";
  if (d.causal)
    o << "    const long long lathe_qe = lathe_q0 + " << BQ << " < lathe_L ? lathe_q0 + " << BQ << " : lathe_L;\n"
      << "    const long long lathe_kend = lathe_qe < lathe_S ? lathe_qe : lathe_S;  // keys up to the tile's last query\n";
  else
    o << "    const long long lathe_kend = lathe_S;\n";
  o << "    for (long long lathe_k0 = 0; lathe_k0 < lathe_kend; lathe_k0 += " << BK << ") {\n";
  o << "      __syncthreads();  // the previous tile is consumed\n";
  o << "      for (int lathe_x = threadIdx.x; lathe_x < " << BK << " * " << E << "; lathe_x += blockDim.x) {\n";
  o << "        const int j = lathe_x / " << E << ", e = lathe_x % " << E << ";\n";
  o << "        const long long key = lathe_k0 + j;\n";
  o << "        lathe_Ks[j][e] = key < lathe_kend ? " << buf(d.k) << "[lathe_ko + key * " << X(d.ksS) << " + e * " << X(d.ksE)
    << "] : 0.0f;\n";
  o << "      }\n";
  o << "      for (int lathe_x = threadIdx.x; lathe_x < " << BK << " * " << Ev << "; lathe_x += blockDim.x) {\n";
  o << "        const int j = lathe_x / " << Ev << ", c = lathe_x % " << Ev << ";\n";
  o << "        const long long key = lathe_k0 + j;\n";
  o << "        lathe_Vs[j][c] = key < lathe_kend ? " << buf(d.v) << "[lathe_vo + key * " << X(d.vsS) << " + c * " << X(d.vsC)
    << "] : 0.0f;\n";
  o << "      }\n";
  o << "      __syncthreads();\n";
  o << "      if (!lathe_on) continue;\n";
  o << "      float lathe_s[" << BK << "];\n";
  o << "      float lathe_mx = lathe_m;\n";
  o << "      #pragma unroll\n      for (int j = 0; j < " << BK << "; ++j) {\n";
  o << "        float lathe_acc = 0.0f;\n";
  o << "        #pragma unroll\n        for (int e = 0; e < " << E << "; ++e) lathe_acc = fmaf(lathe_q[e], lathe_Ks[j][e], lathe_acc);\n";
  o << "        const long long key = lathe_k0 + j;\n";
  o << "        const bool lathe_ok = key < lathe_kend" << (d.causal ? " && key <= lathe_i" : "") << ";\n";
  if (d.has_mask)
    o << "        const float lathe_x = lathe_ok ? lathe_acc + " << buf(d.mask) << "[lathe_mo + lathe_i * " << X(d.msL) << " + key * "
      << X(d.msS) << "] * " << l2 << " : -LATHE_INF_F;\n";
  else
    o << "        const float lathe_x = lathe_ok ? lathe_acc : -LATHE_INF_F;\n";
  o << "        lathe_s[j] = lathe_x;\n";
  o << "        lathe_mx = (lathe_x > lathe_mx || lathe_x != lathe_x) ? lathe_x : lathe_mx;  // max, NaN propagates\n";
  o << "      }\n";
  o << "      const float lathe_sh = lathe_mx != -LATHE_INF_F ? lathe_mx : 0.0f;  // an all -inf row so far shifts by 0\n";
  o << "      const float lathe_alpha = exp2f(lathe_m - lathe_sh);\n";
  o << "      float lathe_ls = 0.0f;\n";
  o << "      #pragma unroll\n      for (int c = 0; c < " << Ev << "; ++c) lathe_o[c] *= lathe_alpha;\n";
  o << "      #pragma unroll\n      for (int j = 0; j < " << BK << "; ++j) {\n";
  o << "        const float lathe_p = exp2f(lathe_s[j] - lathe_sh);\n";
  o << "        lathe_ls += lathe_p;\n";
  o << "        #pragma unroll\n        for (int c = 0; c < " << Ev << "; ++c) lathe_o[c] = fmaf(lathe_p, lathe_Vs[j][c], lathe_o[c]);\n";
  o << "      }\n";
  o << "      lathe_l = lathe_l * lathe_alpha + lathe_ls;\n";
  o << "      lathe_m = lathe_mx;\n";
  o << "    }\n";
  std::string ow = d.stats ? "(" + Ev + " + 1)" : Ev;
  o << "    if (lathe_on) {\n";
  o << "      const float lathe_inv = 1.0f / lathe_l;\n";
  o << "      const long long lathe_row = (bh * lathe_L + lathe_i) * " << ow << ";\n";
  o << "      #pragma unroll\n      for (int c = 0; c < " << Ev << "; ++c) " << buf(0) << "[lathe_row + c] = lathe_o[c] * lathe_inv;\n";
  if (d.stats) o << "      " << buf(0) << "[lathe_row + " << Ev << "] = lathe_m + log2f(lathe_l);  // the row's log-sum-exp (base 2)\n";
  o << "    }\n";
  o << "  }\n";
  o << "}\n";
  CudaKernel k;
  k.name = f.name;
  k.launch.work = loop::mul(d.B, loop::binary(Op::IDiv, loop::add(d.L, loop::const_int(kBQ - 1)), loop::const_int(kBQ)));
  k.launch.per_block = true;
  k.launch.block = kBQ;
  k.launch.tiled = "attention: " + BQ + " query rows per block, K/V tiles of " + BK + " keys in shared memory";
  k.source = "// launch: " + k.launch.describe() + "\n" + o.str();
  return k;
}

}  // namespace lathe::cuda
