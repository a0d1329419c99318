// conv_shapes_test.cpp — convolutions lowered to the packed GEMM (lower_matmul*.cpp) across
// the shapes the heuristics branch on, against the interpreter on the backend under test:
// odd and prime channel counts, stride 1 and 2, dilation, asymmetric padding, groups, batch
// 1 and 4, 1x1 / 3x3 / 7x7 windows, maps from 1x1 to 57x57, constant (prepacked) and input
// weights, a convolution over a concatenation, large-K layers whose per-run B block is cut to fit L2. And where the micro-kernel prefetches the
// next B panel (lower_matmul_micro.cpp, prefetch_next_b; a `prefetch.r` statement): a layer whose sides are swapped
// (few positions: its prepacked weights are the B side) and one whose B is packed once
// for all the jobs.
#include <cstdlib>
#include <string>
#include <thread>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

using Case = test::ConvCase;
using test::conv_on;
using test::label;
using test::sin_weights;

Graph graph_of(const Case& t) {
  Tensor x = input("x", {t.n, t.c, t.h, t.w});
  return Graph::from_outputs({{"y", relu(conv_on(x, t)).node()}});
}

bool prefetches_b(const Graph& g) {
  return test::loop_ir_of(build_program(g)).find("prefetch.r ") != std::string::npos;
}

