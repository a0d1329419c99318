// int8_gemm_test.cpp — integer contractions (matmul_integer, conv2d_integer: u8/i8 operands,
// i32 sums) through the packed int8 GEMM, against the interpreter on the backend under test
// (LATHE_TEST_BACKEND), at odd sizes, with full-range and saturating operands.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>

#include "../backends/diff_util.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "core/runtime/random.h"

#include "int8_data.h"

namespace lathe {
namespace {

using test::full_range;

HostTensor filled(DType dt, std::vector<int64_t> shape, int64_t v) {
  HostTensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, v);
  return t;
}

Graph mm_graph(std::vector<int64_t> a, std::vector<int64_t> b, DType da = DType::U8, DType db = DType::I8) {
  Shape sa(a.begin(), a.end()), sb(b.begin(), b.end());
  return Graph::from_outputs({{"c", matmul_integer(input("a", sa, da), input("b", sb, db)).node()}});
}

TEST(Int8Gemm, IsThePackedInt8Kernel) {
  Program p = build_program(mm_graph({65, 129}, {129, 33}));
  ASSERT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
  EXPECT_TRUE(loop::is_packed_matmul(p.funcs[0])) << test::loop_ir_of(p);
  EXPECT_NE(p.funcs[0].schedule_log.front().find("int8"), std::string::npos) << p.funcs[0].schedule_log.front();
  EXPECT_EQ(p.kg.buffers.at(p.funcs[0].buffers[0].buffer).dtype, DType::I32);
}

TEST(Int8Gemm, OddSizesMatchInterpreter) {
  test::DiffBatch batch;
  struct Case { std::vector<int64_t> a, b; DType da, db; };
  std::vector<Case> cases = {
      {{1, 7}, {7, 13}, DType::U8, DType::I8},          // one row, K not a multiple of 2 or 4
      {{65, 129}, {129, 33}, DType::U8, DType::I8},     // ragged tiles everywhere
      {{6, 600}, {600, 16}, DType::U8, DType::I8},      // K over several KC blocks (partial sums)
      {{3, 5, 11}, {3, 11, 17}, DType::U8, DType::I8},  // batched
      {{13, 9}, {9, 21}, DType::I8, DType::I8},          // s8 x s8
      {{13, 9}, {9, 21}, DType::U8, DType::U8},          // u8 x u8
      {{13, 10}, {10, 21}, DType::I8, DType::U8},        // s8 x u8
      {{1, 64}, {64, 40}, DType::U8, DType::I8},         // batch-1 matrix-vector
  };
  uint64_t seed = 1;
  for (auto& c : cases) {
    Graph g = mm_graph(c.a, c.b, c.da, c.db);
    batch.add("matmul_integer " + std::to_string(seed), g,
              TensorMap{{"a", full_range(c.da, c.a, seed)}, {"b", full_range(c.db, c.b, seed + 100)}});
    ++seed;
  }
  EXPECT_EQ(batch.run(), 0);
}

// The ragged A panel (M % MR rows) runs an integer micro-kernel of only its rows (its own
// k loop, km), like the f32 one (contraction_panels_test.cpp), against the interpreter.
TEST(Int8Gemm, RaggedAPanelRunsOnlyItsRows) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) GTEST_SKIP() << "tile overridden by LATHE_MATMUL_TILE";
  const int mr = loop::host_matmul_params().mr;
  test::DiffBatch batch;
  uint64_t seed = 7;
  for (std::vector<int64_t> a : {std::vector<int64_t>{13, 77}, {128, 64}, {65, 129}, {2, 131, 9}}) {
    std::vector<int64_t> b = a.size() == 3 ? std::vector<int64_t>{a[0], a[2], 17} : std::vector<int64_t>{a.back(), 33};
    Graph g = mm_graph(a, b);
    if (a[a.size() - 2] % mr != 0) {
      Program p = build_program(g);
      std::string ir = test::loop_ir_of(p);
      EXPECT_NE(ir.find("for km in "), std::string::npos) << ir;
    }
    batch.add("ragged rows " + std::to_string(a[a.size() - 2]), g,
              TensorMap{{"a", full_range(DType::U8, a, seed)}, {"b", full_range(DType::I8, b, seed + 100)}});
    ++seed;
  }
  EXPECT_EQ(batch.run(), 0);
}

