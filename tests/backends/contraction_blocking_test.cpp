// contraction_blocking_test.cpp — the packed matmul's cache blocking and its jobs
// (Contraction suite, with contraction_test.cpp): block sizes that nest and split the jobs
// evenly, split_efficiency, odd job counts, jobs that share one packed operand, against the
// interpreter on the backend under test (llvm.odd_jobs_pool_threads reruns some on 1, 3, 7
// threads).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

using test::conv_graph;

// The split tests' form: on a 2-core host with none of `moved` set (the switches that move the
// blocking), `expect_split` reads the first case's loop IR (the split the blocking chose
// there); then every case against the interpreter on the backend under test.
void split_then_diff(const std::vector<const char*>& moved, const std::function<void(const std::string& ir)>& expect_split,
                     const std::vector<std::pair<std::string, Graph>>& cases) {
  if (std::thread::hardware_concurrency() == 2 &&
      std::none_of(moved.begin(), moved.end(), [](const char* e) { return std::getenv(e) != nullptr; }))
    expect_split(test::loop_ir_of(build_program(cases.at(0).second)));
  test::DiffBatch batch;
  for (const auto& c : cases) batch.add(c.first, c.second);
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

// The ragged last B panel (N % NR columns on fewer of the tile's vectors) weighs what its
// kernel runs: 196 positions on NR 32 are six whole panels and one of 4 columns at half a
// panel's cost, cut 3 + 3 + (the light one), not 4 + 3 (a thread waiting a quarter of the
// loop); ragged_q 0 keeps the old cut, and a last panel that takes all the vectors (17+
// columns of 32) or a whole one changes nothing.
TEST(Contraction, RaggedPanelWeighsItsVectors) {
  loop::MatmulParams p;
  p.mr = 8, p.nr = 32, p.lanes = 16, p.nc = 512;
  EXPECT_EQ(loop::matmul_blocking(96, 196, 576, 1, 2, p, false, 1, 0, 0).nc, 128);
  EXPECT_EQ(loop::matmul_blocking(96, 196, 576, 1, 2, p, false, 1, 0, 1).nc, 96);
  EXPECT_EQ(loop::matmul_blocking(96, 196, 576, 1, 2, p, false, 1, 0, 2).nc, 128);  // (all vectors: whole)
  EXPECT_EQ(loop::matmul_blocking(96, 209, 576, 1, 2, p, false, 1, 0, 2).nc,
            loop::matmul_blocking(96, 209, 576, 1, 2, p, false, 1, 0, 0).nc);  // 17 columns left: 2 vectors
  EXPECT_EQ(loop::matmul_blocking(96, 192, 576, 1, 2, p, false, 1, 0, 1).nc,
            loop::matmul_blocking(96, 192, 576, 1, 2, p, false, 1, 0, 0).nc);  // whole panels
  // the job split it gives is at least as even, in the kernel's units, on any thread count
  for (int threads : {1, 2, 3, 4, 7})
    for (int64_t n : {4, 36, 100, 169, 196, 340, 784, 3140})
      for (int64_t batch : {1, 3}) {
        const int64_t left = n % p.nr, q = left == 0 ? 0 : (left + p.lanes - 1) / p.lanes;
        auto cost = [&](const loop::MatmulBlocking& b) {  // in vectors x MR panels
          std::vector<int64_t> jobs;
          const int64_t panels = (n + p.nr - 1) / p.nr, per = b.nc / p.nr, mp = 12, mper = (mp + b.msplit - 1) / b.msplit;
          for (int64_t bi = 0; bi < batch; ++bi)
            for (int64_t j = 0; j * per < panels; ++j) {
              const bool last = (j + 1) * per >= panels;
              const int64_t c = std::min(per, panels - j * per) * 2 - (last && q == 1 ? 1 : 0);
              for (int64_t s = 0; s < b.msplit; ++s) jobs.push_back(c * std::clamp<int64_t>(mp - s * mper, 0, mper));
            }
          return loop::split_efficiency(jobs, threads);
        };
        auto now = loop::matmul_blocking(96, n, 200, batch, threads, p, false, 1, 0, static_cast<int>(q));
        auto old = loop::matmul_blocking(96, n, 200, batch, threads, p, false, 1, 0, 0);
        const std::string what = std::to_string(n) + " batch " + std::to_string(batch) + " on " + std::to_string(threads);
        ASSERT_TRUE(now.nc % p.nr == 0 && now.nc > 0 && now.nc <= p.nc) << what;
        EXPECT_GE(cost(now) + 1e-9, cost(old)) << what << ": nc " << now.nc << " vs " << old.nc;
      }
}

// 1x1 convolutions into more than 64 channels (B packed or read in place, the ragged-columns kernel) whose
// positions leave a light last panel (196, 169, 144 = 4, 9, 16 columns past whole panels),
// weights constant (A prepacked, as an ONNX model's), bias, batch 1 and 3, against the
// interpreter; on 2 threads the 14 x 14 layer's N blocks are 96 columns (3 + 3 + the light
// one). llvm.odd_jobs_pool_threads reruns it on 1, 3 and 7 pool threads.
TEST(Contraction, LightLastPanelSplitMatchesInterpreter) {
  split_then_diff(
      {"LATHE_MATMUL_TILE", "LATHE_MATMUL_RAGGED_WEIGH", "LATHE_MATMUL_NC", "LATHE_MATMUL_RAGGED_COLS_IN_PLACE"},
      [](const std::string& ir) { EXPECT_NE(ir.find("NC=96 "), std::string::npos) << ir; },
      {{"1x1 14x14 c97 k96, batch 1", conv_graph({1, 97, 14, 14, 96, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true})},
       {"1x1 14x14 c33 k101, batch 3", conv_graph({3, 33, 14, 14, 101, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true})},
       {"1x1 13x13 c17 k67, batch 3", conv_graph({3, 17, 13, 13, 67, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true})},
       {"1x1 12x12 c33 k65, batch 1", conv_graph({1, 33, 12, 12, 65, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, false})},
       {"1x1 14x14 c96 k577 + relu, batch 1", conv_graph({1, 96, 14, 14, 577, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true})}});
}

// Where M splits copy nothing (B packed at build), N blocks and M splits are cut together
// when N's whole panels alone share the threads unevenly: 160 columns (5 panels of 32) on 2
// threads, 3 + 2, become jobs that share them within a few percent; even splits stay as
// they are; across thread counts and odd sizes no split gets less even, and every one nests.
TEST(Contraction, MSplitsBalanceUnevenPanels) {
  loop::MatmulParams p;
  p.mr = 7, p.nr = 32, p.lanes = 16, p.nc = 512, p.mc = 49;
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
  loop::MatmulBlocking uneven;
  uneven.kc = 120, uneven.mc = 49, uneven.nc = 96, uneven.msplit = 1;
  auto b = loop::m_splits_for_balance(uneven, 49, 160, 1, 2, p);
  EXPECT_GT(b.msplit, 1);
  EXPECT_GT(loop::split_efficiency(jobs_of(b, 49, 160, 1), 2), 0.95);
  EXPECT_EQ(b.mc % p.mr, 0);
  loop::MatmulBlocking even = uneven;
  even.nc = 64;  // 4 panels of 128 columns: 2 + 2
  EXPECT_EQ(loop::m_splits_for_balance(even, 49, 128, 1, 2, p).msplit, 1);
  EXPECT_EQ(loop::m_splits_for_balance(uneven, 49, 160, 1, 1, p).msplit, 1);  // one thread
  for (int threads : {2, 3, 4, 7})
    for (int64_t m : {7, 13, 49, 98, 196})
      for (int64_t n : {17, 100, 160, 161, 320, 1000})
        for (int64_t batch : {1, 3}) {
          auto base = loop::matmul_blocking(m, n, 300, batch, threads, p);
          auto now = loop::m_splits_for_balance(base, m, n, batch, threads, p);
          const std::string what = std::to_string(m) + "x" + std::to_string(n) + " batch " + std::to_string(batch) +
                                   " on " + std::to_string(threads) + ": nc " + std::to_string(now.nc) + " msplit " +
                                   std::to_string(now.msplit);
          ASSERT_TRUE(now.nc % p.nr == 0 && now.nc > 0 && now.nc <= base.nc) << what;
          ASSERT_TRUE(now.mc % p.mr == 0 && now.mc > 0 && now.mc <= p.mc) << what;
          ASSERT_TRUE(now.msplit >= 1 && now.msplit <= std::max<int64_t>(1, (m + p.mr - 1) / p.mr)) << what;
          EXPECT_GE(loop::split_efficiency(jobs_of(now, m, n, batch), threads) + 1e-9,
                    loop::split_efficiency(jobs_of(base, m, n, batch), threads)) << what;
        }
}

// Swapped late convolutions (positions on the A side, the constant weights packed at build
// on B) whose output channels leave the threads uneven panels, against the interpreter:
// 160 and 161 channels at 7 x 7 (on 2 threads: N blocks and M splits together), 9 x 9 and
// 5 x 5 maps, a residual add, batch 1 and 3. llvm.odd_jobs_pool_threads reruns it on 1, 3
// and 7 pool threads.
TEST(Contraction, BalancedMSplitsMatchInterpreter) {
  Tensor x = input("x", {1, 57, 7, 7}), res = input("res", {1, 160, 7, 7});
  Tensor w = from_host(test::sin_weights({160, 57, 1, 1}, 160.0, 0.37));
  split_then_diff(
      {"LATHE_MATMUL_TILE", "LATHE_MATMUL_BALANCE_M", "LATHE_MATMUL_NC"},
      [](const std::string& ir) { EXPECT_EQ(ir.find("msplit=1 "), std::string::npos) << ir; },
      {{"1x1 7x7 c96 k160, batch 1", conv_graph({1, 96, 7, 7, 160, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true})},
       {"1x1 7x7 c33 k161, batch 3", conv_graph({3, 33, 7, 7, 161, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true})},
       {"1x1 9x9 c17 k97, batch 1", conv_graph({1, 17, 9, 9, 97, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, false})},
       {"3x3 5x5 c13 k67, batch 3", conv_graph({3, 13, 5, 5, 67, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true})},
       {"1x1 7x7 c57 k160 + residual",
        Graph::from_outputs({{"y", (conv2d(x, w, std::nullopt, Conv2dOptions{}) + res).node()}})}});
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
            conv_graph({1, 11, 14, 14, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true}));
  batch.add("conv 7 x 7, 17 -> 31 channels, batch 4",
            conv_graph({4, 17, 7, 7, 31, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1}));
  batch.add("conv 1x1 at 13 x 13, 5 -> 7 channels, batch 3",
            conv_graph({3, 5, 13, 13, 7, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true}));
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
      // (196 positions, K 576: swapped where 196 < 8 NR, AVX-512's 32: orient_matmul)
      {"3x3 14x14 c64 k256, K split in blocks", conv(1, 64, 14, 256, 3, same, false),
       196 < 8 * loop::host_matmul_params().nr ? "A packed once" : "B packed once"},
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

}  // namespace
}  // namespace lathe
