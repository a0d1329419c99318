// a_in_place_test.cpp — A read in place (lower_matmul_pack.cpp, reads_a_in_place): where a
// job feeds each A panel to few B panels (a small batched GEMM), the micro-kernel broadcasts
// A's rows straight from the operand and there is no packed copy of A. Which kernels take
// it, and small, odd, prime and batched matmuls against the interpreter on the backend under
// test (ragged row panels, K over one KC block, an epilogue, a transposed A, a B shared by
// the batch).
#include <array>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "diff_util.h"

namespace lathe {
namespace {

std::string ir_of(const Graph& g) { return test::loop_ir_of(build_program(g)); }

Graph bmm(int64_t n, int64_t m, int64_t k, int64_t c) {
  Tensor a = input("a", {n, m, k}), b = input("b", {n, k, c});
  return Graph::from_outputs({{"y", matmul(a, b).node()}});
}

bool switched_off() {
  const char* e = std::getenv("LATHE_MATMUL_A_IN_PLACE");
  return (e && std::string(e) == "0") || (std::getenv("LATHE_MATMUL_TILE") && *std::getenv("LATHE_MATMUL_TILE"));
}

TEST(AInPlace, SmallBatchedGemmsReadAWhereItLies) {
  if (switched_off()) GTEST_SKIP() << "LATHE_MATMUL_A_IN_PLACE=0 or a tile override";
  // 64 x 17x33 . 33x29: two B panels a job, so A is not packed
  std::string ir = ir_of(bmm(64, 17, 33, 29));
  EXPECT_NE(ir.find(" A in place"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("pack A"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("alloc Ap"), std::string::npos) << ir;
  // many B panels a job (N 400): each A panel is read 25 times, packed as before
  Tensor x = input("x", {128, 300}), w = input("w", {300, 400});
  ir = ir_of(Graph::from_outputs({{"y", matmul(x, w).node()}}));
  EXPECT_EQ(ir.find(" A in place"), std::string::npos) << ir;
  EXPECT_NE(ir.find("pack A"), std::string::npos) << ir;
  // rows 1024 floats apart (4 KiB: one L1 set for all of them): packed
  ir = ir_of(bmm(4, 17, 1024, 29));
  EXPECT_EQ(ir.find(" A in place"), std::string::npos) << ir;
}

TEST(AInPlace, MatchesTheInterpreter) {
  test::DiffBatch batch;
  for (auto [n, m, k, c] : std::vector<std::array<int64_t, 4>>{{64, 17, 33, 29},
                                                                {3, 5, 7, 11},
                                                                {1, 17, 33, 29},
                                                                {64, 1, 33, 29},
                                                                {8, 64, 64, 64},
                                                                {2, 18, 31, 16},
                                                                {5, 13, 301, 47},
                                                                {1, 7, 2, 3}})
    batch.add("bmm " + std::to_string(n) + "x" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(c),
              bmm(n, m, k, c));
  // a B shared by the batch, with an epilogue (bias + relu)
  Tensor x = input("x", {64, 13, 37}), w = input("w", {37, 29}), bias = input("bias", {29});
  batch.add("batch 64 of 13 rows, shared B, bias + relu", Graph::from_outputs({{"y", relu(matmul(x, w) + bias).node()}}));
  // A transposed (its rows one element apart, K the strided side)
  Tensor at = input("at", {3, 41, 23}), bt = input("bt", {3, 41, 19});
  batch.add("A transposed", Graph::from_outputs({{"y", matmul(transpose(at, 1, 2), bt).node()}}));
  // attention-like scores with T 77 (Q . K^T, 64-wide heads)
  Tensor q = input("q", {2, 3, 77, 64}), kk = input("k", {2, 3, 77, 64});
  batch.add("attention scores, T 77", Graph::from_outputs({{"y", matmul(q, transpose(kk, 2, 3)).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

// The matmul kernel's schedule log line ("matmul: MR=6 NR=16 KC=.. MC=.. NC=.. msplit=..").
std::string matmul_log(const Program& p) {
  for (int i = 0; i < p.num_kernels(); ++i)
    if (p.kg.kernels[i].kind == "matmul" && !p.funcs[i].schedule_log.empty()) return p.funcs[i].schedule_log[0];
  return "";
}
int64_t log_value(const std::string& log, const std::string& key) {
  const size_t at = log.find(" " + key + "=");
  return at == std::string::npos ? -1 : std::atoll(log.c_str() + at + key.size() + 2);
}

// A job's rows over more than one MC block (the A panels of each block read in place from
// the block's first row on, the micro-kernel's row addresses offset by the block's start) with
// few B panels (N 17 to 61: at most four of NR 16, two of NR 32, the last one ragged) and a
// ragged last A panel (M mod MR rows, read by the ragged-rows kernel and never past A's last
// row): prime M, K and N, batch 1 (on two threads M is split between the jobs: still more
// than one block each) and batch 2 and 3, a transposed A (its rows one element apart), and
// bias + relu in the epilogue, against the interpreter.
TEST(AInPlace, RowsOverSeveralMcBlocksMatchTheInterpreter) {
  struct Case {
    int64_t n, m, k, c;
    bool transposed = false, epilogue = false;
  };
  test::DiffBatch batch;
  for (const Case& t : {Case{1, 617, 37, 29}, Case{3, 401, 53, 61}, Case{1, 1031, 41, 29, false, true},
                        Case{2, 613, 31, 47, true}, Case{3, 293, 67, 17, false, true}}) {
    const std::string what = "bmm " + std::to_string(t.n) + "x" + std::to_string(t.m) + "x" + std::to_string(t.k) + "x" +
                             std::to_string(t.c) + (t.transposed ? " A transposed" : "") + (t.epilogue ? " bias + relu" : "");
    Tensor a = t.transposed ? transpose(input("a", {t.n, t.k, t.m}), 1, 2) : input("a", {t.n, t.m, t.k});
    Tensor y = matmul(a, input("b", {t.n, t.k, t.c}));
    if (t.epilogue) y = relu(y + input("bias", {t.c}));
    Graph g = Graph::from_outputs({{"y", y.node()}});
    const std::string log = matmul_log(build_program(g));
    const int64_t mr = log_value(log, "MR"), mc = log_value(log, "MC"), msplit = log_value(log, "msplit");
    ASSERT_GT(mr, 0) << what << ": " << log;
    if (!switched_off()) EXPECT_NE(log.find(" A in place"), std::string::npos) << what << ": " << log;
    EXPECT_NE(t.m % mr, 0) << what << ": no ragged last A panel at MR " << mr;
    // (on a many-core host M is split into more, shorter ranges)
    if (std::thread::hardware_concurrency() <= 4)
      EXPECT_GT((t.m + msplit - 1) / msplit, mc) << what << ": a job's rows in one MC block: " << log;
    batch.add(what, g);
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