// 255 x -128 (and 255 x 127) in every product: the pair sums vpmaddubsw would saturate at
// i16 must come out exact; K odd so a zero-padded group is in play.
TEST(Int8Gemm, SaturatingOperandsAreExact) {
  test::DiffBatch batch;
  for (int64_t bv : {-128, 127}) {
    Graph g = mm_graph({7, 301}, {301, 19});
    batch.add("extreme " + std::to_string(bv), g,
              TensorMap{{"a", filled(DType::U8, {7, 301}, 255)}, {"b", filled(DType::I8, {301, 19}, bv)}});
  }
  EXPECT_EQ(batch.run(), 0);
  HostTensor a = filled(DType::U8, {2, 301}, 255), b = filled(DType::I8, {301, 3}, -128);
  TensorMap out = interpret(mm_graph({2, 301}, {301, 3}), {{"a", a}, {"b", b}});
  EXPECT_EQ(out.at("c").get_f64(0), 255.0 * -128 * 301);
}

// A zero-point correction (an i32 epilogue) fuses into the int8 kernel's write-back.
TEST(Int8Gemm, I32EpilogueFuses) {
  Tensor a = input("a", {9, 37}, DType::U8), b = input("b", {37, 20}, DType::I8), z = input("z", {20}, DType::I32);
  Graph g = Graph::from_outputs({{"c", (matmul_integer(a, b) - z).node()}});
  Program p = build_program(g);
  EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
  test::DiffBatch batch;
  batch.add("epilogue", g,
            TensorMap{{"a", full_range(DType::U8, {9, 37}, 3)}, {"b", full_range(DType::I8, {37, 20}, 4)},
                      {"z", random_tensor(DType::I32, {20}, 5)}});
  EXPECT_EQ(batch.run(), 0);
}

TEST(Int8Gemm, ConvIntegerMatchesInterpreter) {
  test::DiffBatch batch;
  Conv2dOptions o;
  o.padding = {1, 1};
  o.stride = {2, 1};
  for (int64_t pad_value : {0, 131}) {
    Tensor x = input("x", {2, 5, 9, 7}, DType::U8), w = input("w", {11, 5, 3, 3}, DType::I8);
    Graph g = Graph::from_outputs({{"y", conv2d_integer(x, w, o, pad_value).node()}});
    batch.add("conv pad " + std::to_string(pad_value), g,
              TensorMap{{"x", full_range(DType::U8, {2, 5, 9, 7}, 7)}, {"w", full_range(DType::I8, {11, 5, 3, 3}, 8)}});
  }
  EXPECT_EQ(batch.run(), 0);
}

