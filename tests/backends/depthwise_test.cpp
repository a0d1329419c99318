// depthwise_test.cpp — the direct depthwise convolution nest (core/loop/lower_depthwise.h):
// 3x3 and 5x5 windows (and grouped convolutions with one output per group), stride 1, 2 and 3, dilation, padding wider than the window's reach,
// odd and prime sizes, channels 7, 13 and 96, batch 1 and 64, with and without the fused
// BatchNorm + ReLU6 epilogue, constant (ONNX-style) and input weights, against the
// interpreter on the backend under test; and that the default schedule takes the path.
#include <algorithm>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "core/loop/lower_depthwise.h"
#include "diff_util.h"

namespace lathe {
namespace {

Graph one(const Tensor& y) { return Graph::from_outputs({{"y", y.node()}}); }

int direct_kernels(const Program& p) {
  int n = 0;
  for (auto& f : p.funcs) n += loop::is_depthwise(f);
  return n;
}

struct Case {
  int64_t n, c, h, w, k, stride, pad, dil;
};

Tensor dw_conv(const Case& t, bool epilogue, bool const_weights, uint64_t seed) {
  Conv2dOptions o;
  o.stride = {t.stride, t.stride};
  o.padding = {t.pad, t.pad};
  o.dilation = {t.dil, t.dil};
  o.groups = t.c;
  Tensor x = input("x", {t.n, t.c, t.h, t.w});
  Tensor w = const_weights ? from_host(random_tensor(DType::F32, {t.c, 1, t.k, t.k}, seed))
                           : input("w", {t.c, 1, t.k, t.k});
  Tensor b = from_host(random_tensor(DType::F32, {t.c}, seed + 1));
  Tensor y = conv2d(x, w, b, o);
  if (!epilogue) return y;
  Tensor scale = input("scale", {t.c, 1, 1}), shift = input("shift", {t.c, 1, 1});
  return clamp(y * scale + shift, Scalar(0.0), Scalar(6.0));  // BatchNorm + ReLU6
}

const std::vector<Case> kCases = {
    {1, 7, 9, 11, 3, 1, 1, 1},     // odd sizes, 7 channels
    {1, 13, 17, 13, 3, 2, 1, 1},   // stride 2, prime sizes
    {64, 7, 5, 7, 3, 1, 1, 1},     // batch 64, tiny planes
    {2, 96, 14, 14, 3, 1, 1, 1},   // MobileNet's late shapes
    {1, 96, 15, 15, 3, 2, 1, 1},   // stride 2 on an odd plane
    {1, 13, 11, 19, 5, 1, 2, 1},   // 5x5
    {3, 7, 12, 23, 5, 2, 2, 1},    // 5x5 stride 2
    {1, 7, 13, 29, 3, 1, 2, 2},    // dilation 2
    {1, 7, 7, 7, 3, 3, 1, 1},      // stride 3
    {1, 13, 6, 5, 5, 1, 4, 1},     // padding wider than the window reaches (all-zero rows)
    {1, 7, 10, 3, 3, 1, 0, 1},     // no padding, a row narrower than a vector
    {2, 7, 9, 131, 3, 2, 1, 1},    // rows of several vectors
    {1, 3, 150, 170, 3, 1, 1, 1},  // a plane larger than one band
};

TEST(Depthwise, TakesTheDirectPath) {
  for (bool ep : {false, true}) {
    Program p = build_program(one(dw_conv(kCases[1], ep, true, 3)));
    EXPECT_EQ(direct_kernels(p), 1) << test::loop_ir_of(p);
    EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);  // the epilogue stays fused
  }
  // the plain loops (p:kernel(i):reset(true)) are still the reduction
  BuildOptions o;
  o.default_schedule = false;
  EXPECT_EQ(direct_kernels(build_program(one(dw_conv(kCases[0], true, true, 3)), o)), 0);
}

TEST(Depthwise, MatchesInterpreter) {
  test::DiffBatch batch;
  int i = 0;
  for (auto& t : kCases)
    for (bool ep : {false, true}) {
      Graph g = one(dw_conv(t, ep, i % 2 == 0, 10 + i));
      EXPECT_EQ(direct_kernels(build_program(g)), 1) << "case " << i << "\n" << test::loop_ir_of(build_program(g));
      batch.add("depthwise " + std::to_string(i++), g);
    }
  EXPECT_EQ(batch.run(), 0);
}

// grouped convolutions with one output channel per group: each output reads C/groups planes
TEST(Depthwise, GroupedWithOneOutputPerGroup) {
  test::DiffBatch batch;
  for (auto [n, c, g, h, w, k, s] : std::vector<std::array<int64_t, 7>>{
           {1, 14, 7, 9, 11, 3, 1}, {2, 26, 13, 13, 17, 3, 2}, {64, 6, 2, 5, 7, 3, 1}, {1, 12, 6, 11, 13, 5, 2}}) {
    Conv2dOptions o;
    o.stride = {s, s};
    o.padding = {k / 2, k / 2};
    o.groups = g;
    Tensor x = input("x", {n, c, h, w});
    Tensor wt = from_host(random_tensor(DType::F32, {g, c / g, k, k}, static_cast<uint64_t>(c * 100 + k)));
    Graph gr = one(clamp(conv2d(x, wt, input("b", {g}), o), Scalar(0.0), Scalar(6.0)));
    EXPECT_EQ(direct_kernels(build_program(gr)), 1) << test::loop_ir_of(build_program(gr));
    batch.add("grouped " + std::to_string(c) + "/" + std::to_string(g), gr);
  }
  EXPECT_EQ(batch.run(), 0);
}

// Rows that are not a whole number of vectors (7, 14, 28 wide: MobileNet's late maps): every
// output row of a band but its last is stored as whole vectors (the lanes past OW land at the
// start of the next row, stored after), and a stride above 1 copies its input rows as whole
// vectors (reading on into the next row where that stays inside X, the right padding zeroed
// again). 3x3 and 5x5, stride 1-3, odd and prime channels and sizes, batch 1 and 4, channel
// multiplier 2, right padding, planes of several bands, the last row of the last plane (no
// over-read past X), and epilogues of bias, ReLU, ReLU6 and a residual read along the row
// (which keeps the exact row).
TEST(Depthwise, RaggedRowsMatchInterpreter) {
  struct Ragged {
    int64_t n, c, mult, h, w, k, stride, pad;
  };
  const std::vector<Ragged> cases = {
      {1, 13, 1, 14, 14, 3, 2, 1},   // 7 x 7 out of 14 x 14 (MobileNet's last stride 2)
      {4, 7, 1, 28, 28, 3, 2, 1},    // 14 x 14 out, batch 4
      {1, 11, 1, 7, 7, 3, 1, 1},     // 7 x 7 stride 1
      {1, 5, 1, 13, 13, 5, 2, 2},    // 5x5 stride 2, prime plane
      {4, 3, 1, 23, 29, 5, 1, 2},    // 5x5 stride 1, batch 4
      {1, 7, 2, 14, 14, 3, 2, 1},    // channel multiplier 2
      {4, 5, 2, 11, 13, 3, 1, 1},    // multiplier 2, batch 4, 13 wide
      {1, 3, 1, 260, 130, 3, 2, 1},  // several bands at stride 2 (65 wide)
      {1, 7, 1, 31, 17, 3, 3, 1},    // stride 3, 6 wide out
      {2, 17, 1, 12, 12, 3, 2, 0},   // no padding (5 wide)
      {1, 7, 1, 9, 10, 3, 2, 3},     // padding wider than the window reaches (7 wide out)
      {4, 19, 1, 29, 27, 3, 2, 1},   // 15 x 14 out (rows of two vectors, one step each), batch 4
      {1, 11, 2, 31, 31, 5, 2, 2},   // 16 x 16 out, 5x5, multiplier 2
      {2, 23, 1, 17, 17, 3, 1, 1},   // 17 wide stride 1 (a ragged third vector)
  };
  test::DiffBatch batch;
  int i = 0;
  for (auto& t : cases)
    for (int ep = 0; ep < 4; ++ep) {
      Conv2dOptions o;
      o.stride = {t.stride, t.stride};
      o.padding = {t.pad, t.pad};
      o.groups = t.c;
      Tensor x = input("x", {t.n, t.c, t.h, t.w});
      Tensor w = ep % 2 ? input("w", {t.c * t.mult, 1, t.k, t.k})
                        : from_host(random_tensor(DType::F32, {t.c * t.mult, 1, t.k, t.k}, 70 + i));
      Tensor y = conv2d(x, w, ep == 0 ? std::nullopt : std::optional<Tensor>(input("b", {t.c * t.mult})), o);
      if (ep == 1) y = relu(y);
      if (ep == 2) y = clamp(y, Scalar(0.0), Scalar(6.0));
      if (ep == 3) {
        const int64_t oh = (t.h + 2 * t.pad - t.k) / t.stride + 1, ow = (t.w + 2 * t.pad - t.k) / t.stride + 1;
        y = y + input("r", {t.n, t.c * t.mult, oh, ow});
      }
      Graph g = one(y);
      if (t.mult == 1) {
        Program p = build_program(g);
        EXPECT_EQ(direct_kernels(p), 1) << "ragged " << i << "\n" << test::loop_ir_of(p);
      }
      batch.add("ragged " + std::to_string(i++), g);
    }
  EXPECT_EQ(batch.run(), 0);
}

// the whole-vector rows are in the nest: a (L-1)-wide stride-2 layer's epilogue runs L wide
// (L: the host's lanes, 8 on AVX2, 16 on AVX-512) but on the band's last row, and its fill
// copies whole vectors; a stride-1 fill does not (measured slower), and an epilogue that
// reads along the row keeps the exact row
TEST(Depthwise, RaggedRowsAreWholeVectors) {
  const int64_t L = loop::host_matmul_params().lanes, W = L - 1;
  const std::string lanes = ", " + std::to_string(L) + " lanes,", whole = "in 0.." + std::to_string(L) + ":   # epilogue: the output row, whole vectors",
                    exact = "in 0.." + std::to_string(W) + ":   # epilogue: the output row";
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  o.groups = 13;
  Tensor x = input("x", {1, 13, 2 * W, 2 * W});
  Graph g = one(clamp(conv2d(x, input("w", {13, 1, 3, 3}), input("b", {13}), o), Scalar(0.0), Scalar(6.0)));
  std::string ir = test::loop_ir_of(build_program(g));
  ASSERT_NE(ir.find(lanes), std::string::npos) << "expected " << L << "-lane vectors:\n" << ir.substr(0, 400);
  EXPECT_NE(ir.find("fill: the row, whole vectors"), std::string::npos) << ir;
  // (each row's trip count a constant: L, or L-1 on the band's last row)
  EXPECT_NE(ir.find(whole), std::string::npos) << ir;
  EXPECT_NE(ir.find(exact), std::string::npos) << ir;
  o.stride = {1, 1};
  Graph g1 = one(conv2d(input("x", {1, 13, W, W}), input("w", {13, 1, 3, 3}), std::nullopt, o));
  std::string ir1 = test::loop_ir_of(build_program(g1));
  EXPECT_EQ(ir1.find("fill: the row, whole vectors"), std::string::npos) << ir1;
  EXPECT_NE(ir1.find(whole), std::string::npos) << ir1;
  Tensor r = conv2d(input("x", {1, 13, W, W}), input("w", {13, 1, 3, 3}), std::nullopt, o) + input("r", {1, 13, W, W});
  std::string ir2 = test::loop_ir_of(build_program(one(r)));
  EXPECT_EQ(ir2.find("whole vectors"), std::string::npos) << ir2;
  test::DiffBatch batch;  // and they compute what the interpreter computes
  batch.add("stride 2, " + std::to_string(W) + " wide", g);
  batch.add("stride 1, " + std::to_string(W) + " wide", g1);
  batch.add("stride 1 + residual", one(r));
  EXPECT_EQ(batch.run(), 0);
}

// A row inside the input zeroes only its padding columns (the copy writes the rest): the
// band buffer is scratch that the previous plane, or the previous kernel, left full of data.
// Chains of layers whose padding differs (the second reads zeros where the first left
// values), left padding of several stride groups, stride 1-3, 3x3 and 5x5, odd and prime
// channels and sizes, batch 1 and 3; and the nest no longer zeroes a whole valid row.
TEST(Depthwise, PaddingColumnsZeroedOnlyMatchInterpreter) {
  struct Chain {
    int64_t n, c, h, w;
    std::vector<std::array<int64_t, 3>> layers;  // kernel, stride, pad
  };
  const std::vector<Chain> chains = {
      {3, 11, 37, 41, {{3, 1, 0}, {3, 2, 1}}},          // batch 3, prime sizes, no padding then stride 2
      {1, 13, 29, 17, {{3, 1, 1}, {3, 2, 4}}},          // left padding of two stride groups
      {3, 7, 23, 19, {{5, 1, 2}, {5, 3, 2}, {3, 1, 3}}},  // 5x5, stride 3, padding past the reach
      {1, 5, 61, 67, {{3, 2, 1}, {3, 1, 4}, {3, 2, 0}}},  // stride 1 padding of four columns
      {2, 3, 131, 113, {{3, 1, 1}, {3, 2, 1}}},         // planes of several bands
  };
  test::DiffBatch batch;
  int i = 0;
  for (auto& ch : chains) {
    Tensor y = input("x", {ch.n, ch.c, ch.h, ch.w});
    std::vector<std::pair<std::string, NodeRef>> outs;  // each layer an output: its own kernel
    for (auto [k, s, pad] : ch.layers) {
      Conv2dOptions o;
      o.stride = {s, s};
      o.padding = {pad, pad};
      o.groups = ch.c;
      Tensor w = from_host(random_tensor(DType::F32, {ch.c, 1, k, k}, static_cast<uint64_t>(90 + i)));
      y = clamp(conv2d(y, w, input("b" + std::to_string(i), {ch.c}), o), Scalar(-6.0), Scalar(6.0));
      outs.push_back({"y" + std::to_string(i++), y.node()});
    }
    Graph g = Graph::from_outputs(outs);
    Program p = build_program(g);
    EXPECT_EQ(direct_kernels(p), static_cast<int>(ch.layers.size())) << test::loop_ir_of(p);
    batch.add("padding chain " + std::to_string(i), g);
  }
  EXPECT_EQ(batch.run(), 0);
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  o.groups = 13;
  std::string ir = test::loop_ir_of(build_program(one(conv2d(input("x", {1, 13, 30, 30}), input("w", {13, 1, 3, 3}), std::nullopt, o))));
  EXPECT_NE(ir.find("fill: the left padding"), std::string::npos) << ir;
  EXPECT_NE(ir.find("fill: the right padding"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("fill: zeros"), ir.rfind("fill: zeros")) << ir;  // only the rows of padding
}

// 1-D depthwise (conv1d with groups = channels) and windows of one row or one column
TEST(Depthwise, OneDimensionalAndThinWindows) {
  test::DiffBatch batch;
  Tensor x1 = input("x", {2, 13, 37});
  batch.add("conv1d depthwise", one(relu(conv1d(x1, input("w", {13, 1, 5}), std::nullopt, 2, 2, 1, 13))));
  for (auto [r, s] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {7, 1}, {1, 1}}) {
    Conv2dOptions o;
    o.padding = {r / 2, s / 2};
    o.groups = 7;
    Tensor x = input("x", {1, 7, 11, 19});
    batch.add("depthwise " + std::to_string(r) + "x" + std::to_string(s), one(conv2d(x, input("w", {7, 1, r, s}), std::nullopt, o)));
  }
  EXPECT_EQ(batch.run(), 0);
}

// several output channels per input plane: stem convolutions (a matmul kernel with a small
// window over 1-5 input channels) take the direct nest with OCB channels per pass; odd and
// prime output counts (the last pass redoes channels), batch 1 and 64, 3x3 and 7x7, stride 1-3
struct StemCase {
  int64_t n, ci, co, h, w, k, stride, pad;
};
const std::vector<StemCase> kStems = {
    {1, 3, 32, 23, 29, 3, 2, 1},   // MobileNet's stem, prime plane
    {1, 1, 13, 31, 37, 7, 2, 3},   // a 7x7 stride-2 stem on one channel, 13 outputs (OCB does not divide)
    {64, 3, 7, 9, 11, 3, 1, 1},    // batch 64, 7 outputs
    {2, 1, 5, 17, 19, 5, 1, 2},    // one input channel
    {1, 5, 11, 13, 41, 3, 3, 0},   // stride 3, no padding, rows of several vectors
    {1, 3, 64, 57, 61, 3, 2, 1},   // wide: several bands, 64 outputs
    {3, 2, 3, 8, 8, 3, 2, 1},      // fewer outputs than a pass
};

TEST(Depthwise, StemConvolutionsTakeTheDirectNest) {
  test::DiffBatch batch;
  int i = 0;
  for (auto& t : kStems) {
    Conv2dOptions o;
    o.stride = {t.stride, t.stride};
    o.padding = {t.pad, t.pad};
    Tensor x = input("x", {t.n, t.ci, t.h, t.w});
    Tensor w = i % 2 ? input("w", {t.co, t.ci, t.k, t.k}) : from_host(random_tensor(DType::F32, {t.co, t.ci, t.k, t.k}, 40 + i));
    Tensor y = conv2d(x, w, input("b", {t.co}), o);
    Graph g = one(i % 3 == 2 ? y : clamp(y, Scalar(0.0), Scalar(6.0)));
    Program p = build_program(g);
    EXPECT_EQ(direct_kernels(p), 1) << "stem " << i << "\n" << test::loop_ir_of(p);
    EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);  // the bias / ReLU6 epilogue stays fused
    if (!p.funcs.empty()) {
      EXPECT_EQ(p.funcs[0].schedule_log.at(0).rfind("direct conv: ", 0), 0u) << p.funcs[0].schedule_log.at(0);
    }
    batch.add("stem " + std::to_string(i++), g);
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(Depthwise, DirectNestPassWidths) {
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  Graph g = one(conv2d(input("x", {1, 3, 13, 17}), input("w", {11, 3, 3, 3}), std::nullopt, o));
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 1);
  for (int ocb = 1; ocb <= 8; ++ocb) {
    loop::DirectParams dp;
    dp.ocb = ocb;
    auto f = loop::lower_depthwise_kernel(p.kg, 0, 8, dp);
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->schedule_log.at(0).find(std::to_string(ocb) + " of 11 output channels per pass"), std::string::npos)
        << f->schedule_log.at(0);
  }
  // the default: 2 rows x 4 channels (8 accumulators) with 8 lanes (16 registers: more
  // spilled), up to 8 with 16 lanes (the tap loop), 6 under LATHE_STEM_DIRECT=0 (the
  // unrolled pass: LLVM's hoisted weight broadcasts took the registers)
  for (auto [lanes, want, off] : std::vector<std::tuple<int, int, bool>>{{8, 4, false}, {16, 8, false}, {8, 4, true}, {16, 6, true}}) {
    if (off) setenv("LATHE_STEM_DIRECT", "0", 1);
    auto f = loop::lower_depthwise_kernel(p.kg, 0, lanes);
    unsetenv("LATHE_STEM_DIRECT");
    ASSERT_TRUE(f.has_value());
    const std::string& log = f->schedule_log.at(0);
    EXPECT_NE(log.find(std::to_string(want) + " of 11 output channels per pass"), std::string::npos) << lanes << " lanes: " << log;
    EXPECT_EQ(log.find(", tap loop") != std::string::npos, !off) << log;
  }
  EXPECT_TRUE(loop::takes_direct_conv(p.kg, 0));
}

