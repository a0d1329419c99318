// contraction_test.cpp — convolutions and other grouped contractions through the packed
// matmul lowering (implicit im2col in the packing step), and matmuls with fused epilogues
// (bias, GELU, residual), against the interpreter on the backend under test: conv shapes,
// epilogues, B^T, split index sums, swapped sides, B packing of conv rows, BatchNorm. The
// register tiles and ragged panels are in contraction_panels_test.cpp, the blocking and the
// jobs' split in contraction_blocking_test.cpp.
#include <array>
#include <cmath>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

using test::conv_graph;
using test::ConvCase;
using test::count_kind;

TEST(Contraction, ConvIsOneMatmulKernel) {
  Program p = build_program(conv_graph({2, 5, 9, 11, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true}));
  EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
  EXPECT_EQ(count_kind(p, "matmul"), 1) << test::loop_ir_of(p);
}

TEST(Contraction, ConvShapesMatchInterpreter) {
  test::DiffBatch batch;
  std::vector<ConvCase> cases = {
      {1, 3, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},                   // batch 1, padding
      {2, 5, 9, 11, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, true},     // stride 2, odd sizes, bias
      {3, 13, 7, 6, 33, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},                 // 1x1, K not a multiple of 8/32
      {2, 4, 12, 10, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false, true},    // dilation 2
      {1, 6, 10, 10, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},                 // groups 2
      {2, 3, 17, 5, 40, 5, 2, {3, 1}, {2, 0}, {1, 1}, 1},                 // non-square kernel and stride
      {1, 64, 14, 14, 37, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},  // K > KC split needs partial sums
      {4, 2, 3, 3, 3, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},                   // output 1x1
      // output rows of >= 32 columns: B is packed run by run (copies, no gathers)
      {2, 3, 6, 45, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},    // runs crossing panels, padding
      {1, 4, 9, 71, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},                  // stride 2 along a run
      {2, 3, 8, 40, 7, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1},                  // dilation 2
      {1, 5, 2, 64, 33, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},                 // 1x1, rows of exactly 2 panels
      {3, 2, 5, 33, 4, 2, 5, {1, 1}, {0, 2}, {1, 1}, 1},                  // 33-wide rows, asymmetric kernel
      // late layers: more channels than positions, M split over the threads
      {1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},   // 3x3 at 7x7, prime channels
      {1, 19, 13, 13, 71, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1},               // 1x1 stride 2 (downsample)
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
  EXPECT_TRUE(swaps(conv_graph({1, 512, 7, 7, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})));
  EXPECT_TRUE(swaps(conv_graph({1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})));
  EXPECT_TRUE(swaps(conv_graph({1, 512, 7, 7, 2048, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));
  EXPECT_TRUE(swaps(conv_graph({2, 37, 3, 3, 61, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1})));
  EXPECT_FALSE(swaps(conv_graph({1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1})));   // rows of 56
  EXPECT_FALSE(swaps(conv_graph({1, 256, 14, 14, 256, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1})));  // 196 positions
  EXPECT_FALSE(swaps(conv_graph({64, 512, 7, 7, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1})));  // batch 64
  EXPECT_FALSE(swaps(conv_graph({1, 31, 5, 5, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // 80 x 30 > 32 x 72
  Tensor x = input("x", {1000, 768}), w = input("w", {768, 10});
  EXPECT_FALSE(swaps(Graph::from_outputs({{"y", matmul(x, w).node()}})));  // a plain matmul
  // the swapped nest packs the weights as B^T panels and gathers the positions into A
  Program prog = build_program(conv_graph({1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true}));
  if (loop::host_matmul_params().nr == 16) {
    std::string ir = test::loop_ir_of(prog);
    EXPECT_NE(ir.find("(B^T)"), std::string::npos) << ir;
  }
}

// Up to 8 NR positions (a 14 x 14 map on AVX-512's NR 32: 196 positions, the last panel 4
// of 32 columns) swap where K >= 512 hides the swapped write-back; fewer K, a batch, int8 and
// LATHE_MATMUL_SWAP_WIDE=0 keep the sides. Against the interpreter: odd maps (13 x 13,
// 15 x 15), 1x1 and stride-2 3x3, constant weights, residual epilogues, batch 1 and 3.
TEST(Contraction, WideLateLayersSwapWhereKIsLarge) {
  loop::MatmulParams p;
  p.mr = 8, p.nr = 32, p.lanes = 16;
  auto swaps = [&](const Graph& g) {
    for (auto& n : g.toposort())
      if (auto mm = match_matmul(n)) return loop::orient_matmul(*mm, p);
    return false;
  };
  EXPECT_TRUE(swaps(conv_graph({1, 1024, 14, 14, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));   // K 1024
  EXPECT_TRUE(swaps(conv_graph({1, 256, 28, 28, 256, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1})));   // K 2304, stride 2
  EXPECT_TRUE(swaps(conv_graph({1, 521, 15, 15, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // 225 positions, K 521
  EXPECT_FALSE(swaps(conv_graph({1, 521, 15, 15, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));   // 67 channels pad worse
  EXPECT_FALSE(swaps(conv_graph({1, 256, 14, 14, 1024, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));  // K 256
  EXPECT_FALSE(swaps(conv_graph({3, 1024, 14, 14, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));  // batch 3: 588
  EXPECT_FALSE(swaps(conv_graph({1, 1024, 16, 16, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));  // 256 = 8 NR
  {
    test::ScopedEnv off("LATHE_MATMUL_SWAP_WIDE", "0");
    EXPECT_FALSE(swaps(conv_graph({1, 1024, 14, 14, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));
  }
  const std::vector<ConvCase> cases{{1, 517, 13, 13, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true},   // swapped on NR 32
                                    {1, 131, 29, 29, 64, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},      // swapped on NR 32
                                    {3, 523, 15, 15, 37, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
                                    {1, 601, 14, 14, 96, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}};  // swapped on NR 32
  test::DiffBatch batch;
  for (const ConvCase& c : cases) batch.add(test::label(c), conv_graph(c), 7, 4);
  EXPECT_EQ(batch.run(), 0);
  if (loop::host_matmul_params().nr == 32)
    for (int i : {0, 1, 3}) EXPECT_TRUE(swaps(conv_graph(cases[i]))) << test::label(cases[i]);
}

// Up to 8 NR positions also swap where K >= 3 M (few output channels, MobileNet's 14 x 14
// projections 384 -> 64 / 96, 192 -> 64), below K 512; K < 3 M, a batch and
// LATHE_MATMUL_SWAP_THIN=0 keep the sides. Against the interpreter: 13 x 13, 14 x 14 and
// 15 x 15 maps, prime channels, constant and input weights, bias, batch 1 and 3, the switch off.
TEST(Contraction, ThinLateLayersSwapWhereKIsThreeTimesM) {
  loop::MatmulParams p;
  p.mr = 8, p.nr = 32, p.lanes = 16;
  auto swaps = [&](const Graph& g) {
    for (auto& n : g.toposort())
      if (auto mm = match_matmul(n)) return loop::orient_matmul(*mm, p);
    return false;
  };
  EXPECT_TRUE(swaps(conv_graph({1, 384, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // K 6 M
  EXPECT_TRUE(swaps(conv_graph({1, 384, 14, 14, 96, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // K 4 M
  EXPECT_TRUE(swaps(conv_graph({1, 192, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // K 3 M
  EXPECT_TRUE(swaps(conv_graph({1, 389, 13, 13, 61, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // 169 positions
  EXPECT_FALSE(swaps(conv_graph({1, 389, 13, 13, 97, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));   // 97 channels pad worse
  EXPECT_FALSE(swaps(conv_graph({1, 192, 14, 14, 96, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));   // K 2 M
  EXPECT_FALSE(swaps(conv_graph({1, 384, 14, 14, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));  // K 1.5 M
  EXPECT_FALSE(swaps(conv_graph({1, 64, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));    // K M
  EXPECT_FALSE(swaps(conv_graph({3, 384, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));   // batch 3: 588
  {
    test::ScopedEnv off("LATHE_MATMUL_SWAP_THIN", "0");
    EXPECT_FALSE(swaps(conv_graph({1, 384, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));
    EXPECT_TRUE(swaps(conv_graph({1, 1024, 14, 14, 256, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1})));  // K >= 512 still
  }
  const std::vector<ConvCase> cases{{1, 384, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true},  // swapped on NR 32
                                    {1, 389, 13, 13, 61, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true},
                                    {1, 199, 15, 15, 61, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},        // swapped on NR 32
                                    {3, 193, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true},
                                    {1, 97, 14, 14, 31, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true}};
  for (const char* thin : {"1", "0"}) {
    test::ScopedEnv env("LATHE_MATMUL_SWAP_THIN", thin);
    test::DiffBatch batch;
    for (const ConvCase& c : cases) batch.add(test::label(c) + " thin=" + thin, conv_graph(c), 7, 4);
    EXPECT_EQ(batch.run(), 0);
  }
  if (loop::host_matmul_params().nr == 32)
    for (int i : {0, 2}) EXPECT_TRUE(swaps(conv_graph(cases[i]))) << test::label(cases[i]);
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
    Program p = build_program(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true}));
    std::string ir = test::loop_ir_of(p);
    EXPECT_NE(ir.find("(B^T)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("sums in tiles"), std::string::npos) << ir;
    setenv("LATHE_MATMUL_TILE_SUMS", "0", 1);
    std::string off = test::loop_ir_of(build_program(conv_graph({1, 61, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})));
    unsetenv("LATHE_MATMUL_TILE_SUMS");
    EXPECT_EQ(off.find("sums in tiles"), std::string::npos) << off;
    // one K block (K <= 256): nothing to keep between blocks
    std::string one = test::loop_ir_of(build_program(conv_graph({1, 23, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true})));
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

// Rows of at least NR positions: an interior panel inside the padding is one fixed NR-wide
// copy (no zeroing, no variable-length loop); panels at a row's ends or across two rows
// take the general path. Both against the interpreter.
TEST(Contraction, WholePanelsAreOneCopy) {
  std::string ir = test::loop_ir_of(build_program(conv_graph({1, 9, 5, 64, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1})));
  EXPECT_NE(ir.find("pack B: copy a whole panel"), std::string::npos) << ir;
  test::DiffBatch batch;
  for (const ConvCase& c : std::vector<ConvCase>{{1, 9, 5, 64, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
                                                 {2, 4, 6, 50, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},
                                                 {1, 3, 9, 83, 11, 5, 5, {2, 2}, {2, 2}, {1, 1}, 1},
                                                 {1, 2, 4, 37, 3, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1}})
    batch.add("whole panels " + std::to_string(c.h) + "x" + std::to_string(c.w), conv_graph(c));
  EXPECT_EQ(batch.run(), 0);
}

// Rows shorter than NR (a 14 x 14 feature map under NR=16): a panel spans up to 4 rows'
// runs, each still one copy; rows shorter than NR / 3 keep the per-element gather. The
// widths scale with the host's NR (x2 under AVX-512's 32: 28, 12 and 8).
TEST(Contraction, ShortRowsArePackedRunByRun) {
  const int64_t nr = loop::host_matmul_params().nr, q = nr / 16;
  if (nr % 16 != 0) GTEST_SKIP() << "the run counts are for NR a multiple of 16";
  auto ir = [](const ConvCase& c) { return test::loop_ir_of(build_program(conv_graph(c))); };
  const ConvCase runs14{1, 37, 14 * q, 14 * q, 41, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1}, runs6{1, 9, 6 * q, 6 * q, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
                 gather4{1, 9, 4 * q, 4 * q, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1};
  EXPECT_NE(ir(runs14).find("pack B: copy a run"), std::string::npos) << "NR " << nr;
  EXPECT_NE(ir(runs6).find("pack B: copy a run"), std::string::npos) << "NR " << nr;
  EXPECT_EQ(ir(gather4).find("pack B: copy a run"), std::string::npos) << "NR " << nr;
  EXPECT_NE(ir(gather4).find("pack B"), std::string::npos) << "NR " << nr;  // (B packed: by the gather)
  test::DiffBatch batch;
  if (q > 1)
    for (const ConvCase& c : {runs6, gather4}) batch.add("short rows " + std::to_string(c.h) + "x" + std::to_string(c.w) + " at NR " + std::to_string(nr), conv_graph(c));
  for (const ConvCase& c : std::vector<ConvCase>{{1, 37, 14, 14, 41, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true},
                                                 {2, 5, 9, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
                                                 {1, 9, 6, 6, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
                                                 {3, 4, 11, 10, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},
                                                 {1, 2, 13, 13, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1},
                                                 {2, 3, 12, 12, 4, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false, true}})
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
  EXPECT_NE(ir({1, 144, 28, 28, 32, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 24, 56, 56, 144, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}).find("B in place"), std::string::npos);
  EXPECT_NE(ir({1, 128, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}).find("B in place"), std::string::npos);
  {
    // (K >= 3 M: swapped on AVX-512, the positions on A, unless LATHE_MATMUL_SWAP_THIN=0)
    test::ScopedEnv keep("LATHE_MATMUL_SWAP_THIN", "0");
    EXPECT_NE(ir({1, 192, 14, 14, 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}).find("B in place"), std::string::npos);
  }
  EXPECT_EQ(ir({1, 19, 13, 13, 71, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 8, 9, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1}).find("B in place"), std::string::npos);
  // K from 32 (MobileNetV2's 32 -> 16 at 112 x 112, a 32 -> 2 segmentation head); K 16 packs
  EXPECT_NE(ir({1, 32, 112, 112, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}).find("B in place"), std::string::npos);
  EXPECT_NE(ir({1, 37, 29, 31, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 31, 29, 31, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1}).find("B in place"), std::string::npos);
  EXPECT_EQ(ir({1, 16, 28, 28, 8, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1}).find("B in place"), std::string::npos);
  setenv("LATHE_MATMUL_B_IN_PLACE_K", "64", 1);  // the old bound
  const bool packs32 = ir({1, 32, 112, 112, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}).find("B in place") == std::string::npos;
  unsetenv("LATHE_MATMUL_B_IN_PLACE_K");
  EXPECT_TRUE(packs32) << "LATHE_MATMUL_B_IN_PLACE_K=64";
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
                                                                   {1, 16, 16, 16, 96},
                                                                   {1, 32, 56, 56, 16},
                                                                   {3, 37, 13, 17, 2},
                                                                   {1, 41, 7, 7, 13}}) {
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

}  // namespace
}  // namespace lathe