// B panels of integer GEMMs are packed a group of k at a time (the interleaved stores):
// the row-by-row pack with a ragged last group (odd K), the run-by-run pack of convolutions
// over wide feature maps (the whole-panel copy) and its edges, a strided 7x7 stem, the
// panel-by-panel pack of a transposed B, at batch 1 and 64, against the interpreter.
TEST(Int8Gemm, GroupedBPackingMatchesInterpreter) {
  test::DiffBatch batch;
  struct ConvCase { std::vector<int64_t> x, w; int64_t stride, pad, pad_value; };
  std::vector<ConvCase> convs = {
      {{1, 7, 23, 41}, {13, 7, 3, 3}, 1, 1, 0},    // K = 63: odd, the generic pack's ragged group
      {{1, 6, 19, 37}, {11, 6, 3, 3}, 1, 1, 0},    // K = 54: by runs, rows of 37 (whole panels)
      {{1, 6, 19, 37}, {11, 6, 3, 3}, 1, 1, 131},  // the same, a zero point in the padding
      {{1, 3, 31, 29}, {8, 3, 7, 7}, 2, 3, 17},    // a strided 7x7 stem, K = 147
      {{64, 3, 5, 7}, {5, 3, 1, 1}, 1, 0, 0},      // batch 64, 1x1, K = 3
      {{1, 64, 17, 19}, {7, 64, 1, 1}, 1, 0, 0},   // 1x1, K = 64, prime sizes
      // odd K packed by runs, its last group of k ragged (zero past K)
      {{2, 3, 29, 31}, {7, 3, 7, 7}, 2, 3, 5},     // batch 2, a strided 7x7 stem, K = 147
      {{2, 5, 13, 17}, {9, 5, 3, 3}, 2, 1, 0},     // batch 2, strided 3x3, odd channels, K = 45
      {{1, 5, 11, 40}, {6, 5, 3, 3}, 1, 1, 131},   // K = 45, rows of 40 (whole panels), a zero point
      {{2, 7, 9, 11}, {5, 7, 1, 1}, 2, 0, 0},      // batch 2, a strided 1x1, K = 7
      // rows shorter than NR: a panel spans 3-4 runs, each copied by a scalar loop after the
      // group's panel is zeroed at once (a ragged last group too)
      {{3, 10, 13, 13}, {17, 10, 1, 1}, 2, 0, 0},  // batch 3, a strided 1x1 to rows of 7, K = 10
      {{1, 31, 11, 11}, {5, 31, 1, 1}, 2, 0, 0},   // a strided 1x1 to rows of 6, K = 31 (prime)
      {{1, 12, 7, 7}, {9, 12, 3, 3}, 1, 1, 77},    // 3x3 over rows of 7, a zero point in the padding
      {{3, 13, 9, 13}, {11, 13, 3, 3}, 2, 1, 3},   // batch 3, strided 3x3 to rows of 7, K = 117
  };
  uint64_t seed = 300;
  for (auto& c : convs) {
    Conv2dOptions o;
    o.stride = {c.stride, c.stride};
    o.padding = {c.pad, c.pad};
    Shape sx(c.x.begin(), c.x.end()), sw(c.w.begin(), c.w.end());
    Graph g = Graph::from_outputs({{"y", conv2d_integer(input("x", sx, DType::U8), input("w", sw, DType::I8), o, c.pad_value).node()}});
    batch.add("conv " + std::to_string(seed), g,
              TensorMap{{"x", full_range(DType::U8, c.x, seed)}, {"w", full_range(DType::I8, c.w, seed + 1)}});
    seed += 2;
  }
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 37, 53}, {64, 37, 53}, {29, 64, 70}}) {
    // x @ W^T: B's columns are W's rows
    Tensor a = input("a", {m, k}, DType::U8), w = input("w", {n, k}, DType::I8);
    Graph g = Graph::from_outputs({{"c", matmul_integer(a, t(w)).node()}});
    batch.add("matmul x W^T " + std::to_string(m), g,
              TensorMap{{"a", full_range(DType::U8, {m, k}, seed)}, {"w", full_range(DType::I8, {n, k}, seed + 1)}});
    seed += 2;
  }
  EXPECT_EQ(batch.run(), 0);
}

// An odd K (a 7x7 stem over 3 channels: K = 147) packs its im2col by runs like an even one,
// the ragged last group of k zeroed; it had fallen back to the per-element gather through
// the offset tables (ResNet-50 QDQ's stem spent most of its time packing B).
TEST(Int8Gemm, OddKPacksByRuns) {
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {3, 3};
  Tensor x = input("x", {1, 3, 40, 44}, DType::U8), w = input("w", {16, 3, 7, 7}, DType::I8);
  Graph g = Graph::from_outputs({{"y", conv2d_integer(x, w, o, 9).node()}});
  Program p = build_program(g);
  std::string ir = test::loop_ir_of(p);
  EXPECT_NE(ir.find("by runs"), std::string::npos) << ir;
  // the runs of an integer group are short copies at a stride of G: scalar loops (the
  // vectorizer's interleaved versions were most of a strided conv's LLVM time)
  EXPECT_NE(ir.find("zero the group's panel"), std::string::npos) << ir;
  EXPECT_NE(ir.find("scalar for"), std::string::npos) << ir;
  test::DiffBatch batch;
  batch.add("odd K by runs", g,
            TensorMap{{"x", full_range(DType::U8, {1, 3, 40, 44}, 41)}, {"w", full_range(DType::I8, {16, 3, 7, 7}, 42)}});
  EXPECT_EQ(batch.run(), 0);
}

