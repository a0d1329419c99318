// cuda_kernels_test.cpp — the cuda backend's hand-written kernels without a GPU: what they are
// made of (the structure that makes them fast, read from the rendered text) and that NVRTC
// compiles them for sm_80 and sm_90 with no warnings. Their results are checked against the
// interpreter on the fake driver (cuda.emulated.*, quant.gemv_q4.cuda_emulated) and on a GPU
// (tests/gpu/run.sh); their speed only on a GPU (lathe bench --backend cuda: gemv-int4,
// matmul-int8, attention-grad, and the lstm model).
#include <gtest/gtest.h>

#include <random>

#include "backends/cuda/cuda_backend.h"
#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/attention_op.h"
#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/ir/rnn_op.h"
#include "core/rewrite/quantize.h"

namespace lathe {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

void compile_clean(const std::string& source, const std::string& name) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    cuda::NvrtcOptions o;
    o.arch = arch;
    try {
      cuda::NvrtcResult r = cuda::nvrtc_compile(source, name + ".cu", o);
      EXPECT_EQ(r.warnings, "") << name << " for " << arch;
    } catch (const UserError& e) {
      ADD_FAILURE() << name << " for " << arch << ":\n" << e.what();
    }
  }
}

// y = x · Wᵀ with W [N, K] quantized to int4 in blocks of B: the gemv_q4 Extern
Program gemv_q4_program(int64_t M, int64_t N, int64_t K, int64_t B) {
  HostTensor w(DType::F32, {N, K});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < N * K; ++i) w.ptr<float>()[i] = u(rng);
  Graph g = Graph::from_outputs({{"y", linear(input("x", {M, K}), from_host(w)).node()}});
  QuantizeOptions o;
  o.mode = QuantMode::WeightInt4;
  o.block = B;
  return build_program(quantize_graph(g, o).graph);
}

// gemv_q4: X quantized once per thread block into shared memory (one warp a block of X), the
// weights read G bytes a lane (16: one 16-byte load) for 4 rows that share X's registers,
// and summed by __dp2a; no lane re-reads X's block to find its max (the 626 -> 131 GB/s
// regression: every byte's lane scanned its block of B floats).
TEST(CudaKernels, GemvQ4QuantizesXOnceAndSumsByDp2a) {
  struct C {
    int64_t M, N, K, B;
    const char* bytes;  // the run a lane reads
  };
  std::string all = cuda::cuda_prelude();
  int progs = 0;
  for (C c : {C{1, 97, 768, 32, "16 bytes"}, C{3, 31, 96, 16, "8 bytes"}, C{5, 7, 144, 48, "8 bytes"}, C{2, 5, 16, 8, "4 bytes"},
              C{16, 61, 192, 96, "16 bytes"}, C{1, 3, 12, 6, "1 bytes"}, C{4, 11, 2560, 32, "16 bytes"}, C{1, 5, 24, 12, "2 bytes"}}) {
    SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + " blocks of " + std::to_string(c.B));
    Program p = gemv_q4_program(c.M, c.N, c.K, c.B);
    int found = 0;
    for (int k = 0; k < p.num_kernels(); ++k) {
      NodeRef root = p.kg.kernels.at(k).root;
      if (!(root->op == Op::Extern && root->attrs.name == "gemv_q4")) continue;
      ++found;
      cuda::CudaKernel kern = cuda::render_program_kernel(p, k, "q" + std::to_string(progs++) + "_");
      const std::string& s = kern.source;
      EXPECT_NE(s.find("__shared__ __align__(16) short xq["), std::string::npos) << s;
      EXPECT_EQ(count(s, "fabsf("), 1u) << s;  // the block max: once, in the quantizing warp
      EXPECT_NE(kern.launch.tiled.find(c.bytes), std::string::npos) << kern.launch.tiled;
      const std::string bytes = c.bytes;
      if (bytes != "1 bytes" && bytes != "2 bytes") {
        EXPECT_GE(count(s, "__dp2a_"), 6u) << s;  // Σ q (2), then 4 per word
      }
      if (bytes == "16 bytes") {
        EXPECT_NE(s.find("*(const uint4*)wp"), std::string::npos) << s;
      }
      EXPECT_TRUE(kern.launch.per_block);
      EXPECT_EQ(kern.launch.block, 256);
      all += "\n" + s;
    }
    EXPECT_EQ(found, 1);
  }
  compile_clean(all, "gemv_q4");
}

