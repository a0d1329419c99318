// conv_window_test.cpp — a stride-1 convolution's interior panels read in place by the
// micro-kernel (lower_matmul_pack.cpp: window_in_place): a panel of NR positions in one row of
// the map whose window is inside the padding for every tap is not packed; border panels
// (a row's ends, the top and bottom rows, panels across two rows, a ragged last one) are.
// Elsewhere (more rows of A, strided windows, rows that alias in L1) an interior panel is
// packed by one unguarded copy per k. Which layers take which, and every shape against
// the interpreter.
#include <array>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

using Case = test::ConvCase;  // (weights inputs here: constant stays false)
using test::label;

Tensor conv_of(const Case& t, const std::string& tag = "") {
  return test::conv_on(input("x" + tag, {t.n, t.c, t.h, t.w}), t, "w" + tag);
}
Graph graph_of(const Case& t) { return Graph::from_outputs({{"y", conv_of(t).node()}}); }

bool has(const Case& t, const std::string& what) {
  return test::loop_ir_of(build_program(graph_of(t))).find(what) != std::string::npos;
}
bool in_place(const Case& t) { return has(t, "B interior in place"); }
bool copied_whole(const Case& t) { return has(t, "B interior copied whole"); }

// (>= 9 input channels: fewer take the direct nest, no GEMM)
TEST(ConvWindow, StrideOneRowsOfNRAreReadInPlace) {
  if (const char* e = std::getenv("LATHE_CONV_IN_PLACE"); e && std::string(e) != "1") GTEST_SKIP() << "LATHE_CONV_IN_PLACE set";
  // (the widths relative to NR are AVX2's 16: q = NR / 16 scales those that must be shorter
  // or longer than NR, x2 under AVX-512's 32)
  const int64_t nr = loop::host_matmul_params().nr, q = nr / 16;
  if (nr % 16 != 0) GTEST_SKIP() << "the row widths are for NR a multiple of 16";
  EXPECT_TRUE(in_place({1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}}));    // ResNet-50's first stage
  EXPECT_TRUE(in_place({2, 13, 37, 53, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}}));     // prime sizes, M below MR
  EXPECT_TRUE(in_place({1, 12, 20, 40, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}}));     // dilation 2
  EXPECT_TRUE(in_place({2, 18, 20, 37, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2}));  // groups 2
  EXPECT_FALSE(in_place({1, 32, 29, 29, 16, 3, 3, {2, 2}, {1, 1}, {1, 1}}));   // stride 2: no consecutive run
  EXPECT_FALSE(in_place({1, 37, 14 * q, 14 * q, 41, 3, 3, {1, 1}, {1, 1}, {1, 1}}));   // rows shorter than NR
  EXPECT_FALSE(in_place({1, 128, 28 * q, 28 * q, 128, 3, 3, {1, 1}, {1, 1}, {1, 1}}));  // over 64 rows of A
  EXPECT_TRUE(copied_whole({1, 128, 28 * q, 28 * q, 128, 3, 3, {1, 1}, {1, 1}, {1, 1}}));  // (its interior panels: one copy)
  // a channel stride that is a multiple of 4 KiB (64 x 64, 128 x 128 maps): the rows of
  // consecutive channels share an L1 set; packed
  EXPECT_FALSE(in_place({1, 32, 64, 64, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}}));
  EXPECT_FALSE(in_place({1, 16, 128, 128, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}}));
  EXPECT_TRUE(copied_whole({1, 16, 128, 128, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}}));
  EXPECT_TRUE(copied_whole({1, 32, 61 * q, 61 * q, 16, 3, 3, {2, 2}, {1, 1}, {1, 1}}));  // stride 2, rows of 31 (61 at q=2)
}

TEST(ConvWindow, InPlacePanelsMatchInterpreter) {
  test::DiffBatch batch;
  for (const Case& t : std::vector<Case>{
           {1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}},      // K = 576 over KC: partial sums
           {2, 13, 37, 53, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}},       // prime sizes, odd channels
           {1, 12, 20, 40, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}},       // dilation 2
           {2, 18, 20, 37, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},   // groups 2
           {1, 11, 9, 47, 17, 5, 3, {1, 1}, {2, 1}, {1, 1}},       // 5x3 window
           {1, 11, 19, 33, 6, 3, 3, {1, 1}, {0, 0}, {1, 1}},       // no padding
           {1, 10, 23, 41, 13, 3, 3, {1, 1}, {2, 0}, {1, 1}},      // pads other than the window's half
           {1, 9, 1, 50, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}},         // one row: no interior panel
           {64, 9, 6, 20, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}},        // batch 64
           {3, 131, 11, 24, 67, 3, 3, {1, 1}, {1, 1}, {1, 1}},     // prime channels, K over KC
           {1, 16, 64, 64, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}},      // aliasing rows: interior copied whole
           {2, 19, 61, 67, 11, 3, 3, {2, 2}, {1, 1}, {1, 1}},      // stride 2: copied whole
           {1, 70, 28, 28, 71, 3, 3, {1, 1}, {1, 1}, {1, 1}},      // over 64 rows of A: copied whole
       })
    batch.add(label(t), graph_of(t), 7, t.c * t.r * t.s > 500 ? 4 : 1);  // long f32 sums (as packed)
  // an epilogue (bias, residual, relu) and a 1-D convolution with long rows
  Case t{2, 15, 18, 45, 22, 3, 3, {1, 1}, {1, 1}, {1, 1}};
  Tensor b = input("b", {t.k}), res = input("res", {t.n, t.k, t.h, t.w});
  batch.add("bias + residual + relu", Graph::from_outputs({{"y", relu(conv_of(t) + reshape(b, {1, t.k, 1, 1}) + res).node()}}));
  Tensor x1 = input("x1", {3, 10, 97}), w1 = input("w1", {12, 10, 3});
  batch.add("conv1d long rows", Graph::from_outputs({{"y", conv1d(x1, w1, std::nullopt, 1, 1).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