// A stride-1 window over a map as wide as its output ("same" padding) reads a panel's NR
// columns at consecutive addresses even where the panel crosses a row or touches the padding:
// such panels are copied whole and their columns outside the bounds set to 0 afterwards.
// Rows shorter than, equal to and longer than NR (16), odd and prime sizes, batch 1 and 3,
// 3x3, 5x5 and 1x3 windows, a zero point in the padding, against the interpreter.
TEST(Int8Gemm, ContiguousPanelsMatchInterpreter) {
  test::DiffBatch batch;
  struct ConvCase { std::vector<int64_t> x, w; int64_t ph, pw, pad_value; };
  std::vector<ConvCase> convs = {
      {{1, 8, 7, 7}, {9, 8, 3, 3}, 1, 1, 0},        // rows of 7: a panel spans 3 runs
      {{3, 12, 13, 13}, {11, 12, 3, 3}, 1, 1, 0},   // batch 3, rows of 13 (prime)
      {{1, 16, 14, 14}, {32, 16, 3, 3}, 1, 1, 0},   // rows of 14, 32 channels out
      {{1, 8, 16, 16}, {3, 8, 3, 3}, 1, 1, 0},      // rows of exactly NR
      {{2, 4, 29, 31}, {7, 4, 3, 3}, 1, 1, 0},      // batch 2, rows of 31
      {{1, 4, 11, 17}, {5, 4, 5, 5}, 2, 2, 0},      // a 5x5 window, rows of 17
      {{3, 4, 6, 23}, {5, 4, 1, 3}, 0, 1, 0},       // batch 3, a 1x3 window
      {{1, 8, 9, 9}, {6, 8, 3, 3}, 1, 1, 77},       // a zero point in the padding
      {{1, 4, 3, 5}, {2, 4, 3, 3}, 1, 1, 0},        // a map smaller than a panel
  };
  uint64_t seed = 700;
  bool contiguous = false;
  for (auto& c : convs) {
    Conv2dOptions o;
    o.padding = {c.ph, c.pw};
    Shape sx(c.x.begin(), c.x.end()), sw(c.w.begin(), c.w.end());
    Graph g = Graph::from_outputs({{"y", conv2d_integer(input("x", sx, DType::U8), input("w", sw, DType::I8), o, c.pad_value).node()}});
    contiguous = contiguous || test::loop_ir_of(build_program(g)).find("copy a contiguous panel") != std::string::npos;
    batch.add("conv " + std::to_string(seed), g,
              TensorMap{{"x", full_range(DType::U8, c.x, seed)}, {"w", full_range(DType::I8, c.w, seed + 1)}});
    seed += 2;
  }
  EXPECT_TRUE(contiguous);
  EXPECT_EQ(batch.run(), 0);
}