// The rnn with its input projections inside (`proj`): the projections of all T·B rows are a
// kernel of their own launched first over the whole grid (pre_name), into the program's scratch,
// and the recurrence reads them as it reads XP; the steps no longer sum X · WT (the 3.6 -> 9.6 ms
// lstm regression).
TEST(CudaKernels, RnnProjectionsRunBeforeTheSteps) {
  std::string all = cuda::cuda_prelude();
  int progs = 0;
  for (RnnKind kind : {RnnKind::Lstm, RnnKind::Gru, RnnKind::Rnn}) {
    for (bool xb : {true, false}) {
      RnnSpec s;
      s.kind = kind;
      s.T = 5, s.B = 3, s.H = 9, s.I = 7;
      s.XW = 2 * s.gates() * s.H, s.col0 = s.gates() * s.H;  // the second direction's columns
      s.has_proj = true, s.has_xb = xb;
      s.act[0].kind = RnnActKind::Sigmoid, s.act[1].kind = RnnActKind::Tanh, s.act[2].kind = RnnActKind::Tanh;
      if (kind == RnnKind::Rnn) s.act[0].kind = RnnActKind::Tanh;
      NodeRef x = prim::input("x", DType::F32, {s.T * s.B, s.I}), rt = prim::input("rt", DType::F32, {s.H, s.gates() * s.H});
      NodeRef wt = prim::input("wt", DType::F32, {s.I, s.XW}), b = xb ? prim::input("xb", DType::F32, {s.XW}) : nullptr;
      NodeRef n = rnn_call(s, x, rt, nullptr, nullptr, nullptr, nullptr, nullptr, wt, b);
      Program p = build_program(Graph::from_outputs({{"y", n}}));
      ASSERT_EQ(p.num_kernels(), 1);
      cuda::CudaKernel kern = cuda::render_program_kernel(p, 0, "r" + std::to_string(progs++) + "_");
      EXPECT_EQ(kern.pre_name, kern.name + "_proj");
      EXPECT_EQ(kern.scratch_bytes, s.T * s.B * s.gates() * s.H * 4);
      EXPECT_TRUE(kern.pre_launch.per_block);
      const std::string& src = kern.source;
      size_t main_at = src.find("void " + kern.name + "(");
      ASSERT_NE(main_at, std::string::npos) << src;
      ASSERT_NE(src.find("void " + kern.pre_name + "("), std::string::npos) << src;
      std::string recurrence = src.substr(main_at);
      EXPECT_EQ(recurrence.find("wt["), std::string::npos) << recurrence;  // no projection inside the steps
      EXPECT_NE(recurrence.find("lathe_scratch + (t * B + b) * GH"), std::string::npos) << recurrence;
      all += "\n" + src;
    }
  }
  // without `proj` (XP given): one kernel, no scratch
  RnnSpec s;
  s.kind = RnnKind::Gru, s.T = 4, s.B = 2, s.H = 5, s.XW = 15;
  s.act[1].kind = RnnActKind::Tanh;
  NodeRef xp = prim::input("xp", DType::F32, {s.T * s.B, s.XW}), rt = prim::input("rt", DType::F32, {s.H, 3 * s.H});
  Program p = build_program(Graph::from_outputs({{"y", rnn_call(s, xp, rt, nullptr, nullptr, nullptr, nullptr, nullptr)}}));
  cuda::CudaKernel kern = cuda::render_program_kernel(p, 0, "r_plain_");
  EXPECT_EQ(kern.pre_name, "");
  EXPECT_EQ(kern.scratch_bytes, 0);
  all += "\n" + kern.source;
  compile_clean(all, "rnn");
}

