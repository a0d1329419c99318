// render_rnn.cpp — the fused recurrence (Extern "rnn", core/ir/rnn_op.h) as a CUDA kernel.
//
// Batch entries are independent through the whole recurrence, so each block runs the T steps
// of one batch entry (a grid-stride loop over entries when there are more than blocks), with
// barriers between the steps instead of a launch per step. Thread x owns the hidden units
// x, x + blockDim, …: it sums its units' gate pre-activations over h (RT read along a row of
// consecutive units: coalesced), applies the gate arithmetic, and keeps the new h in
// registers until every thread has read the old one. The state lives in the result itself:
// row T holds h (read by every thread), row T+1 the LSTM cell (each unit read and written by
// its own thread only); GRU without linear_before_reset stages r ⊙ h in the step's Y row.
// With the `proj` flag (the node computes its input projections from X, WT and xb) the
// projections of all T·B rows are a parallel phase first: a kernel NAME_proj launched just
// before the recurrence (CudaKernel::pre_name) writes them to the program's scratch
// ([T·B, G·H], 8 rows × 1 column a thread, the whole grid), and the recurrence reads that
// scratch as it reads XP — the steps carry only the h·RT products.
// The arithmetic is the interpreter's (core/interp/eval_rnn.cpp) in f32.
#include <cstring>
#include <sstream>

#include "backends/cuda/render.h"
#include "core/ir/diag.h"
#include "core/ir/rnn_op.h"