// A stride-1 window's contiguous panels over channels innermost in k (VNNI groups of 4
// channels of one tap): the columns outside the bounds are the same for every group of a tap,
// so they are found once per panel and tap into a byte mask that each group's copy ANDs
// (LATHE_INT8_TAP_MASK). Maps 11, 13, 14 and 28 wide (a panel crosses 2-4 rows), channels 12,
// 20, 36 and 100 (a tap's groups split across K blocks: K = 900), batch 1 and 3, weights as
// inputs and as constants; beside them a 7x7 map (a gathered panel), zero points 131 and 255
// (padded by a kernel of their own: no bounds) and 5 and 17 channels (groups across taps: no
// mask); exact sums against the interpreter.
TEST(Int8Gemm, TapMaskPanelsMatchInterpreter) {
  test::DiffBatch batch;
  struct ConvCase { std::vector<int64_t> x, w; int64_t pad_value; };
  std::vector<ConvCase> convs = {
      {{3, 20, 11, 11}, {13, 20, 3, 3}, 0},      // batch 3, rows of 11: a panel spans 4 rows
      {{1, 36, 13, 13}, {40, 36, 3, 3}, 0},      // rows of 13 (prime)
      {{1, 100, 14, 14}, {24, 100, 3, 3}, 0},    // K = 900: taps across K blocks
      {{3, 12, 28, 28}, {9, 12, 3, 3}, 0},       // batch 3, rows of 28
      {{1, 12, 7, 7}, {19, 12, 3, 3}, 0},        // rows of 7: gathered
      {{3, 16, 9, 9}, {13, 16, 3, 3}, 131},      // batch 3, a zero point in the padding
      {{1, 5, 13, 13}, {11, 5, 3, 3}, 0},        // 5 channels: groups across taps
      {{3, 17, 13, 13}, {7, 17, 3, 3}, 255},     // 17 channels, batch 3
  };
  uint64_t seed = 1500;
  bool masked = false;
  for (auto& c : convs) {
    for (bool constant : {false, true}) {
      Conv2dOptions o;
      o.padding = {1, 1};
      Shape sx(c.x.begin(), c.x.end()), sw(c.w.begin(), c.w.end());
      HostTensor wv = full_range(DType::I8, c.w, seed + 1);
      Tensor w = constant ? from_host(wv) : input("w", sw, DType::I8);
      Graph g = Graph::from_outputs({{"y", conv2d_integer(input("x", sx, DType::U8), w, o, c.pad_value).node()}});
      masked = masked || test::loop_ir_of(build_program(g)).find("the tap's column mask") != std::string::npos;
      TensorMap in{{"x", full_range(DType::U8, c.x, seed)}};
      if (!constant) in.emplace("w", wv);
      batch.add("tap mask " + std::to_string(seed) + (constant ? " const w" : ""), g, in);
    }
    seed += 2;
  }
  auto off = [](const char* name) {  // the mask's switch, or one of the paths it rides on
    const char* e = std::getenv(name);
    return e && std::string(e) == "0";
  };
  if (loop::vnni_i8_u8() && !off("LATHE_INT8_TAP_MASK") && !off("LATHE_INT8_SHARED_BOUNDS") && !off("LATHE_INT8_CONTIG_PANELS")) {
    EXPECT_TRUE(masked);
  }
  EXPECT_EQ(batch.run(), 0);
}

// A window over a small map into many channels takes the u8 activations as A (the positions
// as its rows): a whole MR-tall panel's group of 4 channels of one tap is 4 runs of MR
// consecutive bytes (stride 1) or MR x 4 bytes gathered at the panel's row addresses
// (stride 2), ANDed with a row mask made once per panel and tap (LATHE_INT8_A_CONTIG). Maps
// 7x7, 5x5, 9x9, 6x11, and 14x14, 9x9, 13x11 at stride 2, channels 12, 20, 64, 132 (K = 1188:
// taps across K blocks) and 512, 96-512 channels out, batch 1 and 3, weights as inputs and as
// constants; 7 channels (groups across taps: per element) beside them; exact sums against
// the interpreter.
TEST(Int8Gemm, ConvRowsContiguousPanelsMatchInterpreter) {
  test::DiffBatch batch;
  struct ConvCase { std::vector<int64_t> x, w; int64_t stride = 1; };
  std::vector<ConvCase> convs = {
      {{1, 64, 7, 7}, {256, 64, 3, 3}},       // resnet's 7x7 layers, smaller
      {{1, 512, 7, 7}, {512, 512, 3, 3}},     // resnet's 7x7 layers
      {{3, 20, 5, 5}, {96, 20, 3, 3}},        // batch 3, a 5x5 map
      {{1, 132, 7, 7}, {128, 132, 3, 3}},     // K = 1188: taps across K blocks
      {{3, 12, 9, 9}, {200, 12, 3, 3}},       // batch 3, rows of 9
      {{1, 16, 6, 11}, {160, 16, 3, 3}},      // a 6x11 map
      {{1, 7, 7, 7}, {128, 7, 3, 3}},         // 7 channels: groups across taps
      {{1, 64, 14, 14}, {256, 64, 3, 3}, 2},  // stride 2 (resnet's 14 -> 7): gathered rows
      {{3, 20, 9, 9}, {96, 20, 3, 3}, 2},     // batch 3, stride 2 over an odd map
      {{1, 12, 13, 11}, {200, 12, 3, 3}, 2},  // stride 2, 13 x 11 -> 7 x 6
  };
  uint64_t seed = 1700;
  bool contiguous = false, gathered = false;
  for (auto& c : convs) {
    for (bool constant : {false, true}) {
      Conv2dOptions o;
      o.padding = {1, 1};
      o.stride = {c.stride, c.stride};
      Shape sx(c.x.begin(), c.x.end()), sw(c.w.begin(), c.w.end());
      HostTensor wv = full_range(DType::I8, c.w, seed + 1);
      Tensor w = constant ? from_host(wv) : input("w", sw, DType::I8);
      Graph g = Graph::from_outputs({{"y", conv2d_integer(input("x", sx, DType::U8), w, o, 0).node()}});
      gathered = gathered || test::loop_ir_of(build_program(g)).find("gathered panels, masked") != std::string::npos;
      contiguous = contiguous || test::loop_ir_of(build_program(g)).find("pack A: copy a contiguous panel") != std::string::npos;
      TensorMap in{{"x", full_range(DType::U8, c.x, seed)}};
      if (!constant) in.emplace("w", wv);
      batch.add("conv rows " + std::to_string(seed) + (constant ? " const w" : ""), g, in);
    }
    seed += 2;
  }
  const char* e = std::getenv("LATHE_INT8_A_CONTIG");
  if (loop::vnni_i8_u8() && !(e && std::string(e) == "0")) {
    EXPECT_TRUE(contiguous);
    EXPECT_TRUE(gathered);
  }
  EXPECT_EQ(batch.run(), 0);
}

