// contraction_panels_test.cpp — the packed matmul's register tiles (Contraction suite, with
// contraction_test.cpp): whole tiles without edge code, edge tiles without column guards,
// ragged A and B panels that run only their rows / vectors, the row tile fitted to M and the
// host tile within the registers, against the interpreter on the backend under test.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

using test::conv_graph;
using test::ConvCase;
using test::count_kind;

// The register tile's rows a matmul kernel was scheduled with ("MR=7" in its schedule log):
// the host's MR, or MR - 1 where that pads M less (fit_matmul_rows); -1 without a GEMM.
int scheduled_mr(const std::string& ir) {
  size_t at = ir.find("matmul: MR=");
  return at == std::string::npos ? -1 : std::atoi(ir.c_str() + at + 11);
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
  batch.add("conv 64 channels, 3x3", conv_graph({1, 17, 23, 23, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true}));
  batch.add("conv 131 channels, stride 2, batch 2", conv_graph({2, 5, 19, 19, 131, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1}));
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
  batch.add("1x1 conv into 17 channels (B in place)", conv_graph({1, 64, 16, 16, 17, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1}));
  batch.add("1x1 conv into 13 channels, 15x15 (B in place, ragged columns)", conv_graph({1, 67, 15, 15, 13, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1}));
  batch.add("conv 131 channels, stride 2, batch 2", conv_graph({2, 5, 19, 19, 131, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1}));
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
  batch.add("conv 67 -> 37 at 7x7, batch 2 (channels the columns)", conv_graph({2, 67, 7, 7, 37, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true}));
  batch.add("conv 31 -> 53, stride 2 from 29x29", conv_graph({1, 31, 29, 29, 53, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1}));
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
    EXPECT_EQ(mr_of(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})), 5);
    EXPECT_EQ(mr_of(conv_graph({1, 37, 14, 14, 256, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})), 6);
    Tensor x = input("x", {128, 37}), w = input("w", {37, 29});
    EXPECT_EQ(mr_of(Graph::from_outputs({{"y", matmul(x, w).node()}})), 6);
    Tensor x7 = input("x", {7, 37});
    EXPECT_EQ(mr_of(Graph::from_outputs({{"y", matmul(x7, w).node()}})), 5);
    setenv("LATHE_MATMUL_FIT_ROWS", "0", 1);
    EXPECT_EQ(mr_of(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})), 6);
    unsetenv("LATHE_MATMUL_FIT_ROWS");
  }
  test::DiffBatch batch;
  for (const ConvCase& c : std::vector<ConvCase>{{1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},
                                                 {1, 300, 7, 7, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
                                                 {1, 43, 5, 5, 97, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},
                                                 {2, 29, 5, 3, 53, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},
                                                 {1, 59, 13, 13, 101, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, true}})
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
