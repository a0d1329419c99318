// kblock_test.cpp — the K blocks of the packed matmul (MatmulParams::kc_max, matmul_blocking):
// K in the fewest equal blocks of at most kc_max, and GEMMs and convolutions lowered with
// blocks over KC (LATHE_MATMUL_KC_MAX=320: a 3x3 convolution's 576 as 2 x 288) against the
// interpreter on the backend under test, constant weights (prepacked) and inputs alike.
#include <cmath>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

TEST(KBlocks, FewestEqualBlocksOfAtMostKcMax) {
  loop::MatmulParams p;
  p.kc = 256;
  auto kc = [&](int64_t k) { return loop::matmul_blocking(64, 3136, k, 1, 2, p).kc; };
  EXPECT_EQ(p.kc_max, 0);  // the default: blocks of at most kc
  EXPECT_EQ(kc(576), 192);
  EXPECT_EQ(kc(2304), 256);
  EXPECT_EQ(kc(1152), 232);
  EXPECT_EQ(kc(147), 152);
  EXPECT_EQ(kc(64), 64);
  p.kc_max = 320;  // one block fewer where K is just over a multiple of 256
  EXPECT_EQ(kc(576), 288);
  EXPECT_EQ(kc(2304), 288);
  EXPECT_EQ(kc(1152), 288);
  EXPECT_EQ(kc(4608), 312);
  EXPECT_EQ(kc(257), 264);
  EXPECT_EQ(kc(147), 152);
  EXPECT_EQ(kc(3072), 312);
  EXPECT_EQ(kc(768), 256);
  for (int64_t k = 1; k < 5000; k += 37) {  // multiples of 8, within the cap, covering K in the fewest blocks
    int64_t b = kc(k), blocks = (k + b - 1) / b;
    EXPECT_TRUE(b % 8 == 0 && b <= 320 && blocks == (k + 319) / 320) << "K " << k << " kc " << b;
  }
  EXPECT_EQ(loop::matmul_blocking(-1, -1, -1, -1, 2, p).kc, p.kc);  // symbolic K: kc
}

TEST(KBlocks, BlocksOverKcMatchInterpreter) {
  // the host's parameters are read once per process (ctest runs each test alone)
  setenv("LATHE_MATMUL_KC_MAX", "320", 1);
  if (loop::host_matmul_params().kc_max != 320) GTEST_SKIP() << "host matmul parameters were read before this test";
  test::ScopedEnv gemm_stems("LATHE_STEM_DIRECT", "0");  // (the 7x7 stem as a GEMM: its K blocks are under test)
  struct Case { int64_t n, c, h, w, k, r, stride; bool constant; int64_t kc; };
  test::DiffBatch batch;
  for (Case t : {Case{1, 64, 13, 13, 37, 3, 1, true, 288},     // 576 = 2 x 288, prime spatial size
                 Case{3, 67, 11, 11, 29, 3, 2, false, 304},    // 603: 2 x 304 (ragged last block), batch 3, stride 2
                 Case{1, 256, 7, 7, 131, 3, 1, true, 288},     // 2304 = 8 x 288, a late layer (sides swapped)
                 Case{1, 37, 17, 19, 64, 3, 1, true, 168},     // 333 = 2 x 168
                 Case{1, 3, 29, 31, 16, 7, 2, false, 152}}) {  // a 7x7 stride-2 stem: one block
    Conv2dOptions o;
    o.padding = {t.r / 2, t.r / 2};
    o.stride = {t.stride, t.stride};
    Tensor x = input("x", {t.n, t.c, t.h, t.w});
    Tensor w = t.constant ? from_host(test::sin_weights({t.k, t.c, t.r, t.r}, static_cast<double>(t.k), 0.37)) : input("w", {t.k, t.c, t.r, t.r});
    Graph g = Graph::from_outputs({{"y", relu(conv2d(x, w, from_host(test::sin_weights({t.k}, 3, 0.37)), o)).node()}});
    std::string what = "conv n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + "x" +
                       std::to_string(t.w) + " k" + std::to_string(t.k) + " " + std::to_string(t.r) + "x" +
                       std::to_string(t.r) + " stride " + std::to_string(t.stride);
    std::string ir = test::loop_ir_of(build_program(g));
    EXPECT_NE(ir.find("KC=" + std::to_string(t.kc) + " "), std::string::npos) << what << "\n" << ir;
    batch.add(what, g, 7, 8);  // sums of 147-2304 products of both signs (cancellation: 8x the tolerance)
  }
  Tensor a = input("a", {2, 41, 3072}), b = input("b", {3072, 29});  // 3072 = 10 x 308 -> 312 (ragged last)
  batch.add("matmul 2x41x3072x29", Graph::from_outputs({{"y", matmul(a, b).node()}}), 7, 8);
  EXPECT_EQ(batch.run(), 0);
  unsetenv("LATHE_MATMUL_KC_MAX");
}

}  // namespace
}  // namespace lathe
