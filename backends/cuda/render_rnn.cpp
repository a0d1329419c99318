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
  if (s.has_proj)  // the projection of column j (of this direction's) of X's row, summed here per step
    o << "static __device__ __forceinline__ float " << nm << "_xp(const float* __restrict__ X, const float* __restrict__ wt, "
      << "const float* __restrict__ xb, long long row, long long j) {\n"
      << "  float a = " << (s.has_xb ? "xb[" + std::to_string(s.col0) + "LL + j]" : std::string("0.f")) << ";\n"
      << "  for (long long k = 0; k < " << s.I << "LL; ++k) a += X[row * " << s.I << "LL + k] * wt[k * " << s.XW << "LL + "
      << s.col0 << "LL + j];\n  return a;\n}\n";
  o << "extern \"C\" __global__ void " << nm << "(float* __restrict__ out, const float* __restrict__ xp, const float* __restrict__ rt";
  if (s.has_h0) o << ", const float* __restrict__ h0";
  if (s.has_c0) o << ", const float* __restrict__ c0";
  if (s.has_peep) o << ", const float* __restrict__ P";
  if (s.has_lens) o << ", const int* __restrict__ lens";
  if (s.has_rbh) o << ", const float* __restrict__ rbh";
  if (s.has_proj) o << ", const float* __restrict__ wt";
  if (s.has_xb) o << ", const float* __restrict__ xb";
  o << ") {\n";
  o << "  const long long T = " << s.T << "LL, B = " << s.B << "LL, H = " << s.H << "LL, GH = " << s.gates() * s.H
    << "LL, XW = " << s.XW << "LL, C0 = " << s.col0 << "LL;\n";
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
  auto x = [&](const std::string& j) {
    return s.has_proj ? nm + "_xp(xp, wt, " + (s.has_xb ? "xb" : "nullptr") + ", t * B + b, " + j + ")" : "x[" + j + "]";
  };
  if (!s.has_proj) o << "      const float* x = xp + (t * B + b) * XW + C0;\n";
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
  k.source = "// launch: " + k.launch.describe() + "\n" + o.str();
  return k;
}

}  // namespace lathe::cuda