// matmul_integer: the shared-memory tiled contraction with 8-bit tiles packed 4 k a word and
// a dp4a per (row, column, 4 k) (it ran as the plain one-output-per-thread reduction, 0.3x f32)
TEST(CudaKernels, Int8ContractionsSumByDp4a) {
  struct C {
    DType a, b;
    const char* ptx;
  };
  std::string all = cuda::cuda_prelude();
  int progs = 0;
  for (C c : {C{DType::U8, DType::I8, "dp4a.u32.s32"}, C{DType::I8, DType::I8, "dp4a.s32.s32"}, C{DType::U8, DType::U8, "dp4a.u32.u32"},
              C{DType::I8, DType::U8, "dp4a.s32.u32"}}) {
    Tensor a = input("a", {37, 70}, c.a), b = input("b", {70, 29}, c.b);
    Program p = build_program(Graph::from_outputs({{"c", matmul_integer(a, b).node()}}));
    ASSERT_EQ(p.num_kernels(), 1);
    cuda::CudaKernel kern = cuda::render_program_kernel(p, 0, "i" + std::to_string(progs++) + "_");
    EXPECT_NE(kern.launch.tiled.find("dp4a"), std::string::npos) << kern.launch.tiled;
    EXPECT_NE(kern.source.find(c.ptx), std::string::npos) << kern.source;
    EXPECT_NE(kern.source.find("unsigned int lathe_As[8]"), std::string::npos) << kern.source;
    all += "\n" + kern.source;
  }
  // a float contraction keeps the float tiles
  Tensor fa = input("fa", {37, 70}), fb = input("fb", {70, 29});
  Program pf = build_program(Graph::from_outputs({{"c", matmul(fa, fb).node()}}));
  cuda::CudaKernel kf = cuda::render_program_kernel(pf, 0, "f_");
  EXPECT_EQ(kf.source.find("dp4a"), std::string::npos);
  EXPECT_NE(kf.source.find("float lathe_As[16]"), std::string::npos) << kf.source;
  all += "\n" + kf.source;
  compile_clean(all, "int8");
}

// The fused attention backward: shared-memory tiles, 4 threads a row joined by shuffles, for
// each part (dQ, dK|dV, dS); with LATHE_CUDA_FLASH=0 or head dims past 128 the loop IR kernel
// (one row per thread, every K/V row re-read by every thread: 20 ms for the bench's 12 heads x
// T 1024 where the definition's gradient took 0.95 ms)
TEST(CudaKernels, AttentionBackwardStagesTilesAndSplitsRows) {
  std::string all = cuda::cuda_prelude();
  int progs = 0;
  for (bool causal : {true, false})
  for (bool mask : {true, false}) {
    NodeRef q = prim::input("q", DType::F32, {2, 3, 37, 16}), k = prim::input("k", DType::F32, {2, 3, 37, 16});
    NodeRef v = prim::input("v", DType::F32, {2, 3, 37, 16}), m = prim::input("m", DType::F32, {2, 1, 1, 37});
    Tensor tq(q), tk(k), tv(v), tm(m);
    std::vector<Tensor> params{tq, tk, tv};
    if (mask) params.push_back(tm);
    auto g = grad(sum(Tensor(attention_call(q, k, v, mask ? m : nullptr, causal, 0.25)) * Tensor(q)), params);
    std::vector<std::pair<std::string, NodeRef>> outs{{"dq", g[0].node()}, {"dk", g[1].node()}, {"dv", g[2].node()}};
    if (mask) outs.push_back({"dm", g[3].node()});
    Program p = build_program(Graph::from_outputs(outs));
    int parts = 0;
    for (int kk = 0; kk < p.num_kernels(); ++kk) {
      if (p.funcs[kk].kind != "attention_bwd") continue;
      ++parts;
      cuda::CudaKernel kern = cuda::render_program_kernel(p, kk, "a" + std::to_string(progs++) + "_");
      EXPECT_NE(kern.source.find("__shared__ __align__(16) float lathe_"), std::string::npos) << kern.source;
      EXPECT_NE(kern.source.find("__shfl_xor_sync"), std::string::npos);
      EXPECT_NE(kern.source.find("*(const float4*)&"), std::string::npos);  // head dims 16: float4 chunks
      EXPECT_EQ(kern.launch.block, 128);
      EXPECT_TRUE(kern.launch.per_block);
      all += "\n" + kern.source;
      setenv("LATHE_CUDA_FLASH", "0", 1);
      cuda::CudaKernel plain = cuda::render_program_kernel(p, kk, "b" + std::to_string(progs++) + "_");
      unsetenv("LATHE_CUDA_FLASH");
      EXPECT_EQ(plain.source.find("__shared__"), std::string::npos);
    }
    EXPECT_EQ(parts, mask ? 3 : 2);  // dQ, dK|dV, dS (the mask's gradient)
  }
  compile_clean(all, "attention_bwd");
}

}  // namespace
}  // namespace lathe
