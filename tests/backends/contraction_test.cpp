// contraction_test.cpp — convolutions and other grouped contractions through the packed
// matmul lowering (implicit im2col in the packing step), and matmuls with fused epilogues
// (bias, GELU, residual), against the interpreter on the backend under test.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "diff_util.h"

namespace lathe {
namespace {

// The register tile's rows a matmul kernel was scheduled with ("MR=7" in its schedule log):
// the host's MR, or MR - 1 where that pads M less (fit_matmul_rows); -1 without a GEMM.
int scheduled_mr(const std::string& ir) {
  size_t at = ir.find("matmul: MR=");
  return at == std::string::npos ? -1 : std::atoi(ir.c_str() + at + 11);
}

int count_kind(const Program& p, const std::string& kind) {
  int n = 0;
  for (auto& k : p.kg.kernels) n += k.kind == kind;
  return n;
}

struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  std::vector<int64_t> stride, pad, dil;
  int64_t groups;
  bool bias;
};

Graph conv_graph(const ConvCase& t) {
  Conv2dOptions o;
  o.stride = t.stride;
  o.padding = t.pad;
  o.dilation = t.dil;
  o.groups = t.groups;
  Tensor x = input("x", {t.n, t.c, t.h, t.w});
  Tensor w = input("w", {t.k, t.c / t.groups, t.r, t.s});
  std::optional<Tensor> b;
  if (t.bias) b = input("b", {t.k});
  return Graph::from_outputs({{"y", conv2d(x, w, b, o).node()}});
}

TEST(Contraction, ConvIsOneMatmulKernel) {
  Program p = build_program(conv_graph({2, 5, 9, 11, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
  EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
  EXPECT_EQ(count_kind(p, "matmul"), 1) << test::loop_ir_of(p);
}

TEST(Contraction, ConvShapesMatchInterpreter) {
  test::DiffBatch batch;
  std::vector<ConvCase> cases = {
      {1, 3, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},      // batch 1, padding
      {2, 5, 9, 11, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},      // stride 2, odd sizes, bias
      {3, 13, 7, 6, 33, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},    // 1x1, K not a multiple of 8/32
      {2, 4, 12, 10, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true},     // dilation 2
      {1, 6, 10, 10, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, false},    // groups 2
      {2, 3, 17, 5, 40, 5, 2, {3, 1}, {2, 0}, {1, 1}, 1, false},    // non-square kernel and stride
      {1, 64, 14, 14, 37, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   // K > KC split needs partial sums
      {4, 2, 3, 3, 3, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, false},      // output 1x1
      // output rows of >= 32 columns: B is packed run by run (copies, no gathers)
      {2, 3, 6, 45, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},     // runs crossing panels, padding
      {1, 4, 9, 71, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false},     // stride 2 along a run
      {2, 3, 8, 40, 7, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false},     // dilation 2
      {1, 5, 2, 64, 33, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},    // 1x1, rows of exactly 2 panels
      {3, 2, 5, 33, 4, 2, 5, {1, 1}, {0, 2}, {1, 1}, 1, false},     // 33-wide rows, asymmetric kernel
      // late layers: more channels than positions, M split over the threads
      {1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},    // 3x3 at 7x7, prime channels
      {1, 19, 13, 13, 71, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},  // 1x1 stride 2 (downsample)
  };
  for (auto& c : cases) {
    std::string label = "conv n" + std::to_string(c.n) + " c" + std::to_string(c.c) + " " + std::to_string(c.h) + "x" +
                        std::to_string(c.w) + " k" + std::to_string(c.k) + " " + std::to_string(c.r) + "x" +
                        std::to_string(c.s) + " stride" + std::to_string(c.stride[0]) + " pad" + std::to_string(c.pad[0]) +
                        " dil" + std::to_string(c.dil[0]) + " g" + std::to_string(c.groups);
    Graph g = conv_graph(c);
    Program p = build_program(g);
    EXPECT_EQ(count_kind(p, "matmul"), 1) << label << "\n" << test::loop_ir_of(p);
    batch.add(label, g);
  }
  // conv1d and a relu epilogue
  Tensor x1 = input("x", {2, 3, 29}), w1 = input("w", {5, 3, 4});
  batch.add("conv1d stride 2 pad 1", Graph::from_outputs({{"y", conv1d(x1, w1, std::nullopt, 2, 1).node()}}));
  Tensor x3 = input("x", {3, 4, 150}), w3 = input("w", {6, 4, 5});
  batch.add("conv1d long rows pad 2", Graph::from_outputs({{"y", conv1d(x3, w3, std::nullopt, 1, 2).node()}}));
  Conv2dOptions same;
  same.padding = {1, 1};
  Tensor x2 = input("x", {2, 8, 9, 9}), w2 = input("w", {16, 8, 3, 3}), b2 = input("b", {16});
  batch.add("conv + bias + relu", Graph::from_outputs({{"y", relu(conv2d(x2, w2, b2, same)).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

TEST(Contraction, EpilogueIsFusedIntoTheMatmul) {
  Tensor x = input("x", {33, 70}), w = input("w", {70, 45}), b = input("b", {45});
  Program p = build_program(Graph::from_outputs({{"y", gelu(matmul(x, w) + b).node()}}));
  EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
  EXPECT_EQ(count_kind(p, "matmul"), 1);
}

TEST(Contraction, EpiloguesMatchInterpreter) {
  test::DiffBatch batch;
  Tensor x = input("x", {33, 300}), w = input("w", {300, 45}), b = input("b", {45});
  batch.add("bias + gelu (erf)", Graph::from_outputs({{"y", gelu(matmul(x, w) + b).node()}}));
  batch.add("bias + gelu (tanh)", Graph::from_outputs({{"y", gelu(matmul(x, w) + b, "tanh").node()}}));
  Tensor h = input("h", {33, 45});
  batch.add("residual", Graph::from_outputs({{"y", (h + (matmul(x, w) + b)).node()}}));
  // the matmul is also an output: not fused, still right
  Tensor mm = matmul(x, w);
  batch.add("matmul also an output", Graph::from_outputs({{"y", relu(mm).node()}, {"m", mm.node()}}));
  // read by two kernels: not fused
  batch.add("two readers", Graph::from_outputs({{"y", relu(mm).node()}, {"z", sum(mm, {1}, false).node()}}));
  // batched, transposed operands with an epilogue (attention scores)
  Tensor q = input("q", {3, 17, 24}), k = input("k", {3, 19, 24});
  batch.add("q @ k^T * scale", Graph::from_outputs({{"y", (matmul(q, transpose(k, 1, 2)) * 0.125).node()}}));
  // epilogue reading the row dim (broadcast along columns)
  Tensor rb = input("rb", {33, 1});
  batch.add("row bias + tanh", Graph::from_outputs({{"y", tanh(matmul(x, w) + rb).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// M a multiple of MR (8 or 6) and N of NR (32 or 16): every register tile is whole, so the
// lowering leaves out the edge variant of the write-back and the row / column guards of the packing.
TEST(Contraction, WholeTilesHaveNoEdgeCode) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  Tensor x = input("x", {48, 70}), w = input("w", {70, 96}), b = input("b", {96});
  Program whole = build_program(Graph::from_outputs({{"y", gelu(matmul(x, w) + b).node()}}));
  std::string ir = test::loop_ir_of(whole);
  EXPECT_EQ(ir.find("(edge)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(" < mc)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(" < nc)"), std::string::npos) << ir;
  Tensor x2 = input("x", {33, 70}), w2 = input("w", {70, 45});
  Program edge = build_program(Graph::from_outputs({{"y", matmul(x2, w2).node()}}));
  EXPECT_NE(test::loop_ir_of(edge).find("(edge)"), std::string::npos) << test::loop_ir_of(edge);
}

TEST(Contraction, WholeTilesMatchInterpreter) {
  test::DiffBatch batch;
  Tensor x = input("x", {48, 300}), w = input("w", {300, 96}), b = input("b", {96});
  batch.add("whole tiles, K split, bias + gelu", Graph::from_outputs({{"y", gelu(matmul(x, w) + b, "tanh").node()}}));
  // one N block: the M range is split over the threads (each split a multiple of MR)
  Tensor x2 = input("x", {40, 24}), w2 = input("w", {24, 32});
  batch.add("whole tiles, M splits", Graph::from_outputs({{"y", relu(matmul(x2, w2)).node()}}));
  // whole rows only, and whole columns only: the other guard stays
  Tensor x3 = input("x", {16, 24}), w3 = input("w", {24, 45});
  batch.add("whole rows", Graph::from_outputs({{"y", matmul(x3, w3).node()}}));
  Tensor x4 = input("x", {13, 24}), w4 = input("w", {24, 64});
  batch.add("whole columns", Graph::from_outputs({{"y", matmul(x4, w4).node()}}));
  Tensor q = input("q", {3, 16, 24}), k = input("k", {3, 32, 24});
  batch.add("batched whole tiles", Graph::from_outputs({{"y", (matmul(q, transpose(k, 1, 2)) * 0.125).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// Rows no multiple of MR (M = 128 tokens, 131, 7, a conv's 64 channels on MR 6): only the
// block's last, ragged A panel keeps the per-row guard; the whole panels are packed without
// it. Batch 1 and 64, a K over the KC block, a conv, against the interpreter. (N 200: 6-7
// B panels a job on 2 threads, so A is packed, not read in place: reads_a_in_place.)
TEST(Contraction, OnlyTheRaggedAPanelIsGuarded) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  const int mr = loop::host_matmul_params().mr;
  test::DiffBatch batch;
  for (int64_t m : {128, 131, 7}) {
    if (m % mr == 0) continue;
    Tensor x = input("x", {m, 300}), w = input("w", {300, 200});
    Graph g = Graph::from_outputs({{"y", relu(matmul(x, w)).node()}});
    std::string ir = test::loop_ir_of(build_program(g));
    batch.add("M=" + std::to_string(m), g);
    if (const int kmr = scheduled_mr(ir); kmr > 0 && m % kmr == 0) continue;  // the tile fitted M (AVX-512: M 7 on MR 7)
    if (ir.find(" A in place") != std::string::npos) continue;  // (many threads: few panels a job)
    EXPECT_NE(ir.find("pack A: k (ragged panel)"), std::string::npos) << "M=" << m << "\n" << ir;
    // the whole panels' loop: its element has no row guard (` < mc)`) in it
    size_t whole = ir.find("# pack A: k\n");
    ASSERT_NE(whole, std::string::npos) << "M=" << m << "\n" << ir;
    size_t line = ir.find("Ap[", whole);
    ASSERT_NE(line, std::string::npos);
    std::string store = ir.substr(line, ir.find('\n', line) - line);
    EXPECT_EQ(store.find(" < mc)"), std::string::npos) << "M=" << m << ": " << store;
  }
  Tensor xb = input("x", {64, 13, 37}), wb = input("w", {37, 29});
  batch.add("batch 64 of 13 rows", Graph::from_outputs({{"y", matmul(xb, wb).node()}}));
  batch.add("conv 64 channels, 3x3", conv_graph({1, 17, 23, 23, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
  batch.add("conv 131 channels, stride 2, batch 2", conv_graph({2, 5, 19, 19, 131, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false}));
  EXPECT_EQ(batch.run(), 0);
}

// Edge tiles loop over their valid rows and columns (variable extents), and a ragged last
// B panel copies its columns and zeroes the rest: no per-element column guard, which the
// llvm backend's vectorizer turned into masked loads and stores (vmaskmovps, ~40 cycles a
// store on the AVX2 host: 64 x 17x33 . 33x29 ran 3x slower than 18x32 . 32x32).
TEST(Contraction, EdgeTilesHaveNoColumnGuards) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  Tensor a = input("a", {64, 17, 33}), b = input("b", {64, 33, 29});
  Program p = build_program(Graph::from_outputs({{"y", matmul(a, b).node()}}));
  std::string ir = test::loop_ir_of(p);
  EXPECT_NE(ir.find("write back: column (edge)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("pack B: panel column (ragged panel)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(" < nc)"), std::string::npos) << ir;
}

TEST(Contraction, EdgeTilesMatchInterpreter) {
  test::DiffBatch batch;
  // batched small matmuls with prime sizes: ragged last panels, edge rows and columns
  for (auto [n, m, k, c] : std::vector<std::array<int64_t, 4>>{
           {64, 17, 33, 29}, {1, 17, 33, 29}, {3, 7, 13, 5}, {2, 31, 37, 41}, {1, 1, 19, 3}, {5, 13, 8, 47}}) {
    Tensor a = input("a", {n, m, k}), b = input("b", {n, k, c});
    batch.add("bmm " + std::to_string(n) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(c),
              Graph::from_outputs({{"y", matmul(a, b).node()}}));
  }
  // an epilogue on edge tiles, and K over one KC block (partial sums added in the edges)
  Tensor x = input("x", {33, 301}), w = input("w", {301, 45}), bias = input("bias", {45});
  batch.add("edges + bias + relu, K split", Graph::from_outputs({{"y", relu(matmul(x, w) + bias).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// The ragged A panel (M % MR rows, M no multiple of MR) runs a micro-kernel of only its rows
// (M = 128 tokens on MR 6: 2 rows, not 6 of which 4 are zero padding). The loop IR has that
// kernel's k loop with M % MR rows of accumulators; and against the interpreter: M = 1, 7,
// 77, 128, 129, 131, a prime M over several MC blocks, M split over the threads (few
// columns), batch 1 and 64, an epilogue (bias + GELU), B read in place (a 1x1 conv into 17
// channels), a conv with 131 channels (A is the weights) and constant weights (prepacked A).
TEST(Contraction, RaggedAPanelRunsOnlyItsRows) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  const loop::MatmulParams P = loop::host_matmul_params();
  const int nq = P.nr / P.lanes;
  test::DiffBatch batch;
  for (int64_t m : {1, 7, 77, 128, 129, 131, 293}) {
    Tensor x = input("x", {m, 300}), w = input("w", {300, 45}), b = input("b", {45});
    Graph g = Graph::from_outputs({{"y", gelu(matmul(x, w) + b).node()}});
    Program prog = build_program(g);
    const std::string ir = test::loop_ir_of(prog);
    const int kmr = scheduled_mr(ir) > 0 ? scheduled_mr(ir) : P.mr;  // (the tile may fit M: MR - 1)
    const int rows = static_cast<int>(m % kmr);
    if (rows != 0 && count_kind(prog, "matmul") > 0) {  // (M = 1 is a row of dot products, no GEMM)
      // the ragged kernel: its own k loop, whose step updates the accumulators of A's `rows`
      // rows (for each of the depths it takes a step), no more than the MR-row tile has
      size_t km = ir.find("for km in ");
      ASSERT_NE(km, std::string::npos) << "M=" << m << "\n" << ir;
      size_t end = std::min(ir.find("micro-kernel: the last depths", km), ir.find("tile<", km));
      ASSERT_NE(end, std::string::npos);
      std::string body = ir.substr(km, end - km);
      int broadcasts = 0;
      for (size_t at = body.find("broadcast<"); at != std::string::npos; at = body.find("broadcast<", at + 1)) ++broadcasts;
      // (one broadcast of a row's A per accumulator it updates: rows x NR/lanes a depth)
      EXPECT_GT(broadcasts, 0) << "M=" << m << "\n" << body;
      EXPECT_EQ(broadcasts % (rows * nq), 0) << "M=" << m << "\n" << body;
      EXPECT_LE(broadcasts, kmr * nq) << "M=" << m << ": accumulators within the tile's registers\n" << body;
    }
    batch.add("M=" + std::to_string(m) + " bias + gelu", g);
  }
  Tensor xs = input("x", {301, 97}), ws = input("w", {97, 16});
  batch.add("M 301 split over the threads, 16 columns", Graph::from_outputs({{"y", matmul(xs, ws).node()}}));
  Tensor x1 = input("x", {1, 1, 768}), w1 = input("w", {768, 131});
  batch.add("one row (batch 1, T 1)", Graph::from_outputs({{"y", matmul(x1, w1).node()}}));
  Tensor xb = input("x", {64, 13, 37}), wb = input("w", {37, 29});
  batch.add("batch 64 of 13 rows", Graph::from_outputs({{"y", matmul(xb, wb).node()}}));
  Tensor xq = input("x", {2, 12, 77, 64}), kq = input("k", {2, 12, 77, 64});
  batch.add("attention scores, T 77", Graph::from_outputs({{"y", matmul(xq, transpose(kq, 2, 3)).node()}}));
  Tensor xk = input("x", {7, 301}), wk = input("w", {301, 45});
  batch.add("M 7, K 301 (a remainder of depths)", Graph::from_outputs({{"y", matmul(xk, wk).node()}}));
  batch.add("1x1 conv into 17 channels (B in place)", conv_graph({1, 64, 16, 16, 17, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false}));
  batch.add("1x1 conv into 13 channels, 15x15 (B in place, ragged columns)", conv_graph({1, 67, 15, 15, 13, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false}));
  batch.add("conv 131 channels, stride 2, batch 2", conv_graph({2, 5, 19, 19, 131, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false}));
  HostTensor wt(DType::F32, {131, 13, 3, 3});
  for (int64_t i = 0; i < wt.numel(); ++i) wt.set_f64(i, std::cos(0.37 * static_cast<double>(i)));
  Conv2dOptions same;
  same.padding = {1, 1};
  Tensor xc = input("x", {1, 13, 14, 14});
  batch.add("conv, constant weights (131 channels)", Graph::from_outputs({{"y", relu(conv2d(xc, from_host(wt), std::nullopt, same)).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// The ragged last B panel (N % NR columns in fewer than NR / lanes vectors: a 14 x 14 map's
// 196 positions leave 4 on NR 16) runs a kernel of only those vectors, NQ / qn depths a step
// into the tile's unused accumulators. The loop IR has that kernel; against the interpreter:
// prime N (101, 37, 67), N 100, 196 and 1000, an odd K over several KC blocks (a remainder
// depth), batch 1 and 64, bias + GELU, a 14 x 14 3 x 3 conv with constant weights (prepacked
// A, B packed once for all jobs), a 7 x 7 conv whose channels are the columns (sums kept
// across K blocks in the tile scratch), stride 2.
TEST(Contraction, RaggedBPanelRunsOnlyItsVectors) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  const loop::MatmulParams P = loop::host_matmul_params();
  const int nq = P.nr / P.lanes;
  test::DiffBatch batch;
  for (int64_t n : {101, 100, 37, 67, 196, 1000}) {
    Tensor x = input("x", {29, 301}), w = input("w", {301, n}), b = input("b", {n});
    Graph g = Graph::from_outputs({{"y", gelu(matmul(x, w) + b).node()}});
    const std::string ir = test::loop_ir_of(build_program(g));
    const int64_t left = n % P.nr, qn = (left + P.lanes - 1) / P.lanes;
    const bool want = left > 0 && qn < nq && nq % qn == 0;
    EXPECT_EQ(ir.find("the ragged last panel") != std::string::npos, want) << "N=" << n << "\n" << ir;
    batch.add("29x301 . 301x" + std::to_string(n) + " + bias, gelu", g);
  }
  Tensor x1 = input("x", {1, 1, 300}), w1 = input("w", {300, 101});
  batch.add("one row, N 101", Graph::from_outputs({{"y", matmul(x1, w1).node()}}));
  Tensor xb = input("x", {64, 13, 37}), wb = input("w", {37, 67});
  batch.add("batch 64 of 13x37 . 37x67", Graph::from_outputs({{"y", matmul(xb, wb).node()}}));
  HostTensor wt(DType::F32, {29, 61, 3, 3});
  for (int64_t i = 0; i < wt.numel(); ++i) wt.set_f64(i, std::cos(0.37 * static_cast<double>(i)));
  Conv2dOptions same;
  same.padding = {1, 1};
  Tensor xc = input("x", {1, 61, 14, 14});
  batch.add("conv 61 -> 29 at 14x14, constant weights", Graph::from_outputs({{"y", relu(conv2d(xc, from_host(wt), std::nullopt, same)).node()}}));
  batch.add("conv 67 -> 37 at 7x7, batch 2 (channels the columns)", conv_graph({2, 67, 7, 7, 37, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
  batch.add("conv 31 -> 53, stride 2 from 29x29", conv_graph({1, 31, 29, 29, 53, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false}));
  EXPECT_EQ(batch.run(), 0);
}

// The ragged last B panel's kernel and the whole panels' kernel each sit in their own branch
// of an if around the whole tile, each with its own write-back (a join before the write-back
// made LLVM rotate the whole kernel's accumulators through copies and the stack every k
// step: MobileNetV2's 14 x 14 expansions at half speed). 1 x 1 convolutions with constant
// weights (A prepacked, more channels than positions: M split over the threads), a clip
// epilogue (ReLU6), against the interpreter: maps of 14 x 14, 10 x 10, 9 x 9 (ragged), 7 x 7,
// 5 x 5, 3 x 3 (not; the channels the columns there), odd and prime channel counts (a ragged A panel too), batch 1 and 3.
TEST(Contraction, RaggedBPanelTileHasItsOwnWriteBack) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  if (const char* e = std::getenv("LATHE_MATMUL_RAGGED_SPLIT"); e && std::string(e) == "0") GTEST_SKIP() << "LATHE_MATMUL_RAGGED_SPLIT=0";
  test::DiffBatch batch;
  struct Case { int64_t n, c, hw, k; };
  for (Case t : std::vector<Case>{{1, 64, 14, 384}, {3, 61, 14, 389}, {1, 96, 10, 577}, {3, 37, 9, 211},
                                  {1, 64, 7, 383}, {3, 29, 5, 131}, {1, 67, 3, 97}}) {
    HostTensor wt(DType::F32, {t.k, t.c, 1, 1});
    for (int64_t i = 0; i < wt.numel(); ++i) wt.set_f64(i, std::cos(0.37 * static_cast<double>(i)) * 0.3);
    HostTensor bt(DType::F32, {t.k});
    for (int64_t i = 0; i < bt.numel(); ++i) bt.set_f64(i, std::sin(0.11 * static_cast<double>(i)));
    Tensor x = input("x", {t.n, t.c, t.hw, t.hw});
    Tensor y = clamp(conv2d(x, from_host(wt), from_host(bt), Conv2dOptions{}), 0.0, 6.0);
    Graph g = Graph::from_outputs({{"y", y.node()}});
    const std::string label = std::to_string(t.n) + "x" + std::to_string(t.c) + "x" + std::to_string(t.hw) + "x" +
                              std::to_string(t.hw) + " -> " + std::to_string(t.k) + ", 1x1, relu6";
    const std::string ir = test::loop_ir_of(build_program(g));
    const size_t ragged = ir.find("the ragged last panel");
    if (ragged != std::string::npos) {  // its write-back comes before the whole panels' kernel
      const size_t wb = ir.find("write back", ragged), whole = ir.find("for kk in ", ragged);
      ASSERT_NE(whole, std::string::npos) << label << "\n" << ir;
      EXPECT_LT(wb, whole) << label << "\n" << ir;
    }
    if (t.n == 1 && (t.hw == 14 || t.hw == 10)) EXPECT_NE(ragged, std::string::npos) << label << "\n" << ir;
    batch.add(label, g);
  }
  EXPECT_EQ(batch.run(), 0);
}

// The block sizes: they nest (MC a multiple of MR, NC of NR, KC of 8), stay within the
// caps, cover the sizes, and give a multiple of the thread count of jobs where N allows.
TEST(Contraction, BlockingNestsAndSplitsJobsEvenly) {
  loop::MatmulParams p;
  auto jobs = [](const loop::MatmulBlocking& b, int64_t n, int64_t batch) { return batch * ((n + b.nc - 1) / b.nc) * b.msplit; };
  // the mlp and GPT-2 shapes on this machine's 2 threads: {M, N, K, batch, jobs}
  for (auto [m, n, k, batch, want] : std::vector<std::array<int64_t, 5>>{
           {256, 4096, 1024, 1, 8}, {256, 1024, 4096, 1, 2}, {128, 2304, 768, 1, 6}, {128, 768, 768, 1, 2},
           {128, 3072, 768, 1, 6}, {128, 768, 3072, 1, 2}, {128, 128, 64, 12, 12}, {128, 64, 128, 12, 12}}) {
    auto b = loop::matmul_blocking(m, n, k, batch, 2, p);
    EXPECT_EQ(jobs(b, n, batch), want) << m << "x" << n << "x" << k << " nc=" << b.nc;
    EXPECT_EQ(b.mc, 128) << m << "x" << n << "x" << k;  // one or two whole MC blocks
  }
  for (int threads : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 7, 8, 100, 129, 256, 1000})
      for (int64_t n : {1, 31, 32, 100, 512, 513, 2304, 5000})
        for (int64_t batch : {1, 3}) {
          auto b = loop::matmul_blocking(m, n, 300, batch, threads, p);
          std::string what = std::to_string(m) + "x" + std::to_string(n) + " batch " + std::to_string(batch) + " on " +
                             std::to_string(threads);
          EXPECT_TRUE(b.nc % p.nr == 0 && b.nc > 0 && b.nc <= p.nc) << what << " nc=" << b.nc;
          EXPECT_TRUE(b.mc % p.mr == 0 && b.mc > 0 && b.mc <= p.mc) << what << " mc=" << b.mc;
          EXPECT_TRUE(b.kc % 8 == 0 && b.kc <= p.kc) << what << " kc=" << b.kc;
          EXPECT_TRUE(b.msplit >= 1 && b.msplit <= (m + p.mr - 1) / p.mr) << what;
          int64_t panels = (n + p.nr - 1) / p.nr;
          if (panels % threads == 0) {
            EXPECT_EQ(jobs(b, n, batch) % threads, 0) << what << " nc=" << b.nc;
          }
        }
  // one N block and fewer jobs than threads: the longer side is split (M for a late conv
  // layer's 2048 channels × 49 positions, N for 32 rows × 256 columns)
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{2048, 49, 512}, {512, 196, 4608}, {130, 49, 333}}) {
    auto b = loop::matmul_blocking(m, n, k, 1, 2, p);
    EXPECT_EQ(b.msplit, 2) << m << "x" << n << "x" << k;
    EXPECT_GE(b.nc, n) << m << "x" << n << "x" << k;
  }
  auto wide = loop::matmul_blocking(32, 256, 784, 1, 2, p);
  EXPECT_EQ(wide.msplit, 1);
  EXPECT_EQ(jobs(wide, 256, 1), 2);
  // symbolic sizes: the caps
  auto s = loop::matmul_blocking(-1, -1, -1, -1, 2, p);
  EXPECT_EQ(s.nc, p.nc);
  EXPECT_EQ(s.mc, p.mc);
  EXPECT_EQ(s.kc, p.kc);
  EXPECT_EQ(s.msplit, 1);
}

// Shapes where the blocking splits N into more blocks than the cap needs (to even out the
// jobs), cuts M into equal MC blocks with ragged edges, and splits M for a lone N block.
TEST(Contraction, BalancedBlocksMatchInterpreter) {
  test::DiffBatch batch;
  Tensor x = input("x", {9, 20}), w = input("w", {20, 1056});
  batch.add("33 panels: N blocks rounded up to an even count", Graph::from_outputs({{"y", matmul(x, w).node()}}));
  Tensor x2 = input("x", {9, 20}), w2 = input("w", {20, 1050}), b2 = input("b", {1050});
  batch.add("N blocks with a ragged last panel, bias", Graph::from_outputs({{"y", (matmul(x2, w2) + b2).node()}}));
  Tensor x3 = input("x", {203, 300}), w3 = input("w", {300, 40});
  batch.add("two equal MC blocks, ragged rows, K split", Graph::from_outputs({{"y", relu(matmul(x3, w3)).node()}}));
  Tensor x4 = input("x", {300, 24}), w4 = input("w", {24, 32});
  batch.add("M splits cut into MC blocks", Graph::from_outputs({{"y", matmul(x4, w4).node()}}));
  Tensor q = input("q", {3, 20, 24}), k = input("k", {3, 64, 24});
  batch.add("odd batch: N split to even the jobs", Graph::from_outputs({{"y", (matmul(q, transpose(k, 1, 2)) * 0.125).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// split_efficiency: how the pool's threads share jobs (contiguous shares, then stealing).
TEST(Contraction, SplitEfficiencyWeighsJobSizes) {
  EXPECT_DOUBLE_EQ(loop::split_efficiency({5, 5}, 2), 1.0);
  EXPECT_DOUBLE_EQ(loop::split_efficiency({1, 1, 1}, 2), 0.75);              // an odd job count
  EXPECT_DOUBLE_EQ(loop::split_efficiency({64, 64, 64, 4}, 2), 196.0 / 256);  // four jobs, unequal
  EXPECT_DOUBLE_EQ(loop::split_efficiency({7}, 2), 0.5);                     // one thread idle
  EXPECT_DOUBLE_EQ(loop::split_efficiency({7}, 1), 1.0);
  EXPECT_DOUBLE_EQ(loop::split_efficiency({5, 5, 3}, 3), 13.0 / 15);
  EXPECT_DOUBLE_EQ(loop::split_efficiency({3, 1, 1, 1, 1, 1}, 2), 1.0);        // the second thread steals
  EXPECT_DOUBLE_EQ(loop::split_efficiency({}, 7), 1.0);
}

// The split a contraction's jobs get is judged by their sizes, not only their count: on 3
// threads two N blocks (or two matrices) get 3 M ranges each, not 2 (4 jobs on 3 threads);
// across thread counts, odd and prime sizes and batches, no split is worse than the old rule
// (the fewest M splits that give every thread a job) and whole shapes stay within the caps.
TEST(Contraction, BlockingJudgesTheJobsSizes) {
  loop::MatmulParams p;
  auto jobs_of = [&](const loop::MatmulBlocking& b, int64_t m, int64_t n, int64_t batch) {
    std::vector<int64_t> jobs;
    const int64_t panels = (n + p.nr - 1) / p.nr, per = b.nc / p.nr, mp = (m + p.mr - 1) / p.mr;
    const int64_t mper = (mp + b.msplit - 1) / b.msplit;
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t j = 0; j * per < panels; ++j)
        for (int64_t s = 0; s < b.msplit; ++s)
          jobs.push_back(std::min(per, panels - j * per) * std::clamp<int64_t>(mp - s * mper, 0, mper));
    return jobs;
  };
  auto two = loop::matmul_blocking(100, 16, 64, 2, 3, p);
  EXPECT_EQ(two.msplit, 3);
  EXPECT_GT(loop::split_efficiency(jobs_of(two, 100, 16, 2), 3), 0.85);  // 5 + 5 + 3 rows twice; 2 splits: 0.72
  for (int threads : {1, 2, 3, 4, 7, 8})
    for (int64_t m : {1, 5, 13, 97, 256, 1031})
      for (int64_t n : {1, 17, 49, 196, 211, 784, 3136})
        for (int64_t batch : {1, 2, 4}) {
          auto b = loop::matmul_blocking(m, n, 97, batch, threads, p);
          const std::string what = std::to_string(m) + "x" + std::to_string(n) + " batch " + std::to_string(batch) +
                                   " on " + std::to_string(threads) + ": nc " + std::to_string(b.nc) + " msplit " +
                                   std::to_string(b.msplit);
          ASSERT_TRUE(b.nc % p.nr == 0 && b.nc > 0 && b.nc <= p.nc) << what;
          ASSERT_TRUE(b.msplit >= 1 && b.msplit <= std::max<int64_t>(1, (m + p.mr - 1) / p.mr)) << what;
          const int64_t blocks = batch * ((n + b.nc - 1) / b.nc);
          if (blocks >= threads || b.msplit == 1) continue;
          loop::MatmulBlocking old = b;
          old.msplit = std::min<int64_t>((threads + blocks - 1) / blocks, (m + p.mr - 1) / p.mr);
          EXPECT_GE(loop::split_efficiency(jobs_of(b, m, n, batch), threads) + 1e-9,
                    loop::split_efficiency(jobs_of(old, m, n, batch), threads)) << what;
        }
}

// Job counts the threads do not divide and unequal jobs (prime sizes, 13 panels of N as a
// 14 x 14 layer's 196 positions, batches of 3 and 4, M split across two matrices), against
// the interpreter. Run it with LATHE_POOL_THREADS=1, 3 or 7 too: the pool then cuts the same
// jobs into other shares.
TEST(Contraction, OddJobCountsMatchInterpreter) {
  test::DiffBatch batch;
  Tensor x = input("x", {37, 53}), w = input("w", {53, 199});
  batch.add("13 panels of N, prime M and K", Graph::from_outputs({{"y", relu(matmul(x, w)).node()}}));
  Tensor q = input("q", {4, 13, 29}), k = input("k", {4, 29, 61});
  batch.add("batch 4, 4 panels of N each", Graph::from_outputs({{"y", matmul(q, k).node()}}));
  Tensor q3 = input("q", {3, 101, 7}), k3 = input("k", {3, 7, 16});
  batch.add("batch 3, one panel each: M split", Graph::from_outputs({{"y", matmul(q3, k3).node()}}));
  Tensor q2 = input("q", {2, 100, 64}), k2 = input("k", {2, 64, 16});
  batch.add("two matrices of one N panel: M split in each", Graph::from_outputs({{"y", matmul(q2, k2).node()}}));
  batch.add("conv 14 x 14, 11 -> 13 channels, batch 1",
            conv_graph({1, 11, 14, 14, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
  batch.add("conv 7 x 7, 17 -> 31 channels, batch 4",
            conv_graph({4, 17, 7, 7, 31, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false}));
  batch.add("conv 1x1 at 13 x 13, 5 -> 7 channels, batch 3",
            conv_graph({3, 5, 13, 13, 7, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true}));
  EXPECT_EQ(batch.run(), 0);
}

// Jobs that split M (one N block, fewer blocks than threads: a 14 x 14 layer) share one
// packed B, and a convolution's jobs that split N into narrow blocks (a 16 x 16 layer, a
// 7 x 7 layer after the swap) one packed A: a parallel pack step fills it, chunk by chunk, before the jobs run. Odd and
// prime channel counts, ragged panels and K blocks, stride 2, 1x1 and a plain matmul,
// against the interpreter (the sums are those of per-job packing, bit for bit).
TEST(Contraction, JobsShareOnePackedOperand) {
  Conv2dOptions same;
  same.padding = {1, 1};
  Conv2dOptions s2 = same;
  s2.stride = {2, 2};
  auto conv = [](int64_t n, int64_t c, int64_t h, int64_t k, int64_t r, const Conv2dOptions& o, bool residual) {
    Tensor x = input("x", {n, c, h, h}), w = input("w", {k, c, r, r}), b = input("b", {k});
    Tensor y = conv2d(x, w, b, o);
    if (residual) y = y + input("res", y.shape());
    return Graph::from_outputs({{"y", relu(y).node()}});
  };
  struct Case {
    std::string label;
    Graph g;
    std::string shared;  // what the schedule log says on 2+ threads ("": neither)
  };
  std::vector<Case> cases = {
      {"3x3 13x13 c29 k257", conv(1, 29, 13, 257, 3, same, false), "B packed once"},
      {"3x3 stride 2 27x27 c31 k263 + residual", conv(1, 31, 27, 263, 3, s2, true), "B packed once"},
      {"3x3 14x14 c64 k256, K split in blocks", conv(1, 64, 14, 256, 3, same, false), "B packed once"},
      {"1x1 19x19 c193 k401 + residual", conv(1, 193, 19, 401, 1, Conv2dOptions{}, true), "B packed once"},
      {"matmul 611x400 @ 400x97", Graph::from_outputs({{"y", matmul(input("x", {611, 400}), input("w", {400, 97})).node()}}),
       "B packed once"},
      {"3x3 7x7 c83 k300 (swapped: positions are A)", conv(1, 83, 7, 300, 3, same, true), "A packed once"},
      {"3x3 16x16 c61 k199 (two N blocks of 128 positions)", conv(1, 61, 16, 199, 3, same, false), "A packed once"},
      {"3x3 13x13 c29 k257 batch 64: blocks of 496 positions", conv(64, 29, 13, 257, 3, same, false), ""},
      {"3x3 5x5 c3 k17: too little to share", conv(1, 3, 5, 17, 3, same, false), ""},
  };
  test::DiffBatch batch;
  // The expected choices are those of a 2-thread machine (CI's): with more threads the job
  // split changes and so may which side is shared (seen on a 16-core GPU machine); the
  // interpreter comparison below runs everywhere.
  const bool threads = std::thread::hardware_concurrency() == 2;
  for (auto& c : cases) {
    std::string ir = test::loop_ir_of(build_program(c.g));
    if (threads && !std::getenv("LATHE_MATMUL_SHARED_PACK") && !std::getenv("LATHE_MATMUL_TILE")) {
      if (c.shared.empty()) {
        EXPECT_EQ(ir.find("packed once"), std::string::npos) << c.label << "\n" << ir;
      } else {
        EXPECT_NE(ir.find(c.shared), std::string::npos) << c.label << "\n" << ir;
      }
    }
    batch.add(c.label, c.g, 7, 4);  // K up to 1737: float sums of that length
  }
  EXPECT_EQ(batch.run(), 0);
  // a shared B over 3 MiB (K 4608 x 208 columns: the kernel's stack array) stays per job
  if (threads && !std::getenv("LATHE_MATMUL_SHARED_PACK") && !std::getenv("LATHE_MATMUL_TILE")) {
    std::string ir = test::loop_ir_of(build_program(conv(1, 512, 14, 512, 3, same, false)));
    EXPECT_EQ(ir.find("packed once"), std::string::npos) << ir;
  }
}

// x @ W^T (a tied LM head, a linear layer with W stored [out, in]): B's columns are W's
// rows, so B is packed panel by panel (NR rows of W at a time), not across all nc rows per k.
TEST(Contraction, TransposedBIsPackedPanelByPanel) {
  Tensor x = input("x", {5, 40}), w = input("w", {70, 40});
  std::string ir = test::loop_ir_of(build_program(Graph::from_outputs({{"y", matmul(x, transpose(w, 0, 1)).node()}})));
  EXPECT_NE(ir.find("pack B: NR-wide panels (B^T)"), std::string::npos) << ir;
  Tensor w2 = input("w", {40, 70});
  std::string plain = test::loop_ir_of(build_program(Graph::from_outputs({{"y", matmul(x, w2).node()}})));
  EXPECT_EQ(plain.find("(B^T)"), std::string::npos) << plain;
}

TEST(Contraction, TransposedBMatchesInterpreter) {
  test::DiffBatch batch;
  // {M, N, K}: batch-1 rows, a prime vocabulary, K over one KC block, 64 rows with ragged tiles
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1031, 300}, {7, 257, 77}, {64, 263, 300}, {13, 5, 3}}) {
    Tensor x = input("x", {m, k}), w = input("w", {n, k}), b = input("b", {n});
    std::string label = "x @ W^T " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    batch.add(label, Graph::from_outputs({{"y", matmul(x, transpose(w, 0, 1)).node()}}));
    batch.add(label + " + bias + gelu", Graph::from_outputs({{"y", gelu(matmul(x, transpose(w, 0, 1)) + b).node()}}));
  }
  // batched x @ W^T sharing one W (batch 3, then 64 of 1 row each)
  Tensor x3 = input("x", {3, 9, 50}), w3 = input("w", {101, 50});
  batch.add("batched x @ W^T", Graph::from_outputs({{"y", matmul(x3, transpose(w3, 0, 1)).node()}}));
  Tensor x4 = input("x", {64, 1, 37}), w4 = input("w", {61, 37});
  batch.add("batch 64 of one row @ W^T", Graph::from_outputs({{"y", matmul(x4, transpose(w4, 0, 1)).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// An epilogue reading a tensor through the matmul's grouped dims (a residual over a conv's
// output positions) splits the flat column into coordinates and sums them back: the
// simplifier folds that to the flat index, so the write-back vectorizes.
TEST(Contraction, SplitIndexSumsFoldBack) {
  using namespace loop;
  ExprRef x = add(var("n0"), var("c"));
  auto split2 = add(add(mul(var("m"), const_int(196)), mul(binary(Op::IDiv, x, const_int(14)), const_int(14))),
                    binary(Op::Mod, x, const_int(14)));
  EXPECT_EQ(print_expr(split2), "((m*196) + (n0 + c))");
  ExprRef h = binary(Op::Mod, binary(Op::IDiv, x, const_int(7)), const_int(5));
  auto split3 = add(add(mul(binary(Op::IDiv, x, const_int(35)), const_int(35)), mul(h, const_int(7))), binary(Op::Mod, x, const_int(7)));
  EXPECT_EQ(print_expr(split3), "(n0 + c)");
  // different divisors, or a non-positive one: left alone
  EXPECT_NE(print_expr(add(mul(binary(Op::IDiv, x, const_int(14)), const_int(14)), binary(Op::Mod, x, const_int(7)))), "(n0 + c)");
  EXPECT_NE(print_expr(add(mul(binary(Op::IDiv, x, const_int(0)), const_int(0)), binary(Op::Mod, x, const_int(0)))), "(n0 + c)");
  Tensor xi = input("x", {1, 8, 7, 7}), w = input("w", {12, 8, 1, 1}), r = input("r", {1, 12, 7, 7});
  std::string ir = test::loop_ir_of(build_program(Graph::from_outputs({{"y", relu(conv2d(xi, w) + r).node()}})));
  EXPECT_EQ(ir.find("% 7)"), std::string::npos) << ir;
}

TEST(Contraction, ResidualEpiloguesMatchInterpreter) {
  test::DiffBatch batch;
  Conv2dOptions same;
  same.padding = {1, 1};
  // {n, c, h, w, k, r}: 7x7 and ragged spatial sizes, batch 1 and 3, 1x1 and 3x3
  for (auto [n, c, h, wd, k, r] : std::vector<std::array<int64_t, 6>>{
           {1, 8, 7, 7, 12, 1}, {3, 5, 13, 11, 17, 3}, {1, 16, 14, 14, 40, 1}, {2, 3, 5, 9, 7, 3}}) {
    Tensor x = input("x", {n, c, h, wd}), w = input("w", {k, c, r, r}), b = input("b", {k}), res = input("res", {n, k, h, wd});
    std::string label = "conv + bias + residual + relu n" + std::to_string(n) + " " + std::to_string(h) + "x" +
                        std::to_string(wd) + " " + std::to_string(r) + "x" + std::to_string(r);
    batch.add(label, Graph::from_outputs({{"y", relu(conv2d(x, w, b, r == 3 ? same : Conv2dOptions{}) + res).node()}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

// A late layer (few positions, in rows shorter than NR, many channels) swaps the GEMM's
// sides: the positions become the rows (A, gathered MR at a time) and the weights the
// NR-wide columns, so 49 positions pad to 54 rows rather than 64 columns. Early layers,
// plain matmuls and sides that pad no better keep the output's innermost dim on B.
TEST(Contraction, LateConvLayersSwapSides) {
  loop::MatmulParams p;
  p.mr = 6, p.nr = 16, p.lanes = 8;
  auto swaps = [&](const Graph& g) {
    for (auto& n : g.toposort())
      if (auto mm = match_matmul(n)) return loop::orient_matmul(*mm, p);
    return false;
  };
  EXPECT_TRUE(swaps(conv_graph({1, 512, 7, 7, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  EXPECT_TRUE(swaps(conv_graph({1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  EXPECT_TRUE(swaps(conv_graph({1, 512, 7, 7, 2048, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false})));
  EXPECT_TRUE(swaps(conv_graph({2, 37, 3, 3, 61, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false})));
  EXPECT_FALSE(swaps(conv_graph({1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false})));   // rows of 56
  EXPECT_FALSE(swaps(conv_graph({1, 256, 14, 14, 256, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false})));  // 196 positions
  EXPECT_FALSE(swaps(conv_graph({64, 512, 7, 7, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false})));  // batch 64
  EXPECT_FALSE(swaps(conv_graph({1, 31, 5, 5, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false})));    // 80 x 30 > 32 x 72
  Tensor x = input("x", {1000, 768}), w = input("w", {768, 10});
  EXPECT_FALSE(swaps(Graph::from_outputs({{"y", matmul(x, w).node()}})));  // a plain matmul
  // the swapped nest packs the weights as B^T panels and gathers the positions into A
  Program prog = build_program(conv_graph({1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
  if (loop::host_matmul_params().nr == 16) {
    std::string ir = test::loop_ir_of(prog);
    EXPECT_NE(ir.find("(B^T)"), std::string::npos) << ir;
  }
}

TEST(Contraction, SwappedSidesMatchInterpreter) {
  test::DiffBatch batch;
  Conv2dOptions same;
  same.padding = {1, 1};
  Conv2dOptions s2 = same;
  s2.stride = {2, 2};
  // {n, c, h, w, k, r, stride 2}: 7x7 and smaller, prime channels, batch 1, 2 and 64
  for (auto [n, c, h, wd, k, r, st] : std::vector<std::array<int64_t, 7>>{{1, 23, 7, 7, 130, 3, 0},
                                                                         {1, 29, 7, 7, 97, 3, 0},
                                                                         {1, 13, 7, 7, 256, 1, 0},
                                                                         {2, 37, 3, 3, 61, 3, 0},
                                                                         {1, 11, 9, 9, 101, 3, 1},
                                                                         {1, 7, 5, 3, 67, 3, 0},
                                                                         {64, 5, 2, 2, 19, 3, 0}}) {
    Tensor x = input("x", {n, c, h, wd}), w = input("w", {k, c, r, r}), b = input("b", {k});
    Tensor res = input("res", {n, k, st ? (h + 1) / 2 : h, st ? (wd + 1) / 2 : wd});
    std::string label = "conv n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" +
                        std::to_string(wd) + " k" + std::to_string(k) + " " + std::to_string(r) + "x" + std::to_string(r) +
                        (st ? " stride 2" : "");
    Conv2dOptions o = r == 3 ? (st ? s2 : same) : Conv2dOptions{};
    batch.add(label + " + bias + relu", Graph::from_outputs({{"y", relu(conv2d(x, w, b, o)).node()}}));
    batch.add(label + " + residual", Graph::from_outputs({{"y", (conv2d(x, w, std::nullopt, o) + res).node()}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

// A swapped layer writes its output columns (channels) a stride apart: the partial sums of
// the K blocks before the last stay in the job's tile scratch ("sums in tiles"), and only the
// last block writes the output, through the epilogue. Several K blocks (K > KC = 256: 3x3
// over 37..61 channels, 1x1 over 300), prime channel counts, stride 2, batch 1, 2 and 64, no
// epilogue, bias + relu and a residual, input and constant weights, against the interpreter.
TEST(Contraction, SwappedLayersKeepPartialSumsInTiles) {
  Conv2dOptions same;
  same.padding = {1, 1};
  Conv2dOptions s2 = same;
  s2.stride = {2, 2};
  if (loop::host_matmul_params().nr == 16) {
    Program p = build_program(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
    std::string ir = test::loop_ir_of(p);
    EXPECT_NE(ir.find("(B^T)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("sums in tiles"), std::string::npos) << ir;
    setenv("LATHE_MATMUL_TILE_SUMS", "0", 1);
    std::string off = test::loop_ir_of(build_program(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
    unsetenv("LATHE_MATMUL_TILE_SUMS");
    EXPECT_EQ(off.find("sums in tiles"), std::string::npos) << off;
    // one K block (K <= 256): nothing to keep between blocks
    std::string one = test::loop_ir_of(build_program(conv_graph({1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
    EXPECT_EQ(one.find("sums in tiles"), std::string::npos) << one;
  }
  test::DiffBatch batch;
  // {n, c, h, w, k, r, stride 2, constant weights}
  for (auto [n, c, h, wd, k, r, st, cw] : std::vector<std::array<int64_t, 8>>{{1, 61, 7, 7, 131, 3, 0, 0},
                                                                             {1, 37, 7, 7, 97, 3, 0, 1},
                                                                             {1, 300, 7, 7, 67, 1, 0, 1},
                                                                             {2, 41, 5, 3, 53, 3, 0, 0},
                                                                             {1, 59, 13, 13, 101, 3, 1, 1},
                                                                             {64, 37, 2, 2, 19, 3, 0, 0}}) {
    Tensor x = input("x", {n, c, h, wd}), b = input("b", {k});
    Tensor w = input("w", {k, c, r, r});
    if (cw) {
      HostTensor t(DType::F32, {k, c, r, r});
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, std::sin(0.37 * static_cast<double>(i)) / 8);
      w = from_host(t);
    }
    Tensor res = input("res", {n, k, st ? (h + 1) / 2 : h, st ? (wd + 1) / 2 : wd});
    std::string label = "tile sums n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" +
                        std::to_string(wd) + " k" + std::to_string(k) + " " + std::to_string(r) + "x" + std::to_string(r) +
                        (st ? " stride 2" : "") + (cw ? " const w" : "");
    Conv2dOptions o = r == 3 ? (st ? s2 : same) : Conv2dOptions{};
    batch.add(label, Graph::from_outputs({{"y", conv2d(x, w, std::nullopt, o).node()}}));
    batch.add(label + " + bias + relu", Graph::from_outputs({{"y", relu(conv2d(x, w, b, o)).node()}}));
    batch.add(label + " + residual", Graph::from_outputs({{"y", (conv2d(x, w, std::nullopt, o) + res).node()}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

// The row tile fits M: MR - 1 where that pads at least 5% fewer rows (a swapped 7 x 7 layer's
// 49 positions: 50 rows on MR 5, not 54 on MR 6), for f32 kernels that pack A per run; a
// prepacked A (a 14 x 14 layer's weights) and M = 128 (132 vs 130 rows) keep MR. Against
// the interpreter: 49, 25 and 15 positions, 7 and 19 matmul rows, batch 1, 2 and 64.
TEST(Contraction, RowTileFitsFewRows) {
  const loop::MatmulParams P = loop::host_matmul_params();
  auto mr_of = [&](const Graph& g) {
    Program p = build_program(g);
    for (auto& f : p.funcs)
      for (auto& l : f.schedule_log)
        if (auto at = l.find("matmul: MR="); at != std::string::npos) return std::stoi(l.substr(at + 11));
    return 0;
  };
  Conv2dOptions same;
  same.padding = {1, 1};
  if (P.mr == 6 && P.nr == 16) {
    EXPECT_EQ(mr_of(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})), 5);
    EXPECT_EQ(mr_of(conv_graph({1, 37, 14, 14, 256, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})), 6);
    Tensor x = input("x", {128, 37}), w = input("w", {37, 29});
    EXPECT_EQ(mr_of(Graph::from_outputs({{"y", matmul(x, w).node()}})), 6);
    Tensor x7 = input("x", {7, 37});
    EXPECT_EQ(mr_of(Graph::from_outputs({{"y", matmul(x7, w).node()}})), 5);
    setenv("LATHE_MATMUL_FIT_ROWS", "0", 1);
    EXPECT_EQ(mr_of(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})), 6);
    unsetenv("LATHE_MATMUL_FIT_ROWS");
  }
  test::DiffBatch batch;
  for (const ConvCase& c : std::vector<ConvCase>{{1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                                 {1, 300, 7, 7, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},
                                                 {1, 43, 5, 5, 97, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                                 {2, 29, 5, 3, 53, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                                 {1, 59, 13, 13, 101, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true}})
    batch.add("fit rows conv " + std::to_string(c.n) + "x" + std::to_string(c.c) + "x" + std::to_string(c.h) + "x" +
                  std::to_string(c.w) + " k" + std::to_string(c.k),
              conv_graph(c), 7, 2);  // sums of 300-549 products (a 0.0135 output off by 1.15e-5 vs 1.13e-5 allowed)
  for (auto [b, m, k, n] : std::vector<std::array<int64_t, 4>>{{1, 7, 37, 29}, {1, 19, 300, 131}, {64, 7, 41, 17}, {2, 49, 13, 97}}) {
    Tensor x = input("x", {b, m, k}), w = input("w", {k, n}), bias = input("bias", {n});
    batch.add("fit rows matmul " + std::to_string(b) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n),
              Graph::from_outputs({{"y", relu(matmul(x, w) + bias).node()}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

// Rows of at least NR positions: an interior panel inside the padding is one fixed NR-wide
// copy (no zeroing, no variable-length loop); panels at a row's ends or across two rows
// take the general path. Both against the interpreter.
TEST(Contraction, WholePanelsAreOneCopy) {
  std::string ir = test::loop_ir_of(build_program(conv_graph({1, 9, 5, 64, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false})));
  EXPECT_NE(ir.find("pack B: copy a whole panel"), std::string::npos) << ir;
  test::DiffBatch batch;
  for (const ConvCase& c : std::vector<ConvCase>{{1, 9, 5, 64, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
                                                 {2, 4, 6, 50, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                                 {1, 3, 9, 83, 11, 5, 5, {2, 2}, {2, 2}, {1, 1}, 1, false},
                                                 {1, 2, 4, 37, 3, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, false}})
    batch.add("whole panels " + std::to_string(c.h) + "x" + std::to_string(c.w), conv_graph(c));
  EXPECT_EQ(batch.run(), 0);
}

// Rows shorter than NR (a 14 x 14 feature map): a panel spans up to 4 rows' runs, each still
// one copy; rows shorter than NR / 3 keep the per-element gather.
TEST(Contraction, ShortRowsArePackedRunByRun) {
  if (loop::host_matmul_params().nr != 16) GTEST_SKIP() << "the run counts are for NR 16";
  auto ir = [](const ConvCase& c) { return test::loop_ir_of(build_program(conv_graph(c))); };
  EXPECT_NE(ir({1, 37, 14, 14, 41, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false}).find("pack B: copy a run"), std::string::npos);
  EXPECT_NE(ir({1, 9, 6, 6, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false}).find("pack B: copy a run"), std::string::npos);
  EXPECT_EQ(ir({1, 9, 4, 4, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false}).find("pack B: copy a run"), std::string::npos);
  test::DiffBatch batch;
  for (const ConvCase& c : std::vector<ConvCase>{{1, 37, 14, 14, 41, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                                                 {2, 5, 9, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
                                                 {1, 9, 6, 6, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
                                                 {3, 4, 11, 10, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false},
                                                 {1, 2, 13, 13, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, false},
                                                 {2, 3, 12, 12, 4, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true}})
    batch.add("short rows " + std::to_string(c.h) + "x" + std::to_string(c.w) + " n" + std::to_string(c.n), conv_graph(c));
  EXPECT_EQ(batch.run(), 0);
}

// A 1x1 convolution with stride 1 (one k of B is a contiguous row of positions), K >= 64
// input and M <= 64 output channels (a projection) is read in place by the micro-kernel,
// no B panels; a ragged last panel (positions not a multiple of NR, at any row stride:
// unaligned vector loads) uses a zero-padded copy. Expansions (small K, many outputs),
// strided 1x1 convolutions and plain matmuls keep packing B.
TEST(Contraction, OneByOneConvReadsBInPlace) {
  auto ir = [](const ConvCase& c) { return test::loop_ir_of(build_program(conv_graph(c))); };
  EXPECT_NE(ir({1, 144, 28, 28, 32, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 24, 56, 56, 144, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true}).find("B in place"), std::string::npos);
  EXPECT_NE(ir({1, 192, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 19, 13, 13, 71, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 8, 9, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false}).find("B in place"), std::string::npos);
  Tensor x = input("x", {96, 200}), w = input("w", {200, 40});
  EXPECT_EQ(test::loop_ir_of(build_program(Graph::from_outputs({{"y", matmul(x, w).node()}}))).find("B in place"), std::string::npos);
  test::DiffBatch batch;
  // {n, c, h, w, k}: N a multiple of NR or ragged (196, 49, 143, 7), prime channels, K over
  // KC (partial sums), M below MR, batch 1, 3 and 64
  for (auto [n, c, h, wd, k] : std::vector<std::array<int64_t, 5>>{{1, 64, 16, 16, 17},
                                                                   {1, 192, 14, 14, 64},
                                                                   {1, 67, 11, 13, 5},
                                                                   {3, 97, 7, 7, 31},
                                                                   {1, 300, 4, 8, 17},
                                                                   {2, 71, 1, 7, 61},
                                                                   {64, 64, 3, 3, 11},
                                                                   {1, 16, 16, 16, 96}}) {
    Tensor xi = input("x", {n, c, h, wd}), wi = input("w", {k, c, 1, 1}), b = input("b", {k});
    Tensor res = input("res", {n, k, h, wd});
    std::string label = "1x1 n" + std::to_string(n) + " c" + std::to_string(c) + " " + std::to_string(h) + "x" +
                        std::to_string(wd) + " k" + std::to_string(k);
    Tensor y = conv2d(xi, wi, b);
    batch.add(label + " + bias + relu6", Graph::from_outputs({{"y", clamp(y, Scalar(0.0), Scalar(6.0)).node()}}));
    batch.add(label + " + residual", Graph::from_outputs({{"y", (conv2d(xi, wi, std::nullopt) + res).node()}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

// Inference BatchNorm after a convolution with constant statistics (a model exported
// without folding): the per-channel scale and shift run in the GEMM's epilogue, one kernel,
// not a second pass over the output.
TEST(Contraction, BatchNormAfterConvIsTheEpilogue) {
  auto vec = [](int64_t n, double seed, double lo) {
    HostTensor t(DType::F32, {n});
    for (int64_t i = 0; i < n; ++i) t.set_f64(i, lo + 0.5 + 0.5 * std::sin(seed + 1.3 * static_cast<double>(i)));
    return from_host(t);
  };
  Conv2dOptions same;
  same.padding = {1, 1};
  test::DiffBatch batch;
  for (auto [n, c, h, k] : std::vector<std::array<int64_t, 4>>{{1, 13, 17, 29}, {2, 8, 7, 131}}) {
    Tensor x = input("x", {n, c, h, h});
    HostTensor wt(DType::F32, {k, c, 3, 3});
    for (int64_t i = 0; i < wt.numel(); ++i) wt.set_f64(i, std::cos(0.37 * static_cast<double>(i)));
    Tensor y = batch_norm(conv2d(x, from_host(wt), std::nullopt, same), vec(k, 1, -1), vec(k, 2, 0.1), vec(k, 3, 0), vec(k, 4, -1), 1e-5);
    Graph g = Graph::from_outputs({{"y", relu(y).node()}});
    Program p = build_program(g);
    EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
    batch.add("conv + batch_norm + relu " + std::to_string(h) + "x" + std::to_string(h) + " k" + std::to_string(k), g);
  }
  EXPECT_EQ(batch.run(), 0);
}

// The register tile fits the host's vector registers (MR × NR/lanes accumulators, the B row
// and a broadcast): 16 registers without AVX-512, 32 with it.
TEST(Contraction, HostTileFitsTheRegisters) {
  loop::MatmulParams p = loop::host_matmul_params();
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  int regs = 32, bytes = 64;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx512f")) regs = 16, bytes = __builtin_cpu_supports("avx") ? 32 : 16;
#else
  GTEST_SKIP() << "the host tile is chosen for x86 only";
#endif
  int per_lane_regs = std::max(1, p.lanes * 4 / bytes);  // registers one `lanes`-wide vector takes
  int vectors = p.nr / p.lanes * per_lane_regs;
  EXPECT_LE(p.mr * vectors + vectors + 1, regs) << "MR " << p.mr << " NR " << p.nr << " lanes " << p.lanes;
  EXPECT_EQ(p.mc % p.mr, 0);
  EXPECT_EQ(p.nc % p.nr, 0);
}

}  // namespace
}  // namespace lathe