// The stem nest's pass loops over input channels and tap rows, kw unrolled ("tap loop"), and a
// 7x7 stem over 1-3 input channels (up to 160 taps) takes the nest by default;
// LATHE_STEM_DIRECT_OCB / _ROWS set the pass sizes; LATHE_STEM_DIRECT=0 (read at each lowering)
// brings back the unrolled pass and the 64-tap limit (the 7x7 stems are GEMMs). Against the
// interpreter: odd and prime planes and output counts, batch 1 and 3, stride 2 and 3, pad 3
// and 0, one input channel, bias / ReLU epilogue, constant and input weights, several pass
// sizes (the last pass redoing channels, rows left over), and a grouped convolution with
// several outputs per group.
TEST(Depthwise, StemTapLoopMatchesInterpreter) {
  const std::vector<StemCase> cases = {
      {1, 3, 13, 29, 31, 7, 2, 3},  // ResNet's stem on a prime plane, 13 outputs
      {3, 3, 16, 23, 19, 7, 2, 3},  // batch 3
      {1, 2, 11, 37, 41, 7, 3, 0},  // stride 3, no padding, 2 channels
      {1, 3, 64, 45, 47, 7, 2, 3},  // 64 outputs, several bands
      {2, 1, 13, 31, 37, 7, 2, 3},  // one input channel
      {1, 3, 32, 23, 29, 3, 2, 1},  // MobileNet's 3x3 stem (direct also under LATHE_STEM_DIRECT=0)
      {1, 4, 5, 17, 13, 5, 1, 2},   // 5x5 over 4 channels (100 taps), 5 outputs
  };
  struct Env {
    std::vector<std::pair<const char*, const char*>> vars;
    const char* rows;  // the log's rows per pass
    bool off;
  };
  const std::vector<Env> envs = {
      {{}, "rows in pairs", false},
      {{{"LATHE_STEM_DIRECT_OCB", "4"}, {"LATHE_STEM_DIRECT_ROWS", "3"}}, "3 rows per pass", false},
      {{{"LATHE_STEM_DIRECT_OCB", "7"}, {"LATHE_STEM_DIRECT_ROWS", "1"}}, "1 rows per pass", false},
      {{{"LATHE_STEM_DIRECT", "0"}}, "rows in pairs", true},
  };
  int diffs = 0, i = 0;
  for (auto& env : envs) {
    for (auto& [k, v] : env.vars) setenv(k, v, 1);
    test::DiffBatch batch;
    for (auto& t : cases) {
      Conv2dOptions o;
      o.stride = {t.stride, t.stride};
      o.padding = {t.pad, t.pad};
      Tensor x = input("x", {t.n, t.ci, t.h, t.w});
      Tensor w = i % 2 ? input("w", {t.co, t.ci, t.k, t.k}) : from_host(random_tensor(DType::F32, {t.co, t.ci, t.k, t.k}, 60 + i));
      Tensor y = conv2d(x, w, input("b", {t.co}), o);
      Graph g = one(i % 3 == 2 ? y : clamp(y, Scalar(0.0), Scalar(1e30)));
      Program p = build_program(g);
      const bool gemm = env.off && t.ci * t.k * t.k > 64;
      EXPECT_EQ(direct_kernels(p), gemm ? 0 : 1) << "stem " << i << "\n" << test::loop_ir_of(p);
      if (!gemm) {
        EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
        if (!p.funcs.empty()) {
          const std::string& log = p.funcs[0].schedule_log.at(0);
          EXPECT_EQ(log.rfind("direct conv: ", 0), 0u) << log;
          EXPECT_EQ(log.find(", tap loop") != std::string::npos, !env.off) << log;
          EXPECT_NE(log.find(env.rows), std::string::npos) << log;
        }
      }
      batch.add("stem tap loop " + std::to_string(i++), g);
    }
    {  // a grouped convolution, 2 groups of 3 input channels and 5 outputs
      Conv2dOptions o;
      o.stride = {2, 2};
      o.padding = {2, 2};
      o.groups = 2;
      Tensor y = conv2d(input("x", {3, 6, 19, 23}), input("w", {10, 3, 5, 5}), input("b", {10}), o);
      batch.add("grouped " + std::to_string(i++), one(clamp(y, Scalar(0.0), Scalar(6.0))));
    }
    diffs += batch.run();
    for (auto& [k, v] : env.vars) unsetenv(k);
  }
  EXPECT_EQ(diffs, 0);
}

