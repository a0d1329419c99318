// m_slack_test.cpp — extra M splits for a GEMM whose B is packed at build (a layer's weights)
// and that has fewer than two jobs a thread (loop::m_splits_for_slack, LATHE_MATMUL_M_JOBS=2,
// an experiment that is off by default):
// the rule on the transformer shapes and off them (M 1, 7, 77, 128, 512, batch 64, prime N,
// 1 to 8 threads), and the split GEMMs against the interpreter (odd and prime sizes, batch 1
// and 3, a bias and an activation in the epilogue).
#include <cstdlib>
#include <string>
#include <thread>

#include "core/frontend/nn.h"
#include "core/ir/diag.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "core/schedule/kernel_graph.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

using test::sin_weights;
using test::ScopedEnv;

int64_t jobs(const loop::MatmulBlocking& b, int64_t n, int64_t batch) { return batch * ((n + b.nc - 1) / b.nc) * b.msplit; }

// the AVX2 host's tile and blocks (6 x 16, MC 132), whatever the machine running the test
loop::MatmulParams avx2() {
  loop::MatmulParams p;
  p.mr = 6, p.nr = 16, p.lanes = 8, p.kc = 256, p.mc = 132, p.nc = 512;
  return p;
}

TEST(MatmulSlack, FewJobsSplitM) {
  const loop::MatmulParams p = avx2();
  auto slack = [&](int64_t m, int64_t n, int64_t k, int64_t batch, int threads) {
    return loop::m_splits_for_slack(loop::matmul_blocking(m, n, k, batch, threads, p), m, n, batch, threads, p, 2);
  };
  // BERT's and GPT-2's 768-wide GEMMs (attention projection, fc2) on 2 threads: 2 N blocks,
  // now 2 M ranges each (11 MR panels, one MC block); the 2304- and 3072-wide ones keep their
  // 6 N blocks
  for (int64_t k : {768, 3072}) {
    auto b = slack(128, 768, k, 1, 2);
    EXPECT_EQ(b.msplit, 2) << k;
    EXPECT_EQ(jobs(b, 768, 1), 4) << k;
    EXPECT_EQ(b.mc, 66) << k;
  }
  for (int64_t n : {2304, 3072}) EXPECT_EQ(slack(128, n, 768, 1, 2).msplit, 1) << n;
  EXPECT_EQ(slack(1, 768, 768, 1, 2).msplit, 1);    // one row: nothing to split
  EXPECT_EQ(slack(7, 768, 768, 1, 2).msplit, 1);    // 2 MR panels: under 4 a range
  EXPECT_EQ(slack(23, 768, 768, 1, 2).msplit, 1);   // 4 panels: one range of 4
  EXPECT_EQ(slack(77, 768, 768, 1, 2).msplit, 2);   // 13 panels: 7 + 6
  EXPECT_EQ(slack(512, 768, 768, 1, 2).msplit, 2);
  EXPECT_EQ(slack(128, 768, 768, 64, 2).msplit, 1);  // batch 64: jobs enough
  EXPECT_EQ(slack(128, 768, 768, 1, 1).msplit, 1);   // one thread
  // the switch: one job a thread is the blocking as it was
  EXPECT_EQ(loop::m_splits_for_slack(loop::matmul_blocking(128, 768, 768, 1, 2, p), 128, 768, 1, 2, p, 1).msplit, 1);
  // symbolic sizes: unchanged
  auto s = loop::matmul_blocking(-1, -1, -1, -1, 2, p);
  EXPECT_EQ(loop::m_splits_for_slack(s, -1, -1, -1, 2, p, 2).msplit, 1);
  // across sizes and thread counts: the blocks nest, each M range keeps 4 MR panels, the
  // jobs reach two a thread where M allows, and the threads share them no worse than before
  for (int threads : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 7, 24, 77, 128, 131, 512})
      for (int64_t n : {16, 97, 768, 769, 2304, 50257})
        for (int64_t batch : {1, 3, 64}) {
          const loop::MatmulBlocking before = loop::matmul_blocking(m, n, 768, batch, threads, p);
          const loop::MatmulBlocking b = loop::m_splits_for_slack(before, m, n, batch, threads, p, 2);
          const std::string what = std::to_string(m) + "x" + std::to_string(n) + " batch " + std::to_string(batch) + " on " +
                                   std::to_string(threads) + ": msplit " + std::to_string(b.msplit);
          const int64_t panels = (m + p.mr - 1) / p.mr;
          EXPECT_EQ(b.nc, before.nc) << what;
          EXPECT_EQ(b.kc, before.kc) << what;
          EXPECT_TRUE(b.mc % p.mr == 0 && b.mc > 0 && b.mc <= p.mc) << what << " mc " << b.mc;
          if (b.msplit == before.msplit) continue;
          EXPECT_EQ(before.msplit, 1) << what;
          EXPECT_LE(b.msplit * 4, panels) << what;
          EXPECT_GT(jobs(b, n, batch), jobs(before, n, batch)) << what;
          EXPECT_LT(jobs(before, n, batch), 2 * threads) << what;
        }
}

void expect_matches(const Graph& g, const std::string& what) {
  TensorMap in = random_inputs(g, 11);
  EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in), 4), "") << what;
}

bool has(const Program& p, const std::string& text) {
  for (int i = 0; i < p.num_kernels(); ++i)
    for (const std::string& line : p.funcs[i].schedule_log)
      if (line.find(text) != std::string::npos) return true;
  return false;
}

// the split GEMMs against the interpreter: constant weights (packed at build), odd and prime
// M, K and N, batch 1 and 3, a bias and relu in the epilogue; on a 2-thread host the
// 128-row, 769-wide case is cut into M ranges (the schedule log says msplit=2)
TEST(MatmulSlack, SplitGemmsMatchInterpreter) {
  ScopedEnv all("LATHE_PREPACK", "all");
  ScopedEnv on("LATHE_MATMUL_M_JOBS", "2");
  struct Case { int64_t batch, m, k, n; };
  for (Case c : {Case{1, 128, 67, 769}, Case{1, 77, 131, 389}, Case{1, 131, 37, 97}, Case{3, 77, 41, 389},
                 Case{1, 7, 53, 211}, Case{1, 512, 29, 769}}) {
    const std::string what = "b" + std::to_string(c.batch) + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                             std::to_string(c.n);
    Tensor x = c.batch == 1 ? input("x", {c.m, c.k}) : input("x", {c.batch, c.m, c.k});
    Tensor y = relu(matmul(x, from_host(sin_weights({c.k, c.n}, 2))) + from_host(sin_weights({c.n}, 5)));
    Graph g = Graph::from_outputs({{"y", y.node()}});
    Program p = build_program(g);
    if (c.m == 128 && std::thread::hardware_concurrency() == 2)
      EXPECT_TRUE(has(p, "msplit=2")) << what << "\n" << test::loop_ir_of(p);
    expect_matches(g, what);
  }
}

TEST(MatmulSlack, OffByDefaultAndBadValueNamed) {
  ScopedEnv all("LATHE_PREPACK", "all");
  Graph g = Graph::from_outputs({{"y", matmul(input("x", {128, 67}), from_host(sin_weights({67, 769}, 2))).node()}});
  if (std::thread::hardware_concurrency() == 2) EXPECT_FALSE(has(build_program(g), "msplit=2"));
  expect_matches(g, "default");
  ScopedEnv bad("LATHE_MATMUL_M_JOBS", "0");
  try {
    build_program(g);
    ADD_FAILURE() << "LATHE_MATMUL_M_JOBS=0 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("LATHE_MATMUL_M_JOBS"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
