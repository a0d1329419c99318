// render_tiled.cpp — contractions (matmul, batched matmul, convolution as implicit GEMM)
// rendered as shared-memory tiled kernels (see CudaEmitter::emit_tiled in emitter.h).
//
// Recognized shape of the loop IR (what lower_kernel gives a matmul-like reduce kernel):
//     for o1 { … for on {                   output loops (a perfect nest, Lets between)
//       let acc = 0
//       for r1 { … for rm {                  reduction loops of acc only
//         acc = acc + (EA * EB) } }
//       <epilogue: Lets, Stores that read acc> } }
// The output vars EA reads but EB does not form the M group, those EB reads but EA does
// not the N group, the rest the batch; the reduction vars form K. Each group is flattened
// (row-major over its loops), so a convolution's (n, oh, ow) becomes M and its (c, kh, kw)
// becomes K: EA then gathers the im2col tile straight from the input view (padding masks
// included), and nothing is materialized.
//
// The kernel: one block of 256 threads per BM×BN output tile (grid-stride over batch ×
// tiles); K advances in steps of 16, each step staging EA[BM×16] and EB[16×BN] in shared
// memory (in float, with out-of-range elements as 0) and accumulating a TM×TN register
// tile per thread (BM = 16·TM, BN = 16·TN). The epilogue runs the kernel's own statements
// per output element with acc taken from the registers.
// Integer contractions of 8-bit operands (an i32 accumulator of Cast(u8|i8) · Cast(u8|i8):
// matmul_integer, the int8 GEMMs) take the same tiles with K steps of 32 staged as bytes,
// 4 consecutive k packed in a 32-bit word ([k/4][m] and [k/4][n]), and the register tile
// summed by dp4a (4 products of 8-bit lanes and their sum in one instruction, i32 wrapping
// as the interpreter's sums); no split K.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "backends/cuda/emitter.h"
#include "core/ir/diag.h"
#include "core/loop/cost.h"