namespace lathe::cuda {

namespace {

std::string fconst(float f) {
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  std::ostringstream o;
  o << "__int_as_float(" << b << ")";
  return o.str();
}

// the body of `float NAME(float v)` for activation a
std::string act_body(const RnnAct& a) {
  const std::string A = fconst(a.alpha), B = fconst(a.beta);
  switch (a.kind) {
    case RnnActKind::Sigmoid: return "return 1.f / (1.f + expf(-v));";
    case RnnActKind::Tanh: return "return tanhf(v);";
    case RnnActKind::Relu: return "return v < 0.f ? 0.f : v;";
    case RnnActKind::LeakyRelu: return "return v < 0.f ? v * " + A + " : v;";
    case RnnActKind::ThresholdedRelu: return "return v > " + A + " ? v : 0.f;";
    case RnnActKind::ScaledTanh: return "return tanhf(v * " + B + ") * " + A + ";";
    case RnnActKind::HardSigmoid: return "return fminf(1.f, fmaxf(0.f, v * " + A + " + " + B + "));";
    case RnnActKind::Elu: return "return v < 0.f ? (expf(v) - 1.f) * " + A + " : v;";
    case RnnActKind::Softsign: return "return v / (fabsf(v) + 1.f);";
    case RnnActKind::Softplus: return "return logf(expf(v) + 1.f);";
    case RnnActKind::Affine: return "return v * " + A + " + " + B + ";";
    case RnnActKind::Count: break;
  }
  return "return v;";
}

}  // namespace

CudaKernel render_rnn(const loop::LoopFunc& f, NodeRef n) {
  auto sp = rnn_spec(n);
  LATHE_CHECK(sp && static_cast<int>(f.buffers.size()) == 1 + sp->num_inputs(), "render_rnn: not an rnn kernel");
  const RnnSpec& s = *sp;
  constexpr int kThreads = 256;
  const int64_t U = (s.H + kThreads - 1) / kThreads;  // units per thread
  const std::string& nm = f.name;
  std::ostringstream o;
  const char* kinds[] = {"RNN", "GRU", "LSTM"};
  o << "// kernel " << nm << " (rnn: " << kinds[static_cast<int>(s.kind)] << " over T=" << s.T << " steps"
    << (s.reverse ? ", reverse" : "") << ", B=" << s.B << ", H=" << s.H << "; one block per batch entry, the steps inside)\n";
  for (int i = 0; i < s.num_acts(); ++i)
    o << "static __device__ __forceinline__ float " << nm << "_act" << i << "(float v) { " << act_body(s.act[i]) << " }\n";
  o << "static __device__ __forceinline__ float " << nm << "_clip(float v) { "
    << (s.has_clip ? "return fminf(" + fconst(s.clip) + ", fmaxf(-" + fconst(s.clip) + ", v));" : std::string("return v;"))
    << " }\n";
  // the kernel's parameters (the projection phase takes the same ones)
  std::ostringstream ps;
  ps << "(float* __restrict__ out, const float* __restrict__ xp, const float* __restrict__ rt";
  if (s.has_h0) ps << ", const float* __restrict__ h0";
  if (s.has_c0) ps << ", const float* __restrict__ c0";
  if (s.has_peep) ps << ", const float* __restrict__ P";
  if (s.has_lens) ps << ", const int* __restrict__ lens";
  if (s.has_rbh) ps << ", const float* __restrict__ rbh";
  if (s.has_proj) ps << ", const float* __restrict__ wt";
  if (s.has_xb) ps << ", const float* __restrict__ xb";
  if (s.has_proj) ps << ", float* __restrict__ lathe_scratch";
  ps << ")";
  constexpr int kProjRows = 8, kProjThreads = 128;
  const int64_t TB = s.T * s.B, GH = s.gates() * s.H;
  const int64_t proj_tiles = (TB + kProjRows - 1) / kProjRows * ((GH + kProjThreads - 1) / kProjThreads);
  if (s.has_proj) {  // XP[r, j] = xb[C0 + j] + Σ_k X[r, k] · WT[k, C0 + j] into the scratch, before the steps
    o << "extern \"C\" __global__ void " << nm << "_proj" << ps.str() << " {\n";
    o << "  // the input projections of all " << TB << " rows: " << kProjRows << " rows x 1 column a thread\n";
    o << "  const long long TB = " << TB << "LL, GH = " << GH << "LL, I = " << s.I << "LL, XW = " << s.XW << "LL, C0 = " << s.col0
      << "LL;\n";
    o << "  constexpr int PR = " << kProjRows << ", PC = " << kProjThreads << ";\n";
    o << "  const long long TC = (GH + PC - 1) / PC;\n";
    o << "  for (long long tile = blockIdx.x; tile < (TB + PR - 1) / PR * TC; tile += gridDim.x) {\n";
    o << "    const long long r0 = tile / TC * PR, j = tile % TC * PC + threadIdx.x;\n";
    o << "    if (j >= GH) continue;\n";
    o << "    const float bias = " << (s.has_xb ? "xb[C0 + j]" : std::string("0.f")) << ";\n";
    o << "    float a[PR];\n";
    o << "    const float* xr[PR];\n";
    o << "    #pragma unroll\n    for (int q = 0; q < PR; ++q) {\n";
    o << "      a[q] = bias;\n";
    o << "      xr[q] = xp + (r0 + q < TB ? r0 + q : TB - 1) * I;  // rows past the end: a copy, not written\n";
    o << "    }\n";
    o << "    const float* wc = wt + C0 + j;\n";
    o << "    for (long long k = 0; k < I; ++k) {\n";
    o << "      const float wk = wc[k * XW];\n";
    o << "      #pragma unroll\n      for (int q = 0; q < PR; ++q) a[q] += xr[q][k] * wk;\n";
    o << "    }\n";
    o << "    #pragma unroll\n    for (int q = 0; q < PR; ++q)\n";
    o << "      if (r0 + q < TB) lathe_scratch[(r0 + q) * GH + j] = a[q];\n";
    o << "  }\n}\n";
  }
  o << "extern \"C\" __global__ void " << nm << ps.str() << " {\n";
  o << "  const long long T = " << s.T << "LL, B = " << s.B << "LL, H = " << s.H << "LL, GH = " << s.gates() * s.H << "LL";
  if (!s.has_proj) o << ", XW = " << s.XW << "LL, C0 = " << s.col0 << "LL";  // XP's row width, this direction's columns
  o << ";\n";
  o << "  for (long long b = blockIdx.x; b < B; b += gridDim.x) {\n";
  o << "    float* hs = out + (T * B + b) * H;  // the state h\n";
  if (s.kind == RnnKind::Lstm) o << "    float* cs = out + ((T + 1) * B + b) * H;  // the cell\n";
  o << "    for (long long i = threadIdx.x; i < H; i += blockDim.x) {\n";
  o << "      hs[i] = " << (s.has_h0 ? "h0[b * H + i]" : "0.f") << ";\n";
  if (s.kind == RnnKind::Lstm) o << "      cs[i] = " << (s.has_c0 ? "c0[b * H + i]" : "0.f") << ";\n";
  o << "    }\n    __syncthreads();\n";
  o << "    long long len = T;\n";
  if (s.has_lens) o << "    len = lens[b] < 0 ? 0 : (lens[b] > T ? T : lens[b]);\n";
  o << "    for (long long step = 0; step < T; ++step) {\n";
  o << "      const long long t = " << (s.reverse ? "T - 1 - step" : "step") << ";\n";
  o << "      float* y = out + (t * B + b) * H;\n";
  o << "      if (t >= len) {  // past this entry's length (the whole block agrees)\n";
  o << "        for (long long i = threadIdx.x; i < H; i += blockDim.x) y[i] = 0.f;\n";
  o << "        continue;\n      }\n";
  // x(j): the step's gate input j (column j of this direction's projections)
  auto x = [&](const std::string& j) { return "x[" + j + "]"; };
  if (s.has_proj)
    o << "      const float* x = lathe_scratch + (t * B + b) * GH;  // the projection phase's row\n";
  else
    o << "      const float* x = xp + (t * B + b) * XW + C0;\n";
  o << "      float hn[" << U << "];\n";
  const bool gru_two = s.kind == RnnKind::Gru && !s.lbr;
  if (gru_two) o << "      float zs[" << U << "];\n";
  o << "      for (int u = 0; u < " << U << "; ++u) {\n";
  o << "        const long long i = threadIdx.x + (long long)u * blockDim.x;\n";
  o << "        if (i >= H) break;\n";
  const std::string F = nm + "_act0", G = nm + "_act1", Hh = nm + "_act2", C = nm + "_clip";
  if (s.kind == RnnKind::Rnn) {
    o << "        float a = " << x("i") << ";\n";
    o << "        for (long long k = 0; k < H; ++k) a += hs[k] * rt[k * GH + i];\n";
    o << "        hn[u] = " << F << "(" << C << "(a));\n";
  } else if (s.kind == RnnKind::Gru) {
    o << "        float az = " << x("i") << ", ar = " << x("H + i") << (s.lbr ? std::string(", ah = ") + (s.has_rbh ? "rbh[i]" : "0.f") : "") << ";\n";
    o << "        for (long long k = 0; k < H; ++k) {\n";
    o << "          const float hk = hs[k];\n";
    o << "          const float* w = rt + k * GH + i;\n";
    o << "          az += hk * w[0];\n          ar += hk * w[H];\n";
    if (s.lbr) o << "          ah += hk * w[2 * H];\n";
    o << "        }\n";
    o << "        const float z = " << F << "(" << C << "(az)), r = " << F << "(" << C << "(ar));\n";
    if (s.lbr) {
      o << "        const float hh = " << G << "(" << C << "(" << x("2 * H + i") << " + r * ah));\n";
      o << "        hn[u] = (1.f - z) * hh + z * hs[i];\n";
    } else {
      o << "        zs[u] = z;\n        y[i] = r * hs[i];  // r ⊙ h, read by every thread below\n";
    }
  } else {
    o << "        float ai = " << x("i") << ", ao = " << x("H + i") << ", af = " << x("2 * H + i") << ", ac = " << x("3 * H + i") << ";\n";
    o << "        for (long long k = 0; k < H; ++k) {\n";
    o << "          const float hk = hs[k];\n";
    o << "          const float* w = rt + k * GH + i;\n";
    o << "          ai += hk * w[0];\n          ao += hk * w[H];\n          af += hk * w[2 * H];\n          ac += hk * w[3 * H];\n";
    o << "        }\n";
    o << "        const float c = cs[i];\n";
    if (s.has_peep) o << "        ai += P[i] * c;\n        af += P[2 * H + i] * c;\n";
    o << "        const float ig = " << F << "(" << C << "(ai));\n";
    o << "        const float fg = " << (s.input_forget ? "1.f - ig" : F + "(" + C + "(af))") << ";\n";
    o << "        const float cn = fg * c + ig * " << G << "(" << C << "(ac));\n";
    if (s.has_peep) o << "        ao += P[H + i] * cn;\n";
    o << "        hn[u] = " << F << "(" << C << "(ao)) * " << Hh << "(cn);\n";
    o << "        cs[i] = cn;  // this thread's unit only\n";
  }
  o << "      }\n";
  if (gru_two) {
    o << "      __syncthreads();\n";
    o << "      for (int u = 0; u < " << U << "; ++u) {\n";
    o << "        const long long i = threadIdx.x + (long long)u * blockDim.x;\n";
    o << "        if (i >= H) break;\n";
    o << "        float ah = " << x("2 * H + i") << ";\n";
    o << "        for (long long k = 0; k < H; ++k) ah += y[k] * rt[k * GH + 2 * H + i];\n";
    o << "        const float hh = " << G << "(" << C << "(ah));\n";
    o << "        hn[u] = (1.f - zs[u]) * hh + zs[u] * hs[i];\n";
    o << "      }\n";
  }
  o << "      __syncthreads();  // every thread has read the old h\n";
  o << "      for (int u = 0; u < " << U << "; ++u) {\n";
  o << "        const long long i = threadIdx.x + (long long)u * blockDim.x;\n";
  o << "        if (i >= H) break;\n";
  o << "        hs[i] = hn[u];\n        y[i] = hn[u];\n      }\n";
  o << "      __syncthreads();\n";
  o << "    }\n  }\n}\n";
  CudaKernel k;
  k.name = nm;
  k.launch.work = loop::const_int(s.B);
  k.launch.per_block = true;
  k.launch.block = kThreads;
  k.launch.tiled = "rnn: one block per batch entry, " + std::to_string(s.T) + " steps inside";
  if (s.has_proj) {
    k.pre_name = nm + "_proj";
    k.pre_launch.work = loop::const_int(proj_tiles);
    k.pre_launch.per_block = true;
    k.pre_launch.block = kProjThreads;
    k.scratch_bytes = TB * GH * static_cast<int64_t>(sizeof(float));
    k.launch.tiled += "; the input projections first (" + k.pre_name + ": " + std::to_string(kProjRows) + " rows x 1 column a thread, " +
                      std::to_string(proj_tiles) + " blocks of " + std::to_string(kProjThreads) + ")";
  }
  k.source = "// launch: " + k.launch.describe() + "\n" + o.str();
  return k;
}

}  // namespace lathe::cuda