// a GEMM stays a GEMM: 1x1 convolutions, many input channels, no window
TEST(Depthwise, ConvolutionsWithWideContractionsStayGemms) {
  // (over 4 input channels at most 64 taps: a 5x5 over 5 channels, 125 taps, stays a GEMM, as
  // do a 9x9 over 3 channels, 243 taps, and a 3x3 over 9; a 7x7 over 3 takes the nest)
  for (auto [ci, k] : std::vector<std::pair<int64_t, int64_t>>{{16, 1}, {64, 3}, {9, 3}, {5, 5}, {3, 9}}) {
    Conv2dOptions o;
    o.padding = {k / 2, k / 2};
    Program p = build_program(one(conv2d(input("x", {1, ci, 14, 14}), input("w", {32, ci, k, k}), std::nullopt, o)));
    EXPECT_EQ(direct_kernels(p), 0) << ci << "x" << k << "\n" << test::loop_ir_of(p);
  }
}

// Rows of at most 8 outputs (MobileNetV2's 7 x 7 layers) run on 8-lane vectors where the host
// has 16 (AVX-512): one vector a row either way, the copied rows half as wide. Wider rows, and
// the stems (several outputs per plane), keep 16. Against the interpreter (on an AVX-512 host
// these take the 8-lane nest by default): 1-8 wide, stride 1-3, 3x3 and 5x5, odd and prime
// channels, batch 1 and 3, bias / ReLU6 / residual epilogues.
Graph dw_graph(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, int64_t pad, int ep, uint64_t seed) {
  Conv2dOptions o;
  o.stride = {s, s};
  o.padding = {pad, pad};
  o.groups = c;
  Tensor y = conv2d(input("x", {n, c, h, w}), from_host(random_tensor(DType::F32, {c, 1, k, k}, seed)),
                    ep == 0 ? std::nullopt : std::optional<Tensor>(input("b", {c})), o);
  if (ep == 1) y = clamp(y, Scalar(0.0), Scalar(6.0));
  if (ep == 2) {
    const int64_t oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
    y = y + input("r", {n, c, oh, ow});
  }
  return one(y);
}

