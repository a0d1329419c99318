// pack_per_panel_test.cpp — LATHE_MATMUL_PACK_PER_PANEL=1 (lower_matmul.cpp, opt-in): where
// one MC block holds every row of a job, B's panels (a convolution's implicit im2col, its
// window's border panels, a matmul's B) are packed one by one inside the loop over the NR
// panels, just before the micro-kernels that read them, instead of the whole NC block up
// front. Which kernels take it, and convolutions and matmuls of odd shapes against the
// interpreter on the backend under test (constant weights, prepacked, and inputs alike).
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

using Case = test::ConvCase;
using test::label;

Tensor conv_of(const Case& t) { return test::conv_on(input("x", {t.n, t.c, t.h, t.w}), t); }
Graph graph_of(const Case& t) { return Graph::from_outputs({{"y", conv_of(t).node()}}); }

// the up-front pack's loop over the block's panels (absent when packed per panel)
bool packs_up_front(const Graph& g) {
  return test::loop_ir_of(build_program(g)).find("pack B: NR-wide panels, by runs") != std::string::npos;
}

bool enable() {
  // the switch is read once per process (ctest runs each test alone)
  setenv("LATHE_MATMUL_PACK_PER_PANEL", "1", 1);
  return !packs_up_front(graph_of({1, 16, 20, 40, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}}));
}

TEST(PackPerPanel, OnlyWhereOneMcBlockHoldsTheRows) {
  if (!enable()) GTEST_SKIP() << "the switch was read before this test";
  // few output channels: packed per panel (a window copied whole, a stride-2 one, a stem)
  EXPECT_FALSE(packs_up_front(graph_of({1, 16, 128, 128, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}})));
  EXPECT_FALSE(packs_up_front(graph_of({1, 32, 61, 61, 16, 3, 3, {2, 2}, {1, 1}, {1, 1}})));
  EXPECT_FALSE(packs_up_front(graph_of({1, 3, 45, 45, 64, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true})));
  // more rows than an MC block (several blocks of A reuse the packed block): up front
  if (loop::host_matmul_params().mc < 300)
    EXPECT_TRUE(packs_up_front(graph_of({1, 16, 40, 40, 300, 3, 3, {1, 1}, {1, 1}, {1, 1}})));
}

TEST(PackPerPanel, MatchesInterpreter) {
  if (!enable()) GTEST_SKIP() << "the switch was read before this test";
  test::DiffBatch batch;
  for (const Case& t : std::vector<Case>{
           {1, 64, 56, 56, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}},           // interior in place, border packed per panel
           {1, 16, 64, 64, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}},           // aliasing rows: interior copied whole
           {4, 13, 17, 29, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}},            // batch 4, odd channels, prime sizes
           {1, 3, 57, 57, 64, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},   // a stem: 3 channels, 7x7 stride 2, prepacked A
           {2, 19, 31, 37, 11, 3, 3, {2, 2}, {1, 1}, {1, 1}},           // stride 2
           {1, 12, 20, 40, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}},            // dilation 2
           {1, 10, 23, 41, 13, 3, 3, {1, 1}, {2, 0}, {1, 1}},           // padding other than the window's half
           {2, 18, 20, 37, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},        // groups 2
           {1, 131, 14, 14, 29, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}, // K over KC, rows shorter than NR
           {1, 9, 1, 1, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}},              // 1x1 map
           {3, 37, 9, 11, 23, 1, 1, {2, 2}, {0, 0}, {1, 1}},            // 1x1 stride 2
           {1, 16, 40, 40, 300, 3, 3, {1, 1}, {1, 1}, {1, 1}},          // several MC blocks: up front
       })
    batch.add(label(t), graph_of(t), 7, t.c * t.r * t.s / t.groups > 500 ? 4 : 1);
  // an epilogue (bias, residual, relu) and a plain matmul with a ragged last panel
  Case t{2, 15, 18, 45, 22, 3, 3, {1, 1}, {1, 1}, {1, 1}};
  Tensor b = input("b", {t.k}), res = input("res", {t.n, t.k, t.h, t.w});
  batch.add("bias + residual + relu", Graph::from_outputs({{"y", relu(conv_of(t) + reshape(b, {1, t.k, 1, 1}) + res).node()}}));
  Tensor a = input("a", {41, 301}), m = input("m", {301, 77});
  batch.add("matmul 41x301x77", Graph::from_outputs({{"y", matmul(a, m).node()}}));
  EXPECT_EQ(batch.run(), 0);
  unsetenv("LATHE_MATMUL_PACK_PER_PANEL");
}

}  // namespace
}  // namespace lathe