// A convolution's i8 weights (A) times its u8 im2col (B) as VNNI groups of 4 (vpdpbusd with
// the columns as its unsigned operand, loop::vnni_i8_u8), the input channels innermost in k
// where they are a multiple of 4 (contraction.cpp): channels 8, 12, 16 (4 channels of one tap
// a group) and 5, 7, 3 (groups across taps), stride 1 and 2, a zero point in the padding,
// batch 1 and 3, weights as inputs (packed per run) and as constants (prepacked), exact i32
// sums against the interpreter. Under LATHE_INT8_DOT=i16 the same graphs take the pairs.
TEST(Int8Gemm, ConvWeightsByU8ColumnsMatchInterpreter) {
  test::DiffBatch batch;
  struct ConvCase { std::vector<int64_t> x, w; int64_t stride, pad, pad_value; };
  std::vector<ConvCase> convs = {
      {{1, 8, 9, 11}, {13, 8, 3, 3}, 1, 1, 0},      // 8 channels, odd rows
      {{3, 12, 10, 9}, {7, 12, 3, 3}, 2, 1, 131},   // batch 3, stride 2, zero point 131 in the padding
      {{1, 16, 15, 15}, {17, 16, 3, 3}, 2, 1, 255}, // stride 2 over an odd map
      {{3, 5, 8, 13}, {11, 5, 3, 3}, 1, 1, 9},      // 5 channels: groups across taps
      {{1, 7, 11, 7}, {29, 7, 3, 3}, 2, 0, 0},      // 7 channels, stride 2, no padding
      {{1, 3, 17, 17}, {10, 3, 7, 7}, 2, 3, 0},     // a 3-channel 7x7 stem
      {{1, 8, 40, 37}, {6, 8, 3, 3}, 1, 1, 77},     // rows wider than NR
      {{3, 8, 29, 25}, {9, 8, 3, 3}, 2, 1, 200},    // stride 2, rows of 13: a panel spans 4 runs
      {{1, 12, 60, 58}, {5, 12, 3, 3}, 2, 1, 0},    // stride 2, rows of 29: 2 runs a panel
  };
  uint64_t seed = 900;
  int dot4 = 0, packed_convs = 0;
  bool group_runs = false;  // a group's runs copied by its first member (LATHE_INT8_GROUP_RUNS)
  for (auto& c : convs) {
    for (bool constant : {false, true}) {
      Conv2dOptions o;
      o.padding = {c.pad, c.pad};
      o.stride = {c.stride, c.stride};
      Shape sx(c.x.begin(), c.x.end()), sw(c.w.begin(), c.w.end());
      HostTensor wv = full_range(DType::I8, c.w, seed + 1);
      Tensor w = constant ? from_host(wv) : input("w", sw, DType::I8);
      Graph g = Graph::from_outputs({{"y", conv2d_integer(input("x", sx, DType::U8), w, o, c.pad_value).node()}});
      Program p = build_program(g);
      group_runs = group_runs || test::loop_ir_of(p).find("copy a run (a group of k)") != std::string::npos;
      for (auto& f : p.funcs) {
        if (!loop::is_packed_matmul(f)) continue;
        ++packed_convs;
        const std::string& log = f.schedule_log.front();  // (a swapped small conv: u8xi8)
        if (log.find("int8 i8xu8 dot4 ") != std::string::npos || log.find("int8 u8xi8 dot4 ") != std::string::npos) ++dot4;
      }
      TensorMap in{{"x", full_range(DType::U8, c.x, seed)}};
      if (!constant) in.emplace("w", wv);
      batch.add("conv " + std::to_string(seed) + (constant ? " const w" : ""), g, in);
    }
    seed += 2;
  }
  EXPECT_GE(packed_convs, 10);
  if (loop::vnni_i8_u8()) EXPECT_EQ(dot4, packed_convs);
  else EXPECT_EQ(dot4, 0);
  const char* gr = std::getenv("LATHE_INT8_GROUP_RUNS");
  if (loop::vnni_i8_u8() && !(gr && std::string(gr) == "0")) EXPECT_TRUE(group_runs);
  EXPECT_EQ(batch.run(), 0);
}