TEST(Depthwise, ShortRowsTakeEightLanes) {
  struct Short {
    int64_t n, c, h, w, k, s, pad, ow;
  };
  const std::vector<Short> cases = {
      {1, 37, 7, 7, 3, 1, 1, 7},     // 7 x 7 stride 1 (MobileNetV2's last layers)
      {3, 19, 14, 14, 3, 2, 1, 7},   // 7 x 7 out of 14 x 14, batch 3
      {1, 13, 8, 8, 3, 1, 1, 8},     // exactly 8 wide
      {3, 11, 9, 9, 5, 1, 2, 9},     // 9 wide: 16 lanes
      {1, 7, 14, 14, 3, 1, 1, 14},   // 14 wide: 16 lanes
      {1, 5, 3, 1, 3, 1, 1, 1},      // one column
      {3, 7, 13, 11, 5, 2, 2, 6},    // 5x5 stride 2, 6 wide
      {1, 17, 11, 17, 3, 3, 1, 6},   // stride 3
      {1, 3, 23, 5, 3, 1, 0, 3},     // no padding, 3 wide
  };
  test::DiffBatch batch;
  int i = 0;
  for (auto& t : cases)
    for (int ep = 0; ep < 3; ++ep, ++i) {
      Graph g = dw_graph(t.n, t.c, t.h, t.w, t.k, t.s, t.pad, ep, 120 + i);
      Program p = build_program(g);
      ASSERT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
      auto f = loop::lower_depthwise_kernel(p.kg, 0, 16);
      ASSERT_TRUE(f.has_value()) << "case " << i;
      const std::string want = t.ow <= 8 ? ", 8 lanes," : ", 16 lanes,";
      EXPECT_NE(f->schedule_log.at(0).find(want), std::string::npos) << "case " << i << ": " << f->schedule_log.at(0);
      auto f8 = loop::lower_depthwise_kernel(p.kg, 0, 8);  // an AVX2 host: 8 lanes as before
      ASSERT_TRUE(f8.has_value());
      EXPECT_NE(f8->schedule_log.at(0).find(", 8 lanes,"), std::string::npos) << f8->schedule_log.at(0);
      EXPECT_EQ(direct_kernels(p), 1) << "case " << i << "\n" << test::loop_ir_of(p);
      batch.add("short rows " + std::to_string(i), g);
    }
  EXPECT_EQ(batch.run(), 0);
  // a stem (several outputs per plane) keeps the host's lanes
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  Program stem = build_program(one(conv2d(input("x", {1, 3, 13, 13}), input("w", {11, 3, 3, 3}), std::nullopt, o)));
  auto f = loop::lower_depthwise_kernel(stem.kg, 0, 16);
  ASSERT_TRUE(f.has_value());
  EXPECT_NE(f->schedule_log.at(0).find(", 16 lanes,"), std::string::npos) << f->schedule_log.at(0);
}

