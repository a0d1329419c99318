// render_attention_bwd.cpp — the fused attention backward (Extern "attention_bwd", kind
// "attention_bwd", core/ir/attention_op.h) as shared-memory tiled CUDA kernels, the
// probabilities recomputed from the forward's row log-sum-exp (base 2) as on the CPU
// (core/loop/lower_attention_bwd.cpp):
//
//   D_i = Σ_c dO_ic·O_ic,  x_ij = (q_i·k_j·scale + mask_ij)·log2 e,  p_ij = 2^(x_ij - lse2_i),
//   dp_ij = dO_i·v_j,  ds_ij = p_ij·(dp_ij - D_i)
//
// Every row (a query row for dQ and dS, a key row for dK|dV) is owned by NS = 4 adjacent
// threads, each holding an interleaved quarter of the row's head dims in registers (float4
// chunks where the dims allow); the two inner products of a pair (q·k, dO·v) are partial
// sums joined by two shuffles, so a row's chains are a quarter as long and four times as
// many threads run as with one thread a row.
//   parts 0 (dQ) and 2 (dS): one block per (batch·head, tile of 32 query rows), 128 threads;
//     K/V tiles of 32 keys staged in shared memory (up to the tile's last query when causal,
//     for dQ); dQ accumulates in registers, dS is written key by key.
//   part 1 (dK|dV): one block per (batch·head, tile of 32 keys); the thread's K and V rows
//     and its dK, dV accumulators in registers; Q (× scale·log2 e), dO, lse and D of 32 query
//     rows at a time staged in shared memory (from the tile's first key on when causal).
// Head dims above 128 keep the loop IR kernel (one row per thread).
#include <algorithm>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/emitter.h"
#include "core/ir/diag.h"
#include "core/loop/attention_layout.h"