namespace lathe::cuda {

using loop::ExprKind;
using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

namespace {

void collect_vars(const ExprRef& e, std::set<std::string>& out) {
  if (e->kind == ExprKind::Var) out.insert(e->name);
  for (auto& a : e->args) collect_vars(a, out);
}

// Element stride of the first load in `e` as `v` moves by one (dims and other vars at
// typical values); -1 when it cannot be evaluated.
int64_t expr_stride(const ExprRef& e, const std::string& v, const loop::LoopFunc& f) {
  const loop::Expr* ld = nullptr;
  std::function<void(const ExprRef&)> find = [&](const ExprRef& x) {
    if (ld) return;
    if (x->kind == ExprKind::Load) { ld = x.get(); return; }
    for (auto& a : x->args) find(a);
  };
  find(e);
  if (!ld) return -1;
  std::set<std::string> vars;
  collect_vars(ld->args[0], vars);
  std::map<std::string, int64_t, std::less<>> env;
  for (auto& x : vars) env[x] = 3;
  for (auto& d : f.dims) env[d] = 4096;
  int64_t a = 0, b = 0;
  env[v] = 1;
  if (!loop::eval_index(ld->args[0], env, a)) return -1;
  env[v] = 2;
  if (!loop::eval_index(ld->args[0], env, b)) return -1;
  return std::abs(b - a);
}

struct Group {
  std::vector<const Stmt*> loops;  // outer to inner
  ExprRef size() const {
    ExprRef n = loop::const_int(1);
    for (const Stmt* l : loops) n = loop::mul(n, l->extent);
    return n;
  }
};

}  // namespace

bool CudaEmitter::emit_tiled(const std::vector<const Stmt*>& chain, const std::vector<Stmt>& prefix, LaunchShape& L) {
  // ---- recognize ----
  const std::vector<Stmt>& inner = chain.back()->body;
  if (inner.size() < 3 || inner[0].kind != StmtKind::Let || inner[1].kind != StmtKind::For) return false;
  const Stmt& init = inner[0];
  const Stmt& red = inner[1];
  const bool int8 = init.dtype == DType::I32;  // the dp4a form (checked on the product below)
  if ((init.dtype != DType::F32 && !int8) || red.reduces != std::vector<std::string>{init.var} || red.reduce_op != ReduceOp::Add)
    return false;
  if (!loop::is_const(init.value) || (int8 ? init.value->i != 0 : init.value->f != 0)) return false;
  std::vector<const Stmt*> rloops;
  for (const Stmt* l = &red;;) {
    rloops.push_back(l);
    if (l->body.size() == 1 && l->body[0].kind == StmtKind::For) {
      l = &l->body[0];
      if (l->reduces != red.reduces) return false;
      continue;
    }
    break;
  }
  const std::vector<Stmt>& rbody = rloops.back()->body;
  if (rbody.size() != 1 || rbody[0].kind != StmtKind::Assign || rbody[0].var != init.var) return false;
  const ExprRef& upd = rbody[0].value;
  if (upd->kind != ExprKind::Binary || upd->op != Op::Add || upd->args[0]->kind != ExprKind::Var ||
      upd->args[0]->name != init.var)
    return false;
  const ExprRef& prod = upd->args[1];
  if (prod->kind != ExprKind::Binary || prod->op != Op::Mul || prod->dtype != init.dtype) return false;
  auto byte_cast = [](const ExprRef& e) {  // Cast(i32) of an 8-bit value
    return e->kind == ExprKind::Cast && e->dtype == DType::I32 && (e->args[0]->dtype == DType::U8 || e->args[0]->dtype == DType::I8);
  };
  if (int8 && (!byte_cast(prod->args[0]) || !byte_cast(prod->args[1]))) return false;
  for (size_t i = 2; i < inner.size(); ++i)
    if (inner[i].kind == StmtKind::For) return false;
  for (const Stmt* l : chain)
    if (l->annot.parallel || l->annot.unroll || l->annot.vectorize) {
      if (l != chain.front() || !l->annot.parallel) return false;  // hand-scheduled: keep it
    }

  std::set<std::string> ovars, rvars, dims(f_.dims.begin(), f_.dims.end());
  for (const Stmt* l : chain) ovars.insert(l->var);
  for (const Stmt* l : rloops) rvars.insert(l->var);
  std::set<std::string> va, vb;
  collect_vars(prod->args[0], va);
  collect_vars(prod->args[1], vb);
  for (const auto* s : {&va, &vb})
    for (auto& v : *s)
      if (!ovars.count(v) && !rvars.count(v) && !dims.count(v)) return false;  // reads a Let
  Group M, N, B, K;
  for (const Stmt* l : chain) {
    bool a = va.count(l->var), b = vb.count(l->var);
    (a && !b ? M : !a && b ? N : B).loops.push_back(l);
  }
  K.loops = rloops;
  if (M.loops.empty() || N.loops.empty()) return false;

  // ---- tile shape ----
  int TM = 4, TN = 4;
  {
    std::map<std::string, int64_t, std::less<>> env;
    for (auto& d : f_.dims) env[d] = 256;
    int64_t m = 0, n = 0, b = 0;
    // 8x8 per thread only when that still gives two waves of blocks on a 132-SM GPU.
    // Measured on an H100 (LATHE_CUDA_TILE): 4x8/8x4 for the convolution's 64 output
    // channels is slower than 4x4 (0.30 vs 0.25 ms), so mixed tiles are not chosen.
    if (loop::eval_index(M.size(), env, m) && loop::eval_index(N.size(), env, n) && loop::eval_index(B.size(), env, b) &&
        m >= 128 && n >= 128 && (m / 128) * (n / 128) * b >= 2 * 132)
      TM = TN = 8;
  }
  if (forced_tile_.first) TM = forced_tile_.first, TN = forced_tile_.second;  // LATHE_CUDA_TILE
  const int BM = 16 * TM, BN = 16 * TN, BK = int8 ? 32 : 16;

  // ---- split K ----
  // Too few output tiles to fill the GPU (the GPT-2 block's 128 x 768 projections: 24
  // tiles for 132 SMs) and a long constant K: S blocks share a tile, each taking a slice
  // of K. Their partial tiles meet in a module-scope workspace; the last block of a tile
  // to finish (an atomic count per tile) adds the S partials up in slice order (the same
  // sum whichever block is last) and runs the epilogue.
  int S = 1;
  int64_t tiles = 0, k_const = 0, k_slice = 0;
  {
    std::map<std::string, int64_t, std::less<>> env;
    int64_t m = 0, n = 0, b = 0;
    if (f_.dims.empty() && loop::eval_index(M.size(), env, m) && loop::eval_index(N.size(), env, n) &&
        loop::eval_index(B.size(), env, b) && loop::eval_index(K.size(), env, k_const)) {
      tiles = b * ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
      if (split_k_ && !int8 && tiles < 132 && k_const >= 512) {
        S = static_cast<int>(std::min<int64_t>(8, (2 * 132 + tiles - 1) / tiles));
        while (S > 1 && k_const / S < 128) --S;
        if (S * tiles * BM * BN * 4 > (int64_t(64) << 20)) S = 1;  // workspace ≤ 64 MiB
      }
      k_slice = (k_const + S - 1) / S;
      k_slice = (k_slice + BK - 1) / BK * BK;
    }
  }
  const std::string ws = "lathe_ws_" + f_.name, sem = "lathe_sem_" + f_.name;
  if (S > 1)
    globals_ += "__device__ float " + ws + "[" + std::to_string(S * tiles * BM * BN) + "];  // split-K partial tiles\n" +
                "__device__ unsigned int " + sem + "[" + std::to_string(tiles) + "];  // finished slices per tile\n";

  // which operand index runs fastest for coalesced tile loads
  const std::string& m_in = M.loops.back()->var;
  const std::string& n_in = N.loops.back()->var;
  const std::string& k_in = K.loops.back()->var;
  bool a_k_fast = expr_stride(prod->args[0], k_in, f_) == 1 && expr_stride(prod->args[0], m_in, f_) != 1;
  bool b_k_fast = expr_stride(prod->args[1], k_in, f_) == 1 && expr_stride(prod->args[1], n_in, f_) != 1;

  // ---- emit ----
  auto decode = [&](const Group& g, const std::string& flat, int depth) {
    ExprRef rest = loop::var(flat);
    for (size_t k = g.loops.size(); k-- > 0;) {
      ExprRef v = k == 0 ? rest : loop::binary(Op::Mod, rest, g.loops[k]->extent);
      out_ << pad(depth) << "const long long " << g.loops[k]->var << " = " << expr(v) << ";\n";
      if (k > 0) rest = loop::binary(Op::IDiv, rest, g.loops[k]->extent);
    }
  };
  for (const Stmt& s : prefix) emit_stmt(s, 1);
  out_ << "  const long long lathe_M = " << expr(M.size()) << ", lathe_N = " << expr(N.size())
       << ", lathe_K = " << expr(K.size()) << ", lathe_B = " << expr(B.size()) << ";\n";
  out_ << "  const long long lathe_tm = (lathe_M + " << BM - 1 << ") / " << BM << ", lathe_tn = (lathe_N + " << BN - 1
       << ") / " << BN << ";\n";
  const std::string acc_t = int8 ? "int" : "float", zero = int8 ? "0" : "0.0f";
  const std::string dp4a = "lathe_dp4a_" + f_.name;
  if (int8) {  // [k/4][m] and [k/4][n] words of 4 bytes (k, k+1, k+2, k+3)
    out_ << "  __shared__ __align__(16) unsigned int lathe_As[" << BK / 4 << "][" << BM + 4 << "];  // [k/4][m], 4 k a word\n";
    out_ << "  __shared__ __align__(16) unsigned int lathe_Bs[" << BK / 4 << "][" << BN + 4 << "];  // [k/4][n]\n";
    const bool ua = prod->args[0]->args[0]->dtype == DType::U8, ub = prod->args[1]->args[0]->dtype == DType::U8;
    globals_ += std::string("static __device__ __forceinline__ int ") + dp4a + "(unsigned int a, unsigned int b, int c) {\n" +
                "#ifdef __CUDA_ARCH__\n  int d;\n  asm(\"dp4a." + (ua ? "u32" : "s32") + "." + (ub ? "u32" : "s32") +
                " %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(c));\n  return d;\n#else\n" +
                "  unsigned int s = (unsigned int)c;\n  for (int i = 0; i < 32; i += 8) s += (unsigned int)((int)(" +
                (ua ? "unsigned char" : "signed char") + ")(a >> i) * (int)(" + (ub ? "unsigned char" : "signed char") +
                ")(b >> i));\n  return (int)s;\n#endif\n}\n";
  } else {
    out_ << "  __shared__ __align__(16) float lathe_As[" << BK << "][" << BM + 4 << "];  // [k][m]\n";
    out_ << "  __shared__ __align__(16) float lathe_Bs[" << BK << "][" << BN + 4 << "];  // [k][n]\n";
  }
  out_ << "  const int lathe_tx = threadIdx.x % 16, lathe_ty = threadIdx.x / 16;\n";
  std::string nS = std::to_string(S);
  out_ << "  for (long long lathe_tile = blockIdx.x; lathe_tile < lathe_B * lathe_tm * lathe_tn" << (S > 1 ? " * " + nS : "")
       << "; lathe_tile += gridDim.x) {\n";
  if (S > 1) {
    out_ << "    const long long lathe_t = lathe_tile / " << S << ", lathe_s = lathe_tile % " << S << ";  // tile, K slice\n";
    out_ << "    const long long lathe_kbeg = lathe_s * " << k_slice << "LL, lathe_kend = lathe_kbeg + " << k_slice
         << "LL < lathe_K ? lathe_kbeg + " << k_slice << "LL : lathe_K;\n";
  } else {
    out_ << "    const long long lathe_t = lathe_tile, lathe_kbeg = 0, lathe_kend = lathe_K;\n";
  }
  out_ << "    const long long lathe_n0 = (lathe_t % lathe_tn) * " << BN << ";\n";
  out_ << "    const long long lathe_m0 = ((lathe_t / lathe_tn) % lathe_tm) * " << BM << ";\n";
  if (!B.loops.empty()) out_ << "    const long long lathe_b = lathe_t / (lathe_tn * lathe_tm);\n";
  out_ << "    " << acc_t << " lathe_acc[" << TM << "][" << TN << "];\n";
  out_ << "    #pragma unroll\n    for (int lathe_i = 0; lathe_i < " << TM << "; ++lathe_i)\n      #pragma unroll\n      for (int lathe_j = 0; lathe_j < " << TN
       << "; ++lathe_j) lathe_acc[lathe_i][lathe_j] = " << zero << ";\n";
  out_ << "    for (long long lathe_k0 = lathe_kbeg; lathe_k0 < lathe_kend; lathe_k0 += " << BK << ") {\n";
  auto stage = [&](const char* tile, const Group& G, bool is_a, int W, bool k_fast, const ExprRef& val, const char* what) {
    out_ << "      for (int lathe_e = threadIdx.x; lathe_e < " << W * BK << "; lathe_e += 256) {  // " << what << "\n";
    if (k_fast)
      out_ << "        const int lathe_kk = lathe_e % " << BK << ", lathe_xx = lathe_e / " << BK << ";\n";
    else
      out_ << "        const int lathe_xx = lathe_e % " << W << ", lathe_kk = lathe_e / " << W << ";\n";
    std::string x0 = is_a ? "lathe_m0" : "lathe_n0";
    std::string X = is_a ? "lathe_M" : "lathe_N";
    out_ << "        const long long lathe_x = " << x0 << " + lathe_xx, lathe_k = lathe_k0 + lathe_kk;\n";
    out_ << "        " << (int8 ? "unsigned int" : "float") << " lathe_v = " << (int8 ? "0u" : "0.0f") << ";\n";
    out_ << "        if (lathe_x < " << X << " && lathe_k < lathe_kend) {\n";
    decode(B, "lathe_b", 5);
    decode(G, "lathe_x", 5);
    decode(K, "lathe_k", 5);
    if (int8)  // the 8-bit value's bits
      out_ << "          lathe_v = (unsigned char)(" << expr(val->args[0]) << ");\n";
    else
      out_ << "          lathe_v = " << expr(val) << ";\n";
    out_ << "        }\n";
    if (int8)
      out_ << "        ((unsigned char*)&" << tile << "[lathe_kk / 4][lathe_xx])[lathe_kk % 4] = (unsigned char)lathe_v;\n";
    else
      out_ << "        " << tile << "[lathe_kk][lathe_xx] = lathe_v;\n";
    out_ << "      }\n";
  };
  stage("lathe_As", M, true, BM, a_k_fast, prod->args[0], "A tile (M x K)");
  stage("lathe_Bs", N, false, BN, b_k_fast, prod->args[1], "B tile (K x N)");
  out_ << "      __syncthreads();\n";
  const std::string vt = int8 ? "uint4" : "float4", et = int8 ? "unsigned int" : "float";
  out_ << "      #pragma unroll\n      for (int lathe_q = 0; lathe_q < " << (int8 ? BK / 4 : BK) << "; ++lathe_q) {\n";
  out_ << "        " << et << " lathe_a[" << TM << "], lathe_bv[" << TN << "];\n";
  for (int i = 0; i < TM; i += 4)
    out_ << "        *(" << vt << "*)&lathe_a[" << i << "] = *(const " << vt << "*)&lathe_As[lathe_q][lathe_ty * " << TM << " + " << i << "];\n";
  for (int j = 0; j < TN; j += 4)
    out_ << "        *(" << vt << "*)&lathe_bv[" << j << "] = *(const " << vt << "*)&lathe_Bs[lathe_q][lathe_tx * " << TN << " + " << j << "];\n";
  out_ << "        #pragma unroll\n        for (int lathe_i = 0; lathe_i < " << TM << "; ++lathe_i)\n          #pragma unroll\n          for (int lathe_j = 0; lathe_j < "
       << TN << "; ++lathe_j) lathe_acc[lathe_i][lathe_j] = "
       << (int8 ? dp4a + "(lathe_a[lathe_i], lathe_bv[lathe_j], lathe_acc[lathe_i][lathe_j]);\n"
                : std::string("fmaf(lathe_a[lathe_i], lathe_bv[lathe_j], lathe_acc[lathe_i][lathe_j]);\n"));
  out_ << "      }\n";
  out_ << "      __syncthreads();\n";
  out_ << "    }\n";
  if (S > 1) {
    std::string tile_elems = std::to_string(BM * BN);
    std::string at = "(lathe_ty * " + std::to_string(TM) + " + lathe_i) * " + std::to_string(BN) + " + lathe_tx * " +
                     std::to_string(TN) + " + lathe_j";
    auto each = [&](const std::string& body) {
      out_ << "      #pragma unroll\n      for (int lathe_i = 0; lathe_i < " << TM << "; ++lathe_i)\n        #pragma unroll\n"
           << "        for (int lathe_j = 0; lathe_j < " << TN << "; ++lathe_j) " << body << "\n";
    };
    out_ << "    {  // split K: publish this slice's partial tile; the tile's last block sums the " << S << " slices\n";
    out_ << "      float* lathe_w = " << ws << " + (lathe_t * " << S << " + lathe_s) * " << tile_elems << ";\n";
    each("lathe_w[" + at + "] = lathe_acc[lathe_i][lathe_j];");
    out_ << "      __threadfence();\n      __syncthreads();\n";
    out_ << "      __shared__ unsigned int lathe_last;\n";
    out_ << "      if (threadIdx.x == 0) lathe_last = atomicAdd(&" << sem << "[lathe_t], 1u) == " << S - 1 << "u;\n";
    out_ << "      __syncthreads();\n";
    out_ << "      if (!lathe_last) continue;\n";
    out_ << "      __threadfence();\n";
    out_ << "      const float* lathe_p = " << ws << " + lathe_t * " << S << " * " << tile_elems << ";\n";
    each("{\n          float lathe_sum = 0.0f;\n          for (int lathe_q = 0; lathe_q < " + nS +
         "; ++lathe_q) lathe_sum += __ldcg(&lathe_p[lathe_q * " + tile_elems + " + " + at +
         "]);\n          lathe_acc[lathe_i][lathe_j] = lathe_sum;\n        }");
    out_ << "      if (threadIdx.x == 0) " << sem << "[lathe_t] = 0;  // ready for the next launch\n";
    out_ << "    }\n";
  }
  // epilogue, per output element of the thread's register tile
  out_ << "    #pragma unroll\n    for (int lathe_i = 0; lathe_i < " << TM << "; ++lathe_i)\n      #pragma unroll\n      for (int lathe_j = 0; lathe_j < " << TN
       << "; ++lathe_j) {\n";
  out_ << "        const long long lathe_m = lathe_m0 + lathe_ty * " << TM << " + lathe_i, lathe_n = lathe_n0 + lathe_tx * " << TN
       << " + lathe_j;\n";
  out_ << "        if (lathe_m >= lathe_M || lathe_n >= lathe_N) continue;\n";
  decode(B, "lathe_b", 4);
  decode(M, "lathe_m", 4);
  decode(N, "lathe_n", 4);
  emit_chain_lets(chain, 4);
  out_ << "        " << acc_t << " " << init.var << " = lathe_acc[lathe_i][lathe_j];\n";
  std::vector<Stmt> epilogue(inner.begin() + 2, inner.end());
  emit_block(epilogue, 4);
  out_ << "      }\n";
  out_ << "  }\n";
  L.work = loop::mul(B.size(), loop::mul(loop::binary(Op::IDiv, loop::add(M.size(), loop::const_int(BM - 1)), loop::const_int(BM)),
                                         loop::binary(Op::IDiv, loop::add(N.size(), loop::const_int(BN - 1)), loop::const_int(BN))));
  if (S > 1) L.work = loop::mul(L.work, loop::const_int(S));
  L.per_block = true;
  L.block = 256;
  L.tiled = std::to_string(BM) + "x" + std::to_string(BN) + " tiles, K step " + std::to_string(BK) + ", " +
            std::to_string(TM) + "x" + std::to_string(TN) + " per thread" + (int8 ? ", 8-bit operands by dp4a" : "") +
            (S > 1 ? ", K split " + std::to_string(S) + " ways" : "");
  return true;
}

}  // namespace lathe::cuda