// A 1x1 int8 conv's B pack row by row (no window: the u8 input read as [K, N]) where N is no
// multiple of NR: the whole panels copy without the column guard, the last one with it
// (LATHE_INT8_WHOLE_PANELS). Positions 169, 99 and 63 (several panels and a ragged one),
// channels 16, 20 (groups of 4) and 17 (a ragged last group), batch 1 and 3, weights as
// inputs and as constants, exact i32 sums against the interpreter.
TEST(Int8Gemm, Conv1x1RaggedPanelsMatchInterpreter) {
  test::DiffBatch batch;
  struct ConvCase { std::vector<int64_t> x, w; };
  std::vector<ConvCase> convs = {
      {{1, 16, 13, 13}, {72, 16, 1, 1}},  // 169 positions: 5 whole panels of 32 and 9
      {{3, 20, 9, 11}, {67, 20, 1, 1}},   // batch 3, 99 positions
      {{1, 17, 7, 9}, {130, 17, 1, 1}},   // 17 channels: the last group of k ragged
      {{3, 64, 7, 9}, {96, 64, 1, 1}},    // deeper k
  };
  uint64_t seed = 1300;
  bool whole = false;
  for (auto& c : convs) {
    for (bool constant : {false, true}) {
      Shape sx(c.x.begin(), c.x.end()), sw(c.w.begin(), c.w.end());
      HostTensor wv = full_range(DType::I8, c.w, seed + 1);
      Tensor w = constant ? from_host(wv) : input("w", sw, DType::I8);
      Graph g = Graph::from_outputs({{"y", conv2d_integer(input("x", sx, DType::U8), w, Conv2dOptions{}, 0).node()}});
      Program p = build_program(g);
      whole = whole || test::loop_ir_of(p).find("whole panel, a group of k") != std::string::npos;
      TensorMap in{{"x", full_range(DType::U8, c.x, seed)}};
      if (!constant) in.emplace("w", wv);
      batch.add("conv1x1 " + std::to_string(seed) + (constant ? " const w" : ""), g, in);
    }
    seed += 2;
  }
  const char* e = std::getenv("LATHE_INT8_WHOLE_PANELS");
  if (!(e && std::string(e) == "0")) {
    EXPECT_TRUE(whole);
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