namespace lathe::cuda {

namespace {

constexpr int kNS = 4, kTile = 32;  // threads a row; rows (and staged rows) a tile
constexpr int64_t kMaxHeadBwd = 128;

}  // namespace

bool attention_bwd_applies(const loop::AttentionDesc& d) {
  return d.part >= 0 && d.part <= 2 && d.E >= 1 && d.Ev >= 1 && d.E <= kMaxHeadBwd && d.Ev <= kMaxHeadBwd;
}

CudaKernel render_attention_bwd(const loop::LoopFunc& f, const loop::AttentionDesc& d) {
  LATHE_CHECK(attention_bwd_applies(d), "render_attention_bwd: part " + std::to_string(d.part) + ", head dims " +
                                            std::to_string(d.E) + "/" + std::to_string(d.Ev));
  CudaEmitter em(f);
  auto X = [&](const loop::ExprRef& e) { return "(" + em.expr(e) + ")"; };
  auto buf = [&](int p) { return f.buffers.at(p).name; };
  const int V = d.E % (4 * kNS) == 0 && d.Ev % (4 * kNS) == 0 ? 4 : 1;  // elements a chunk (float4 from shared memory)
  const int64_t EC = (d.E + V * kNS - 1) / (V * kNS), VC = (d.Ev + V * kNS - 1) / (V * kNS);  // chunks a thread
  const double log2e = 1.4426950408889634;
  char c2[64], l2[64], il2[64], sc[64];
  std::snprintf(c2, sizeof c2, "%.9ef", (double)d.scale * log2e);
  std::snprintf(l2, sizeof l2, "%.9ef", log2e);
  std::snprintf(il2, sizeof il2, "%.9ef", 1 / log2e);
  std::snprintf(sc, sizeof sc, "%.9ef", (double)d.scale);
  const bool by_key = d.part == 1;
  const std::string E = std::to_string(d.E), Ev = std::to_string(d.Ev), T = std::to_string(kTile), NS = std::to_string(kNS);
  std::ostringstream o;
  const char* what[] = {"dQ", "dK|dV", "dS"};
  o << "// kernel " << f.name << " (attention backward, " << what[d.part] << ": " << kNS << " threads a " << (by_key ? "key" : "query")
    << " row, " << kTile << " rows a block, " << (by_key ? "query" : "K/V") << " tiles of " << kTile << " rows in shared memory"
    << (d.causal ? ", causal" : "") << ")\n";
  o << em.signature();
  o << "  constexpr int E = " << E << ", EV = " << Ev << ", NS = " << NS << ", V = " << V << ", EC = " << EC << ", VC = " << VC
    << ", TR = " << T << ";\n";
  o << "  const long long lathe_L = " << X(d.L) << ", lathe_S = " << X(d.S) << ";\n";
  o << "  const long long lathe_nt = ((" << (by_key ? "lathe_S" : "lathe_L") << ") + TR - 1) / TR;\n";
  o << "  const int lathe_h = threadIdx.x % NS, lathe_r = threadIdx.x / NS;  // this thread's share of its row, the row in the tile\n";
  // element e of chunk c (c < EC·V) of this thread: ((c / V)·NS + h)·V + c % V
  auto el = [&](const std::string& c) { return "((" + c + " / V * NS + lathe_h) * V + " + c + " % V)"; };
  // dot over this thread's elements: Σ a[c] * SH[row][el(c)], float4 loads when V = 4
  auto dot = [&](const std::string& acc, const std::string& a, const std::string& sh, const std::string& row, const std::string& n,
                 const std::string& lim) {
    std::ostringstream t;
    if (V == 4) {
      t << "      #pragma unroll\n      for (int c = 0; c < " << n << "; ++c) {\n";
      t << "        const float4 w = *(const float4*)&" << sh << "[" << row << "][(c * NS + lathe_h) * 4];\n";
      t << "        " << acc << " = fmaf(" << a << "[4 * c], w.x, " << acc << "); " << acc << " = fmaf(" << a << "[4 * c + 1], w.y, " << acc
        << ");\n";
      t << "        " << acc << " = fmaf(" << a << "[4 * c + 2], w.z, " << acc << "); " << acc << " = fmaf(" << a << "[4 * c + 3], w.w, " << acc
        << ");\n";
      t << "      }\n";
    } else {
      t << "      #pragma unroll\n      for (int c = 0; c < " << n << "; ++c) {\n";
      t << "        const int e = " << el("c") << ";\n";
      t << "        if (e < " << lim << ") " << acc << " = fmaf(" << a << "[c], " << sh << "[" << row << "][e], " << acc << ");\n";
      t << "      }\n";
    }
    return t.str();
  };
  // acc[c] += s · SH[row][el(c)]
  auto axpy = [&](const std::string& acc, const std::string& s, const std::string& sh, const std::string& row, const std::string& n,
                  const std::string& lim) {
    std::ostringstream t;
    if (V == 4) {
      t << "      #pragma unroll\n      for (int c = 0; c < " << n << "; ++c) {\n";
      t << "        const float4 w = *(const float4*)&" << sh << "[" << row << "][(c * NS + lathe_h) * 4];\n";
      t << "        " << acc << "[4 * c] = fmaf(" << s << ", w.x, " << acc << "[4 * c]); " << acc << "[4 * c + 1] = fmaf(" << s << ", w.y, "
        << acc << "[4 * c + 1]);\n";
      t << "        " << acc << "[4 * c + 2] = fmaf(" << s << ", w.z, " << acc << "[4 * c + 2]); " << acc << "[4 * c + 3] = fmaf(" << s
        << ", w.w, " << acc << "[4 * c + 3]);\n";
      t << "      }\n";
    } else {
      t << "      #pragma unroll\n      for (int c = 0; c < " << n << "; ++c) {\n";
      t << "        const int e = " << el("c") << ";\n";
      t << "        if (e < " << lim << ") " << acc << "[c] = fmaf(" << s << ", " << sh << "[" << row << "][e], " << acc << "[c]);\n";
      t << "      }\n";
    }
    return t.str();
  };
  const std::string nE = "EC * V", nV = "VC * V";  // register array lengths
  const std::string nEc = V == 4 ? "EC" : "EC * V", nVc = V == 4 ? "VC" : "VC * V";  // loop trip counts of dot/axpy
  auto qat = [&](const std::string& i, const std::string& e) {
    return buf(d.q) + "[lathe_qo + (" + i + ") * " + X(d.qsL) + " + (" + e + ") * " + X(d.qsE) + "]";
  };
  auto kat = [&](const std::string& j, const std::string& e) {
    return buf(d.k) + "[lathe_ko + (" + j + ") * " + X(d.ksS) + " + (" + e + ") * " + X(d.ksE) + "]";
  };
  auto vat = [&](const std::string& j, const std::string& c) {
    return buf(d.v) + "[lathe_vo + (" + j + ") * " + X(d.vsS) + " + (" + c + ") * " + X(d.vsC) + "]";
  };
  auto oat = [&](const std::string& i, const std::string& c) {
    return buf(d.os) + "[lathe_oo + (" + i + ") * " + X(d.osL) + " + (" + c + ") * " + X(d.osC) + "]";
  };
  auto gat = [&](const std::string& i, const std::string& c) {
    return buf(d.dout) + "[lathe_go + (" + i + ") * " + X(d.gsL) + " + (" + c + ") * " + X(d.gsC) + "]";
  };
  auto mat = [&](const std::string& i, const std::string& j) {
    return buf(d.mask) + "[lathe_mo + (" + i + ") * " + X(d.msL) + " + (" + j + ") * " + X(d.msS) + "]";
  };
  const std::string reduce2 = "      for (int lathe_d = 1; lathe_d < NS; lathe_d <<= 1) {\n"
                              "        lathe_s += __shfl_xor_sync(0xffffffffu, lathe_s, lathe_d);\n"
                              "        lathe_dp += __shfl_xor_sync(0xffffffffu, lathe_dp, lathe_d);\n      }\n";
  if (!by_key) {
    o << "  __shared__ __align__(16) float lathe_Ks[TR][" << E << "];\n";
    o << "  __shared__ __align__(16) float lathe_Vs[TR][" << Ev << "];\n";
  } else {
    o << "  __shared__ __align__(16) float lathe_Qs[TR][" << E << "];\n";
    o << "  __shared__ __align__(16) float lathe_Gs[TR][" << Ev << "];\n";
    o << "  __shared__ float lathe_lses[TR], lathe_Ds[TR];\n";
  }
  o << "  for (long long lathe_blk = blockIdx.x; lathe_blk < " << X(d.B) << " * lathe_nt; lathe_blk += gridDim.x) {\n";
  o << "    const long long bh = lathe_blk / lathe_nt;\n";
  o << "    const long long lathe_qo = " << X(d.qoff) << ", lathe_ko = " << X(d.koff) << ", lathe_vo = " << X(d.voff)
    << ", lathe_oo = " << X(d.ooff) << ", lathe_go = " << X(d.goff) << ";\n";
  if (d.has_mask) o << "    const long long lathe_mo = " << X(d.moff) << ";\n";
  if (!by_key) {
    o << "    const long long lathe_q0 = (lathe_blk % lathe_nt) * TR, lathe_i = lathe_q0 + lathe_r;  // this thread's query row\n";
    o << "    const bool lathe_on = lathe_i < lathe_L;\n";
    o << "    float lathe_q[" << nE << "], lathe_g[" << nV << "]" << (d.part == 0 ? ", lathe_dq[" + nE + "]" : std::string()) << ";\n";
    o << "    float lathe_D = 0.0f;\n";
    o << "    #pragma unroll\n    for (int c = 0; c < " << nE << "; ++c) {\n";
    o << "      const int e = " << el("c") << ";\n";
    o << "      lathe_q[c] = lathe_on && e < E ? " << qat("lathe_i", "e") << " * " << c2 << " : 0.0f;\n";
    if (d.part == 0) o << "      lathe_dq[c] = 0.0f;\n";
    o << "    }\n";
    o << "    #pragma unroll\n    for (int c = 0; c < " << nV << "; ++c) {\n";
    o << "      const int e = " << el("c") << ";\n";
    o << "      lathe_g[c] = lathe_on && e < EV ? " << gat("lathe_i", "e") << " : 0.0f;\n";
    o << "      if (lathe_on && e < EV) lathe_D = fmaf(lathe_g[c], " << oat("lathe_i", "e") << ", lathe_D);\n";
    o << "    }\n";
    o << "    for (int lathe_d = 1; lathe_d < NS; lathe_d <<= 1) lathe_D += __shfl_xor_sync(0xffffffffu, lathe_D, lathe_d);\n";
    o << "    const float lathe_lse = lathe_on ? " << oat("lathe_i", "EV") << " : 0.0f;\n";
    if (d.causal && d.part == 0)
      o << "    const long long lathe_qe = lathe_q0 + TR < lathe_L ? lathe_q0 + TR : lathe_L;\n"
        << "    const long long lathe_kend = lathe_qe < lathe_S ? lathe_qe : lathe_S;  // keys up to the tile's last query\n";
    else
      o << "    const long long lathe_kend = lathe_S;\n";
    o << "    for (long long lathe_k0 = 0; lathe_k0 < lathe_kend; lathe_k0 += TR) {\n";
    o << "      __syncthreads();  // the previous tile is consumed\n";
    o << "      for (int lathe_x = threadIdx.x; lathe_x < TR * E; lathe_x += blockDim.x) {\n";
    o << "        const int j = lathe_x / E, e = lathe_x % E;\n";
    o << "        lathe_Ks[j][e] = lathe_k0 + j < lathe_kend ? " << kat("lathe_k0 + j", "e") << " : 0.0f;\n";
    o << "      }\n";
    o << "      for (int lathe_x = threadIdx.x; lathe_x < TR * EV; lathe_x += blockDim.x) {\n";
    o << "        const int j = lathe_x / EV, c = lathe_x % EV;\n";
    o << "        lathe_Vs[j][c] = lathe_k0 + j < lathe_kend ? " << vat("lathe_k0 + j", "c") << " : 0.0f;\n";
    o << "      }\n";
    o << "      __syncthreads();\n";
    o << "      const int lathe_kn = lathe_kend - lathe_k0 < TR ? (int)(lathe_kend - lathe_k0) : TR;\n";
    o << "      for (int j = 0; j < lathe_kn; ++j) {\n";
    o << "      float lathe_s = 0.0f, lathe_dp = 0.0f;\n";
    o << dot("lathe_s", "lathe_q", "lathe_Ks", "j", nEc, "E") << dot("lathe_dp", "lathe_g", "lathe_Vs", "j", nVc, "EV") << reduce2;
    if (d.causal || d.has_mask || d.part == 2) o << "      const long long key = lathe_k0 + j;\n";
    o << "      const bool lathe_ok = lathe_on" << (d.causal ? " && key <= lathe_i" : "") << ";\n";
    if (d.has_mask) o << "      if (lathe_ok) lathe_s += " << mat("lathe_i", "key") << " * " << l2 << ";\n";
    o << "      const float lathe_p = lathe_ok ? exp2f(lathe_s - lathe_lse) : 0.0f;\n";
    o << "      const float lathe_ds = lathe_p * (lathe_dp - lathe_D);\n";
    if (d.part == 0)
      o << axpy("lathe_dq", "lathe_ds", "lathe_Ks", "j", nEc, "E");
    else
      o << "      if (lathe_h == 0 && lathe_on) " << buf(0) << "[(bh * lathe_L + lathe_i) * lathe_S + key] = lathe_ds;\n";
    o << "      }\n";
    o << "    }\n";
    if (d.part == 0) {
      o << "    if (lathe_on) {\n";
      o << "      #pragma unroll\n      for (int c = 0; c < " << nE << "; ++c) {\n";
      o << "        const int e = " << el("c") << ";\n";
      o << "        if (e < E) " << buf(0) << "[(bh * lathe_L + lathe_i) * E + e] = lathe_dq[c] * " << sc << ";\n";
      o << "      }\n    }\n";
    }
  } else {
    o << "    const long long lathe_k0 = (lathe_blk % lathe_nt) * TR, lathe_j = lathe_k0 + lathe_r;  // this thread's key row\n";
    o << "    const bool lathe_on = lathe_j < lathe_S;\n";
    o << "    float lathe_k[" << nE << "], lathe_v[" << nV << "], lathe_dk[" << nE << "], lathe_dv[" << nV << "];\n";
    o << "    #pragma unroll\n    for (int c = 0; c < " << nE << "; ++c) {\n";
    o << "      const int e = " << el("c") << ";\n";
    o << "      lathe_k[c] = lathe_on && e < E ? " << kat("lathe_j", "e") << " : 0.0f;\n";
    o << "      lathe_dk[c] = 0.0f;\n";
    o << "    }\n";
    o << "    #pragma unroll\n    for (int c = 0; c < " << nV << "; ++c) {\n";
    o << "      const int e = " << el("c") << ";\n";
    o << "      lathe_v[c] = lathe_on && e < EV ? " << vat("lathe_j", "e") << " : 0.0f;\n";
    o << "      lathe_dv[c] = 0.0f;\n";
    o << "    }\n";
    o << "    const long long lathe_qst = " << (d.causal ? "lathe_k0 < lathe_L ? lathe_k0 : lathe_L" : "0") << ";  // "
      << (d.causal ? "earlier query rows see none of the tile's keys" : "every query row") << "\n";
    o << "    for (long long lathe_q0 = lathe_qst; lathe_q0 < lathe_L; lathe_q0 += TR) {\n";
    o << "      __syncthreads();  // the previous query tile is consumed\n";
    o << "      for (int lathe_x = threadIdx.x; lathe_x < TR * E; lathe_x += blockDim.x) {\n";
    o << "        const int i = lathe_x / E, e = lathe_x % E;\n";
    o << "        lathe_Qs[i][e] = lathe_q0 + i < lathe_L ? " << qat("lathe_q0 + i", "e") << " * " << c2 << " : 0.0f;\n";
    o << "      }\n";
    o << "      for (int lathe_x = threadIdx.x; lathe_x < TR * EV; lathe_x += blockDim.x) {\n";
    o << "        const int i = lathe_x / EV, c = lathe_x % EV;\n";
    o << "        lathe_Gs[i][c] = lathe_q0 + i < lathe_L ? " << gat("lathe_q0 + i", "c") << " : 0.0f;\n";
    o << "      }\n";
    // D and lse of the tile's query rows: the NS threads of row r sum a share of dO·O each
    o << "      {\n";
    o << "        const long long i = lathe_q0 + lathe_r;\n";
    o << "        float lathe_D = 0.0f;\n";
    o << "        if (i < lathe_L)\n";
    o << "          for (int c = lathe_h; c < EV; c += NS) lathe_D = fmaf(" << gat("i", "c") << ", " << oat("i", "c") << ", lathe_D);\n";
    o << "        for (int lathe_d = 1; lathe_d < NS; lathe_d <<= 1) lathe_D += __shfl_xor_sync(0xffffffffu, lathe_D, lathe_d);\n";
    o << "        if (lathe_h == 0) {\n";
    o << "          lathe_Ds[lathe_r] = lathe_D;\n";
    o << "          lathe_lses[lathe_r] = i < lathe_L ? " << oat("i", "EV") << " : 0.0f;\n";
    o << "        }\n";
    o << "      }\n";
    o << "      __syncthreads();\n";
    o << "      const int lathe_qn = lathe_L - lathe_q0 < TR ? (int)(lathe_L - lathe_q0) : TR;\n";
    o << "      for (int r = 0; r < lathe_qn; ++r) {\n";
    o << "      float lathe_s = 0.0f, lathe_dp = 0.0f;\n";
    o << dot("lathe_s", "lathe_k", "lathe_Qs", "r", nEc, "E") << dot("lathe_dp", "lathe_v", "lathe_Gs", "r", nVc, "EV") << reduce2;
    if (d.causal || d.has_mask) o << "      const long long i = lathe_q0 + r;\n";
    o << "      const bool lathe_ok = lathe_on" << (d.causal ? " && lathe_j <= i" : "") << ";\n";
    if (d.has_mask) o << "      if (lathe_ok) lathe_s += " << mat("i", "lathe_j") << " * " << l2 << ";\n";
    o << "      const float lathe_p = lathe_ok ? exp2f(lathe_s - lathe_lses[r]) : 0.0f;\n";
    o << "      const float lathe_ds = lathe_p * (lathe_dp - lathe_Ds[r]);\n";
    o << axpy("lathe_dv", "lathe_p", "lathe_Gs", "r", nVc, "EV") << axpy("lathe_dk", "lathe_ds", "lathe_Qs", "r", nEc, "E");
    o << "      }\n";
    o << "    }\n";
    o << "    if (lathe_on) {  // dK was summed against Q·scale·log2 e: × 1/log2 e\n";
    o << "      const long long lathe_row = (bh * lathe_S + lathe_j) * (E + EV);\n";
    o << "      #pragma unroll\n      for (int c = 0; c < " << nE << "; ++c) {\n";
    o << "        const int e = " << el("c") << ";\n";
    o << "        if (e < E) " << buf(0) << "[lathe_row + e] = lathe_dk[c] * " << il2 << ";\n";
    o << "      }\n";
    o << "      #pragma unroll\n      for (int c = 0; c < " << nV << "; ++c) {\n";
    o << "        const int e = " << el("c") << ";\n";
    o << "        if (e < EV) " << buf(0) << "[lathe_row + E + e] = lathe_dv[c];\n";
    o << "      }\n    }\n";
  }
  o << "  }\n}\n";
  CudaKernel k;
  k.name = f.name;
  k.launch.work = loop::mul(d.B, loop::binary(Op::IDiv, loop::add(by_key ? d.S : d.L, loop::const_int(kTile - 1)), loop::const_int(kTile)));
  k.launch.per_block = true;
  k.launch.block = kTile * kNS;
  k.launch.tiled = std::string("attention backward (") + what[d.part] + "): " + T + " " + (by_key ? "key" : "query") + " rows a block, " +
                   NS + " threads a row, " + (by_key ? "query" : "K/V") + " tiles of " + T + " rows in shared memory";
  k.source = "// launch: " + k.launch.describe() + "\n" + o.str();
  return k;
}

}  // namespace lathe::cuda