// LATHE_DEPTHWISE_NARROW=0: short rows keep the host's 16 lanes (read at each lowering)
TEST(Depthwise, NarrowSwitchOff) {
  setenv("LATHE_DEPTHWISE_NARROW", "0", 1);
  Graph g = dw_graph(3, 37, 7, 7, 3, 1, 1, 1, 7);
  Program p = build_program(g);
  auto f = loop::lower_depthwise_kernel(p.kg, 0, 16);
  test::DiffBatch batch;
  batch.add("7 x 7, 16 lanes", g);
  const int diffs = batch.run();
  unsetenv("LATHE_DEPTHWISE_NARROW");
  ASSERT_TRUE(f.has_value());
  EXPECT_NE(f->schedule_log.at(0).find(", 16 lanes,"), std::string::npos) << f->schedule_log.at(0);
  EXPECT_EQ(diffs, 0);
}

// LATHE_DEPTHWISE_ROW_SPLIT=1: the threads split a depthwise layer over its row bands (the
// parallel index band-major, the bands a multiple of the threads) instead of its channels;
// every case still matches the interpreter, and those with enough rows take the row split.
// The switch is read once per process (ctest runs each test in its own).
TEST(Depthwise, RowSplitMatchesInterpreter) {
  setenv("LATHE_DEPTHWISE_ROW_SPLIT", "1", 1);
  const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  test::DiffBatch batch;
  int i = 0, split = 0;
  for (auto& t : kCases)
    for (bool ep : {false, true}) {
      Graph g = one(dw_conv(t, ep, i % 2 == 1, 40 + i));
      Program p = build_program(g);
      ASSERT_EQ(direct_kernels(p), 1) << "case " << i;
      for (auto& f : p.funcs)
        for (auto& l : f.schedule_log) split += l.find("split over rows") != std::string::npos;
      batch.add("depthwise row split " + std::to_string(i++), g);
    }
  if (threads > 1) EXPECT_GE(split, 10) << "the row split was not taken";
  else EXPECT_EQ(split, 0);
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