TEST(ConvShapes, PrefetchNextBWhereBComesFromMemory) {
  // 7 x 7 positions into 96 channels: the sides swap, the constant weights are B, prepacked
  const Case swapped{1, 64, 7, 7, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  const std::string ir = test::loop_ir_of(build_program(graph_of(swapped)));
  EXPECT_NE(ir.find("B prepacked"), std::string::npos);
  EXPECT_NE(ir.find("prefetch.r "), std::string::npos);
  // spread over the panel's ten MR-5 micro-kernels (49 rows): kernel ir, depth kk takes line
  // (ir KC + kk) L / 10 of the next panel (L = NR / 16 lines a depth), clamped to its last
  // (LATHE_MATMUL_PREFETCH_B_SPREAD=0: kk; =conv: one line a depth, as on AVX2)
  const char* mode = std::getenv("LATHE_MATMUL_PREFETCH_B");
  const bool old_rule = mode && (std::string(mode) == "conv" || std::string(mode) == "all");
  if (ir.find("MR=5 NR=16 ") != std::string::npos) EXPECT_NE(ir.find(" + kk) / 10) < "), std::string::npos) << ir.substr(0, 4000);
  const std::string r50 = test::loop_ir_of(build_program(graph_of({1, 512, 7, 7, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  if (r50.find("MR=5 NR=16 KC=256") != std::string::npos)
    EXPECT_NE(r50.find("((((ir*256) + kk) / 10) < 255)"), std::string::npos) << r50.substr(0, 4000);
  // AVX-512 (NR 32, two lines a depth) on 7 MR-8 panels: line (ir KC + kk) 2 / 7 of 2 KC
  if (r50.find("MR=8 NR=32 KC=192") != std::string::npos && !old_rule)
    EXPECT_NE(r50.find("((((((ir*192) + kk)*2) / 7) < 383)"), std::string::npos) << r50.substr(0, 4000);
  // a 1 x 1 layer (one tap) spreads too (it kept the one-kernel burst before: =conv)
  const std::string one = test::loop_ir_of(build_program(graph_of({1, 512, 7, 7, 160, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true})));
  if (one.find("MR=5 NR=16 ") != std::string::npos)
    EXPECT_EQ(one.find(" + kk) / 10) < ") != std::string::npos, !old_rule) << one.substr(0, 4000);
  // 14 x 14 positions into 256 channels: M split over the jobs, B packed once for them into a
  // local array (from L3; measured 0.994x, within noise: no prefetch there)
  const Case shared{1, 64, 14, 14, 256, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  const std::string ir2 = test::loop_ir_of(build_program(graph_of(shared)));
  if (ir2.find("B packed once") != std::string::npos) EXPECT_EQ(ir2.find("prefetch.r "), std::string::npos);
  // a plain matmul with prepacked weights prefetches too (prefetch_b_test.cpp; it kept its
  // loop as it was with LATHE_MATMUL_PREFETCH_B=conv)
  Tensor a = input("a", {41, 301}), m = from_host(sin_weights({301, 77}, 1.0, 0.37));
  Graph plain = Graph::from_outputs({{"y", matmul(a, m).node()}});
  if (test::loop_ir_of(build_program(plain)).find("B prepacked") != std::string::npos && !(mode && (std::string(mode) == "conv" || std::string(mode) == "0")))
    EXPECT_TRUE(prefetches_b(plain));
}

// A strided window's interior panels are copied by one loop marked strided(S) (the llvm
// backend copies it as deinterleaved whole vectors: its vectorizer ran half of a stride-2
// copy of 16 scalar); stride-1 windows and the border runs are not marked.
TEST(ConvShapes, StridedInteriorCopyIsMarked) {
  test::ScopedEnv gemm_stems("LATHE_STEM_DIRECT", "0");  // (the 7x7 stems as GEMMs: their pack is under test)
  const char* e = std::getenv("LATHE_PACK_STRIDED");
  const bool on = e ? std::string(e) == "1" : loop::host_matmul_params().lanes >= 16;  // the default: 16-lane hosts
  if (!on) GTEST_SKIP() << "LATHE_PACK_STRIDED=1 marks them (the default on 16-lane hosts)";
  const std::string stem = test::loop_ir_of(build_program(graph_of({1, 3, 67, 131, 17, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true})));
  if (stem.find("interior copied whole") != std::string::npos)
    EXPECT_NE(stem.find("strided(2) for"), std::string::npos) << stem.substr(0, 4000);
  const std::string s3 = test::loop_ir_of(build_program(graph_of({3, 5, 61, 67, 11, 5, 5, {3, 3}, {2, 2}, {1, 1}, 1, true})));
  if (s3.find("interior copied whole") != std::string::npos) EXPECT_NE(s3.find("strided(3) for"), std::string::npos);
  const std::string one = test::loop_ir_of(build_program(graph_of({1, 16, 40, 40, 128, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  EXPECT_EQ(one.find("strided("), std::string::npos);
}

// Large-K convolutions whose input is packed on every run (B, the im2col) with few output
// channels: KC is cut so that the packed B block and the A block fit in 3/4 of L2
// (matmul_blocking, MatmulParams::b_block_bytes), in ragged K blocks where K is odd.
TEST(ConvShapes, PerRunPackedBBlockFitsL2) {
  loop::MatmulParams p;
  p.mr = 6, p.nr = 16, p.lanes = 8, p.kc = 256, p.mc = 144, p.nc = 512;
  p.b_block_bytes = (512 << 10) * 3 / 4;
  // unet's 64 -> 32 3x3 at 128 x 128 (K 576): 3 blocks of 192 -> 4 of 144
  EXPECT_EQ(loop::matmul_blocking(32, 16384, 576, 1, 2, p).kc, 192);  // B constant: not cut
  EXPECT_EQ(loop::matmul_blocking(32, 16384, 576, 1, 2, p, false, 1, 4).kc, 144);
  for (int64_t m : {1, 29, 32, 64, 128, 131})
    for (int64_t k : {9, 64, 603, 1152, 2304, 4609})
      for (int threads : {1, 2, 3}) {
        const loop::MatmulBlocking b = loop::matmul_blocking(m, 12007, k, 1, threads, p, false, 1, 4);
        EXPECT_TRUE(b.kc % 8 == 0 && b.kc >= std::min<int64_t>(64, (k + 7) / 8 * 8)) << m << " " << k << " kc " << b.kc;
        if (b.kc > 64) {
          EXPECT_LE((std::min<int64_t>(b.nc, 12007 + 15) + b.mc) * b.kc * 4, p.b_block_bytes + (b.nc + b.mc) * 32)
              << m << " " << k << " " << threads;
        }
      }
  p.b_block_bytes = 0;  // none (LATHE_MATMUL_B_BLOCK=0)
  EXPECT_EQ(loop::matmul_blocking(32, 16384, 576, 1, 2, p, false, 1, 4).kc, 192);
  // which layers it takes (the host's blocks: a 512 KiB L2 gives the cut above): a 128 x 128
  // map's window copied whole into its block; not one read in place (a 56 x 56 map into 64
  // channels), nor prepacked weights on the B side (few positions: swapped)
  const loop::HostCaches c = loop::host_caches();
  if (c.l2 != (512 << 10) || c.l1d != (32 << 10) || loop::host_matmul_params().nr != 16)
    GTEST_SKIP() << "the layer checks assume the 32 KiB / 512 KiB AVX2 host";
  const std::string unet = test::loop_ir_of(build_program(graph_of({1, 64, 128, 128, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  EXPECT_NE(unet.find("KC=144 MC=36 NC=512"), std::string::npos) << unet.substr(0, 600);
  EXPECT_NE(unet.find("copied whole"), std::string::npos);
  const std::string r50 = test::loop_ir_of(build_program(graph_of({1, 64, 56, 56, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  EXPECT_NE(r50.find("KC=192"), std::string::npos) << r50.substr(0, 600);
  const std::string swapped = test::loop_ir_of(build_program(graph_of({1, 512, 7, 7, 512, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true})));
  EXPECT_NE(swapped.find("KC=256"), std::string::npos) << swapped.substr(0, 600);
}

// LATHE_MATMUL_CONV_TILE=1: a convolution's contraction takes the wide tile (conv_matmul_params:
// 8 x 48 where the host's default is 8 x 32 on 32 registers), a plain matmul and a tile set by
// hand keep theirs, and the wide tile's blocks nest; then ResNet-shaped 1x1 layers (odd
// channels, 14 x 14, 7 x 7 and odd maps, stride 2, batch 1 and 3, constant weights prepacked
// on either side) and a stride-2 3x3 against the interpreter, on whatever tile the host takes.
TEST(ConvShapes, WideConvTile) {
  setenv("LATHE_MATMUL_CONV_TILE", "1", 1);
  Tensor a = input("a", {41, 301}), m = from_host(sin_weights({301, 77}, 1.0, 0.37));
  const Graph plain = Graph::from_outputs({{"y", matmul(a, m).node()}});
  const Graph one = graph_of({1, 64, 14, 14, 96, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true});
  auto match_of = [](const Graph& g) {
    NodeRef r;
    for (NodeRef n : g.toposort())
      if (n->op == Op::Reduce) r = n;
    return match_matmul(r);
  };
  auto mp = match_of(plain), mc = match_of(one);
  ASSERT_TRUE(mp && mc);
  loop::MatmulParams host = loop::host_matmul_params();
  const loop::MatmulParams hp = loop::conv_matmul_params(*mp, host), hc = loop::conv_matmul_params(*mc, host);
  EXPECT_EQ(hp.nr, host.nr);  // a plain matmul keeps the host's tile
  loop::MatmulParams by_hand = host;
  by_hand.wide_conv = false;
  EXPECT_EQ(loop::conv_matmul_params(*mc, by_hand).nr, host.nr);  // a tile set by hand stays
  if (host.wide_conv && host.nr == 32 && host.lanes == 16) {
    EXPECT_EQ(hc.nr, 48);
    EXPECT_EQ(hc.mr, host.mr);
    EXPECT_TRUE(hc.nc % hc.nr == 0 && hc.mc % hc.mr == 0 && hc.kc % 8 == 0) << hc.nc << " " << hc.mc << " " << hc.kc;
    const std::string ir = test::loop_ir_of(build_program(one));
    EXPECT_NE(ir.find("NR=48"), std::string::npos) << ir.substr(0, 600);
    EXPECT_NE(ir.find("A prepacked"), std::string::npos) << ir.substr(0, 600);  // the build packed for the same blocks
    const std::string swapped = test::loop_ir_of(build_program(graph_of({1, 512, 7, 7, 160, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true})));
    EXPECT_NE(swapped.find("NR=48"), std::string::npos) << swapped.substr(0, 600);
    EXPECT_NE(swapped.find("B prepacked"), std::string::npos) << swapped.substr(0, 600);
  } else {
    EXPECT_EQ(hc.nr, host.nr);
  }
  test::DiffBatch batch;
  for (const Case& t : std::vector<Case>{
           {1, 67, 14, 14, 259, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   // 14 x 14, odd channels: 196 = 4 x 48 + 4
           {3, 257, 14, 14, 61, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   // batch 3, K over KC, few channels
           {1, 263, 7, 7, 517, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},    // 7 x 7: swapped, weights on B
           {3, 131, 7, 7, 97, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},     // batch 3, 7 x 7
           {1, 61, 29, 31, 131, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   // an odd map: 899 positions
           {3, 37, 23, 29, 53, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},    // stride 2, batch 3: 12 x 15
           {1, 64, 56, 56, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},    // 56 x 56: 3136 = 65 x 48 + 16
           {1, 45, 15, 15, 50, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},    // a stride-2 3x3 to 8 x 8
       })
    batch.add(label(t), graph_of(t), 7, t.c * t.r * t.s / t.groups > 500 ? 4 : 1);
  EXPECT_EQ(batch.run(), 0);
  // off (the default): every kernel keeps the host's tile
  setenv("LATHE_MATMUL_CONV_TILE", "0", 1);
  EXPECT_EQ(loop::conv_matmul_params(*mc, host).nr, host.nr);
  unsetenv("LATHE_MATMUL_CONV_TILE");
}

// The K block of a convolution's (or a batched constant's) contraction is the host's rounded
// down to a power of two where K is over it (conv_matmul_params; the AVX-512 host's 192 ->
// 128); a plain matmul, a K within one block and LATHE_MATMUL_KC_POW2=0 keep it. Then layers
// whose K crosses the blocks (1x1 at 14 x 14 and 7 x 7, a stride-2 3x3, batch 1 and 3, odd
// sizes, Winograd-like batched constant weights) against the interpreter.
TEST(ConvShapes, PowerOfTwoKBlock) {
  auto match_of = [](const Graph& g) {
    NodeRef r;
    for (NodeRef n : g.toposort())
      if (n->op == Op::Reduce) r = n;
    return match_matmul(r);
  };
  Tensor a = input("a", {41, 1031}), m = from_host(sin_weights({1031, 77}, 1.0, 0.37));
  const Graph plain = Graph::from_outputs({{"y", matmul(a, m).node()}});
  const Graph wide_k = graph_of({1, 1031, 14, 14, 61, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true});
  const Graph small_k = graph_of({1, 3, 23, 23, 13, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true});  // K 147
  Tensor bx = input("bx", {16, 37, 521}), bw = from_host(sin_weights({16, 521, 29}, 2.0, 0.37));
  const Graph batched = Graph::from_outputs({{"y", matmul(bx, bw).node()}});
  auto mp = match_of(plain), mw = match_of(wide_k), ms = match_of(small_k), mb = match_of(batched);
  ASSERT_TRUE(mp && mw && ms && mb);
  loop::MatmulParams host = loop::host_matmul_params();
  host.kc = 192, host.host_kc = true;
  EXPECT_EQ(loop::conv_matmul_params(*mw, host).kc, 128);
  EXPECT_EQ(loop::conv_matmul_params(*mb, host).kc, 128);
  EXPECT_EQ(loop::conv_matmul_params(*mp, host).kc, 192);  // a plain linear layer
  EXPECT_EQ(loop::conv_matmul_params(*ms, host).kc, 192);  // K 147: one block either way
  loop::MatmulParams by_hand = host;
  by_hand.host_kc = false;
  EXPECT_EQ(loop::conv_matmul_params(*mw, by_hand).kc, 192);
  setenv("LATHE_MATMUL_KC_POW2", "0", 1);
  EXPECT_EQ(loop::conv_matmul_params(*mw, host).kc, 192);
  unsetenv("LATHE_MATMUL_KC_POW2");
  test::DiffBatch batch;
  for (const Case& t : std::vector<Case>{
           {1, 521, 14, 14, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   // K 521: 5 blocks (was 3)
           {3, 1031, 7, 7, 53, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},    // batch 3, 7 x 7: swapped
           {1, 61, 15, 15, 37, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},    // a stride-2 3x3, K 549
           {3, 263, 11, 13, 41, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   // batch 3, an odd map
       })
    batch.add(label(t), graph_of(t), 7, t.c * t.r * t.s / t.groups > 500 ? 4 : 1);
  batch.add("batched constant 16 x 37x521 . 521x29", batched, 7, 4);
  EXPECT_EQ(batch.run(), 0);
}

// Strided windows' border runs (LATHE_PACK_MASKED_RUNS: the default on 16-lane hosts;
// llvm.masked_strided_runs runs this file with =1, so the marking on any host; the backend
// copies them by masked chunks on AVX-512 hosts): marked strided(S <= NR); runs of every length up to NR
// (maps of 9, 13, 15: rows shorter than a panel, ragged panels), strides 2, 3 and 4, odd
// channels, batch 1 and 3, input and constant weights, against the interpreter (either way).
TEST(ConvShapes, MaskedStridedRunsMatchInterpreter) {
  test::ScopedEnv gemm_stems("LATHE_STEM_DIRECT", "0");  // (the 7x7 stems as GEMMs: their pack is under test)
  const char* e = std::getenv("LATHE_PACK_MASKED_RUNS");
  const bool on = e ? std::string(e) == "1" : loop::host_matmul_params().lanes >= 16;
  const std::vector<Case> cases{
      {1, 13, 17, 17, 11, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},   // 9 x 9 out
      {3, 7, 25, 25, 19, 3, 3, {2, 2}, {1, 1}, {1, 1}},             // batch 3, 13 x 13, input weights
      {1, 29, 29, 29, 37, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},   // 15 x 15
      {3, 5, 55, 57, 9, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},     // batch 3, 28 x 29: rows near NR
      {1, 3, 45, 47, 13, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},    // a stem's window, 23 x 24
      {1, 11, 40, 43, 7, 3, 3, {3, 3}, {1, 1}, {1, 1}},             // stride 3, 14 x 15
      {3, 9, 37, 41, 5, 4, 4, {4, 4}, {2, 2}, {1, 1}, 1, true},     // stride 4, batch 3, 10 x 11
  };
  test::DiffBatch batch;
  for (const Case& t : cases) batch.add(label(t), graph_of(t), 7);
  EXPECT_EQ(batch.run(), 0);
  const std::string ir = test::loop_ir_of(build_program(graph_of(cases[2])));
  if (on) {
    EXPECT_NE(ir.find("strided(2 <= "), std::string::npos) << ir.substr(0, 4000);
  } else {
    EXPECT_EQ(ir.find(" <= "), std::string::npos);
  }
  if (on) EXPECT_EQ(test::loop_ir_of(build_program(graph_of({1, 16, 20, 20, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}))).find("strided("),
                    std::string::npos);  // stride 1: not marked
}

// A strided window's panels packed tap by tap (pack_b_taps: the channels at one tap share
// their runs' bounds, computed once a tap), against the interpreter: stride 2 to odd maps
// (9 x 9, 13 x 13, 15 x 15, 28 x 28), odd and prime channel counts, a K over several K blocks
// (a block starts and ends mid-channel), a 3-channel 7 x 7 stem, batch 1 and 3, stride 3,
// dilation; by default, off (LATHE_PACK_TAPS=0) and for stride 1 too (all); and with a tap's
// runs copied in one loop over its channels (LATHE_PACK_TAPS_BY_RUN=0), not one loop a run.
TEST(ConvShapes, TapByTapPackMatchesInterpreter) {
  test::ScopedEnv gemm_stems("LATHE_STEM_DIRECT", "0");  // (the 7x7 stems as GEMMs: their pack is under test)
  const std::vector<Case> cases{
      {1, 13, 17, 17, 11, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},   // 9 x 9 out
      {3, 7, 25, 25, 19, 3, 3, {2, 2}, {1, 1}, {1, 1}},             // batch 3, 13 x 13, input weights
      {1, 29, 29, 29, 37, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},   // 15 x 15
      {1, 131, 56, 56, 17, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},  // 28 x 28, K 1179 in several blocks
      {3, 3, 45, 47, 13, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},    // a stem's window, batch 3, 23 x 24
      {1, 3, 67, 131, 17, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},   // a stem 34 x 66: interior and border panels
      {1, 11, 40, 43, 7, 3, 3, {3, 3}, {1, 1}, {1, 1}},             // stride 3, 14 x 15
      {1, 5, 37, 41, 9, 5, 5, {2, 2}, {2, 2}, {2, 2}, 1, true},     // stride 2, dilation 2
      {2, 9, 23, 19, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},    // stride 1: tap by tap only under `all`
  };
  auto taps_of = [](const Case& t) {
    return test::loop_ir_of(build_program(graph_of(t))).find("the window's taps") != std::string::npos;
  };
  for (const char* mode : {(const char*)nullptr, "0", "all", "by-channel"}) {
    const bool by_channel = mode && std::string(mode) == "by-channel";
    test::ScopedEnv env("LATHE_PACK_TAPS", by_channel ? nullptr : mode);
    test::ScopedEnv by_run("LATHE_PACK_TAPS_BY_RUN", by_channel ? "0" : nullptr);
    test::DiffBatch batch;
    for (const Case& t : cases) batch.add(label(t) + " LATHE_PACK_TAPS=" + (mode ? mode : ""), graph_of(t), 7);
    EXPECT_EQ(batch.run(), 0);
    const std::string ir = test::loop_ir_of(build_program(graph_of(cases[3])));
    if (!(mode && std::string(mode) == "0"))
      EXPECT_EQ(ir.find("a run of the channels at this tap") != std::string::npos, !by_channel) << (mode ? mode : "");
    if (by_channel) mode = nullptr;  // (the default's tap-by-tap checks below)
    const bool off = mode && std::string(mode) == "0", all = mode && std::string(mode) == "all";
    for (int i : {2, 3, 5}) EXPECT_EQ(taps_of(cases[i]), !off) << label(cases[i]) << (mode ? mode : "");
    EXPECT_EQ(taps_of(cases.back()), all) << (mode ? mode : "");
  }
}

// A window on the A side (orient_matmul swapped the sides: few positions, many channels)
// packed tap by tap (pack_a_taps: a panel's MR rows as at most 4 runs along the map's rows,
// each run a masked, strided copy per channel), and the jobs of such a layer split M, not N
// (LATHE_MATMUL_GATHER_SPLIT_M: every N block packed all of A), against the interpreter:
// strides 1, 2 and 3, dilation 2, odd maps (13 x 13, 14 x 15, 15 x 15) and maps narrower
// than MR (5 x 5: 3 runs a panel, 3 x 3: 4, 2 x 2), prime channel counts,
// K over several K blocks, constant (prepacked, M split) and input weights, batch 1, 2 and
// 3, strided 1x1 layers (no window: rows a stride apart); by default, with each switch off,
// and with the run's source read through the k table
// (LATHE_PACK_TAPS_STEP=0).
TEST(ConvShapes, SwappedWindowPackedTapByTapMatchesInterpreter) {
  const std::vector<Case> cases{
      {1, 67, 25, 25, 256, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true, true}, // 13 x 13, K 603: swapped
      {1, 131, 29, 29, 64, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},       // 15 x 15, K 1179
      {1, 59, 40, 43, 64, 3, 3, {3, 3}, {1, 1}, {1, 1}, 1, true},        // stride 3, 14 x 15
      {1, 61, 15, 15, 37, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},        // stride 1, 15 x 15, 37 channels
      {1, 37, 7, 7, 130, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},         // 7 x 7 (MR 7 or 8)
      {2, 19, 7, 7, 67, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},          // batch 2
      {1, 41, 9, 9, 96, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},          // 5 x 5: 3 runs a panel
      {1, 23, 6, 6, 100, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},         // 3 x 3: 4 runs
      {1, 13, 4, 4, 64, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},          // 2 x 2
      {1, 29, 11, 11, 96, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true},        // dilation 2
      {1, 53, 17, 17, 71, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, true}, // input weights, 9 x 9
      {3, 29, 13, 13, 97, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},        // batch 3, 7 x 7
      {1, 521, 27, 27, 64, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},       // 1x1 stride 2, 14 x 14: no window
      {1, 523, 13, 13, 97, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},       // 1x1 stride 2, 7 x 7
      {1, 517, 29, 29, 64, 1, 1, {3, 3}, {0, 0}, {1, 1}, 1, false},      // 1x1 stride 3, input weights
  };
  for (const char* off : {(const char*)nullptr, "LATHE_PACK_A_TAPS", "LATHE_MATMUL_GATHER_SPLIT_M", "LATHE_PACK_TAPS_STEP"}) {
    test::ScopedEnv env(off ? off : "LATHE_PACK_A_TAPS", off ? "0" : nullptr);
    test::DiffBatch batch;
    for (const Case& t : cases) batch.add(label(t) + (off ? std::string(" ") + off + "=0" : std::string()), graph_of(t), 7, 4);
    EXPECT_EQ(batch.run(), 0);  // (loosened: K up to 1179, as the other swapped layers' tests)
    if (loop::host_matmul_params().nr != 32) continue;  // (the sides swap on AVX-512's NR 32)
    const std::string ir = test::loop_ir_of(build_program(graph_of(cases[0])));
    const bool taps = !(off && std::string(off) == "LATHE_PACK_A_TAPS");
    EXPECT_EQ(ir.find("pack A: MR-tall panels, tap by tap") != std::string::npos, taps) << (off ? off : "");
    EXPECT_EQ(ir.find("strided(2 <= ") != std::string::npos, taps) << (off ? off : "");
    EXPECT_EQ(test::loop_ir_of(build_program(graph_of(cases[12]))).find("tap by tap") != std::string::npos, taps);
    const bool split = !(off && std::string(off) == "LATHE_MATMUL_GATHER_SPLIT_M");
    // (two threads: two N blocks of 128 channels, or two M ranges over all 256)
    if (std::thread::hardware_concurrency() == 2) {
      EXPECT_EQ(ir.find("msplit=2") != std::string::npos, split) << ir.substr(0, 600);
      EXPECT_EQ(ir.find("NC=256") != std::string::npos, split) << ir.substr(0, 600);
    }
  }
}

// Strided runs copied as masked chunks (llvm on AVX-512: try_strided_copy's var-trip copy,
// masks made as bit masks from the run's length, LATHE_PACK_MASK_BITS): strides 2, 3 and 4
// (a chunk's load mask of 32, 48 and 64 lanes), runs from 1 column (a panel's last) to a
// whole NR panel, runs cut by the padding at both ends, odd and prime maps, batch 1 and 3,
// 1 x 1 downsamples (no bounds) and a 3-channel stem, against the interpreter.
TEST(ConvShapes, StridedRunMasksMatchInterpreter) {
  test::ScopedEnv gemm_stems("LATHE_STEM_DIRECT", "0");  // (the 7x7 stems as GEMMs: their pack is under test)
  test::DiffBatch batch;
  for (const Case& t : std::vector<Case>{
           {1, 5, 45, 41, 9, 3, 3, {4, 4}, {1, 1}, {1, 1}, 1, true},     // stride 4: 64-lane load masks, 12 x 11
           {3, 7, 53, 59, 11, 5, 5, {4, 4}, {2, 2}, {1, 1}, 1, true},    // batch 3, stride 4, 5 x 5 window
           {1, 3, 61, 67, 13, 7, 7, {3, 3}, {3, 3}, {1, 1}, 1, true},    // a stride-3 stem, 21 x 23
           {1, 17, 33, 21, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},    // 11-wide rows: 4 runs a panel
           {2, 13, 35, 27, 5, 3, 3, {2, 2}, {0, 1}, {1, 1}, 1, true},    // batch 2, 17 x 14, pads 0 x 1
           {1, 23, 97, 97, 19, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},   // 49 x 49: rows longer than NR
           {3, 29, 27, 31, 31, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true},   // a 1 x 1 downsample, batch 3
           {1, 37, 43, 29, 41, 1, 1, {3, 3}, {0, 0}, {1, 1}, 1, true},   // 1 x 1, stride 3
       })
    batch.add(label(t), graph_of(t), 11);
  EXPECT_EQ(batch.run(), 0);
}

TEST(ConvShapes, MatchInterpreter) {
  test::DiffBatch batch;
  for (const Case& t : std::vector<Case>{
           {1, 3, 57, 57, 13, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},     // a stem: 3 channels, 7x7 stride 2
           {4, 7, 23, 19, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}},              // batch 4, odd channels, prime sizes
           {1, 64, 7, 7, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},      // few positions: swapped, B prepacked
           {1, 521, 5, 5, 71, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},     // swapped, 25 rows: prefetch spread over 5 kernels, K 4689
           {4, 263, 7, 7, 131, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},    // batch 4, swapped, prime channels, K 2367
           {1, 307, 11, 11, 41, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},   // stride 2 to 6 x 6: swapped, ragged K
           {1, 131, 7, 7, 83, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},     // swapped, K over KC, ragged panels
           {1, 257, 5, 5, 37, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},     // 1x1 over few positions
           {1, 96, 14, 14, 53, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},    // 14 x 14: rows shorter than NR
           {1, 61, 29, 29, 47, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},    // stride 2, constant weights
           {2, 13, 31, 37, 11, 3, 3, {2, 2}, {1, 1}, {1, 1}},             // stride 2, input weights
           {1, 12, 20, 40, 9, 3, 3, {1, 1}, {2, 2}, {2, 2}},              // dilation 2
           {1, 10, 23, 41, 13, 3, 3, {1, 1}, {2, 0}, {1, 1}},             // asymmetric-looking padding
           {2, 18, 20, 37, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},          // groups 2
           {1, 9, 1, 1, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},       // 1x1 map
           {3, 37, 9, 11, 23, 1, 1, {2, 2}, {0, 0}, {1, 1}},              // 1x1 stride 2
           {1, 29, 2, 3, 31, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},      // a 2x3 map
           {1, 67, 37, 41, 29, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},    // K 603 over few channels: KC cut, ragged
           {4, 131, 19, 23, 37, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   // batch 4, K 1179 cut in equal blocks
           {1, 64, 61, 59, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}},             // input weights, K 576
           {3, 5, 61, 67, 11, 5, 5, {3, 3}, {2, 2}, {1, 1}, 1, true},     // stride 3, batch 3: 21 x 23, strided interior copies
           {1, 7, 45, 47, 19, 3, 3, {2, 2}, {2, 2}, {2, 2}, 1, true},     // stride 2, dilation 2: 23 x 24
           {2, 3, 70, 75, 8, 4, 4, {4, 4}, {0, 0}, {1, 1}},               // stride 4, input weights: 17 x 18
           {1, 3, 67, 131, 17, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},    // a stem 34 x 66: two interior panels a row
       })
    batch.add(label(t), graph_of(t), 7, t.c * t.r * t.s / t.groups > 500 ? 4 : 1);
  // asymmetric padding (ONNX pads begin != end): the frontend pads the input first
  {
    Tensor x = input("x", {1, 11, 15, 16});
    Tensor xp = pad(x, {{0, 0}, {0, 0}, {1, 0}, {2, 1}});
    Case t{1, 11, 16, 19, 19, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, true};
    batch.add("asymmetric padding (1,2 / 0,1)", Graph::from_outputs({{"y", conv_on(xp, t).node()}}));
  }
  // a convolution over a concatenation (unet's skip connections), with bias and relu
  {
    Tensor a = input("a", {1, 24, 16, 16}), b = input("b", {1, 40, 16, 16}), bias = input("bias", {29});
    Case t{1, 64, 16, 16, 29, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
    Tensor y = relu(conv_on(concat({a, b}, 1), t) + reshape(bias, {1, 29, 1, 1}));
    batch.add("conv over concat 24+40 -> 29", Graph::from_outputs({{"y", y.node()}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
