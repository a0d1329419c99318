// cache_blocks_test.cpp — the packed matmul's KC and MC derived from the host's caches
// (blocks_for_caches, host_caches), and GEMMs lowered with small odd blocks (LATHE_MATMUL_KC,
// LATHE_MATMUL_MC: many K and M blocks, ragged last ones) against the interpreter on the
// backend under test: prime sizes, M = 1, batch 1 and 64, constant (prepacked) weights.
#include <cmath>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

TEST(CacheBlocks, DerivedFromTheCaches) {
  loop::MatmulParams avx2;  // the 6 x 16 AVX2 tile with its compiled-in blocks
  avx2.mr = 6, avx2.nr = 16, avx2.lanes = 8, avx2.mc = 144;
  loop::HostCaches zen3{32 << 10, 512 << 10, 32 << 20};
  loop::MatmulParams p = loop::blocks_for_caches(avx2, zen3);
  EXPECT_EQ(p.kc, 256);  // B micro-panel in half of 32 KiB: 16 KiB / (4 x 16)
  EXPECT_EQ(p.mc, 144);  // A block in 9/32 of 512 KiB: 144 KiB / (4 x 256)
  EXPECT_EQ(p.nc, avx2.nc);
  p = loop::blocks_for_caches(avx2, loop::HostCaches{32 << 10, 1 << 20, 32 << 20});  // a 1 MiB L2
  EXPECT_EQ(p.kc, 256);
  EXPECT_EQ(p.mc, 288);
  // unknown caches keep the compiled-in blocks
  p = loop::blocks_for_caches(avx2, loop::HostCaches{});
  EXPECT_EQ(p.kc, avx2.kc);
  EXPECT_EQ(p.mc, avx2.mc);
  // L2 unknown: MC stays
  p = loop::blocks_for_caches(avx2, loop::HostCaches{48 << 10, 0, 0});
  EXPECT_EQ(p.kc, 384);  // 24 KiB / (4 x 16)
  EXPECT_EQ(p.mc, 144);
  // the AVX-512 defaults (8 x 32, KC 256, MC 128): 48 KiB L1 gives KC 192; a 2 MiB L2
  // would give MC 768, kept within twice the compiled-in 128
  loop::MatmulParams avx512;
  p = loop::blocks_for_caches(avx512, loop::HostCaches{48 << 10, 2 << 20, 0});
  EXPECT_EQ(p.kc, 192);
  EXPECT_EQ(p.mc, 256);
  // a tiny or huge report stays within [1/2, 2] of the compiled-in blocks
  p = loop::blocks_for_caches(avx2, loop::HostCaches{4 << 10, 16 << 10, 0});
  EXPECT_EQ(p.kc, 128);
  EXPECT_EQ(p.mc, 72);
  p = loop::blocks_for_caches(avx2, loop::HostCaches{1 << 20, 64 << 20, 0});
  EXPECT_EQ(p.kc, 512);
  EXPECT_EQ(p.mc, 288);
  for (int64_t l1 : {16 << 10, 24 << 10, 32 << 10, 48 << 10, 64 << 10})
    for (int64_t l2 : {256 << 10, 512 << 10, 1 << 20, 1280 << 10, 2 << 20}) {
      for (const loop::MatmulParams& base : {avx2, avx512}) {
        p = loop::blocks_for_caches(base, loop::HostCaches{l1, l2, 0});
        EXPECT_TRUE(p.kc % 8 == 0 && p.kc >= base.kc / 2 && p.kc <= 2 * base.kc) << l1 << " " << l2 << " kc " << p.kc;
        EXPECT_TRUE(p.mc % p.mr == 0 && p.mc >= base.mc / 2 && p.mc <= 2 * base.mc) << l1 << " " << l2 << " mc " << p.mc;
      }
    }
}

TEST(CacheBlocks, HostBlocksNest) {
  const loop::HostCaches c = loop::host_caches();
  if (c.l1d == 0) GTEST_SKIP() << "no cache sizes in sysfs: the compiled-in blocks";
  EXPECT_GE(c.l2, c.l1d);
  const loop::MatmulParams p = loop::host_matmul_params();
  EXPECT_EQ(p.kc % 8, 0);
  EXPECT_EQ(p.mc % p.mr, 0);
  EXPECT_EQ(p.nc % p.nr, 0);
}

TEST(CacheBlocks, SmallOddBlocksMatchInterpreter) {
  // the host's parameters are read once per process (ctest runs each test alone)
  setenv("LATHE_MATMUL_KC", "40", 1);
  setenv("LATHE_MATMUL_MC", "17", 1);
  const loop::MatmulParams P = loop::host_matmul_params();
  if (P.kc != 40) GTEST_SKIP() << "host matmul parameters were read before this test";
  EXPECT_EQ(P.mc % P.mr, 0);
  test::DiffBatch batch;
  auto mm = [&](std::vector<int64_t> as, std::vector<int64_t> bs, bool constant) {
    auto shape = [](const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); };
    Tensor a = input("a", shape(as));
    Tensor b = constant ? from_host(test::sin_weights(bs, 1.5, 0.37)) : input("b", shape(bs));
    auto dims = [](const std::vector<int64_t>& v) {
      std::string s;
      for (int64_t d : v) s += (s.empty() ? "" : "x") + std::to_string(d);
      return s;
    };
    std::string what = "matmul " + dims(as) + " . " + dims(bs) + (constant ? " const" : "");
    batch.add(what, Graph::from_outputs({{"y", matmul(a, b).node()}}), 7, 8);
    return build_program(Graph::from_outputs({{"y", matmul(a, b).node()}}));
  };
  Program p37 = mm({37, 131}, {131, 53}, false);  // primes: 4 K blocks (131 = 4 x 33 -> 40), M in MC blocks
  std::string ir = test::loop_ir_of(p37);
  EXPECT_NE(ir.find("KC=40 "), std::string::npos) << ir;
  mm({1, 97}, {97, 29}, false);                    // M = 1
  mm({23, 100}, {100, 45}, true);                   // constant B: prepacked for the same KC
  mm({97, 389}, {389, 67}, true);                   // K 389: 10 blocks, M 97 in MC blocks
  mm({1, 31, 67}, {1, 67, 17}, false);              // batch 1
  mm({64, 7, 13}, {64, 13, 11}, false);             // batch 64
  mm({64, 19, 43}, {43, 5}, true);                  // batch 64 over a constant B
  Conv2dOptions o;  // a convolution's implicit im2col with constant weights: K = 7 x 3 x 3 = 63
  o.padding = {1, 1};
  Tensor x = input("x", {2, 7, 11, 13});
  Tensor w = from_host(test::sin_weights({19, 7, 3, 3}, 2.5, 0.37));
  batch.add("conv n2 c7 11x13 k19 3x3", Graph::from_outputs({{"y", relu(conv2d(x, w, from_host(test::sin_weights({19}, 3, 0.37)), o)).node()}}), 7, 8);
  EXPECT_EQ(batch.run(), 0);
  unsetenv("LATHE_MATMUL_KC");
  unsetenv("LATHE_MATMUL_MC");
}

}  // namespace
}  // namespace lathe
