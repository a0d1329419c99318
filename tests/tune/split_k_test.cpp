// split_k_test.cpp — the tuner's split_k knob (loop::split_k: a reduction split across threads
// into per-thread partial results plus a combine): a column sum's and a GEMV's spaces have
// it, a point logs "split_k LOOP by P" and replays to the same code, split kernels (with rows,
// vectorize, peel, unroll around them) match the interpreter on prime sizes at batch 1 and 3,
// refusals name the reason, --measure model stays deterministic with the knob.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/backend.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "core/loop/split_k.h"
#include "core/runtime/random.h"
#include "core/schedule/program.h"
#include "core/tune/records.h"
#include "core/tune/search.h"
#include "tune_check.h"

namespace lathe {
namespace {

using namespace tune_test;

const tune::Machine kTwo{2, 8, 16};

Graph colsum(int64_t r, int64_t c) {
  Tensor x = input("x", {r, c});
  return Graph::from_outputs({{"y", sum(x, {0}).node()}});
}
Graph gemv(int64_t batch, int64_t k, int64_t n) {
  Tensor x = input("x", {batch, k}), w = input("w", {k, n});
  return Graph::from_outputs({{"y", matmul(x, w).node()}});
}
Graph row_max(int64_t r, int64_t c) {  // a max over rows of few outputs
  Tensor x = input("x", {r, c});
  return Graph::from_outputs({{"y", max(x, {1}).node()}});
}

TEST(TuneSplitK, PointsLogTheSplitAndReplayToTheSameCode) {
  Program p = build_program(colsum(4099, 37));
  tune::Space s = tune::make_space(p.kg, 0, kTwo);
  int k = s.knob("split_k"), rows = s.knob("rows");
  ASSERT_GE(k, 0);
  ASSERT_GE(rows, 0);
  EXPECT_EQ(s.knobs[k].values, (std::vector<int64_t>{0, 2, 4}));
  tune::Point pt(s.knobs.size(), 0);
  pt[k] = 2;     // 4 parts
  pt[rows] = 2;  // rows of 32
  tune::Built b = tune::build(p.kg, 0, s, pt);
  ASSERT_FALSE(b.schedule.empty());
  EXPECT_EQ(b.schedule[0], "split_k r0 by 4");
  EXPECT_EQ(b.schedule[1], "reduce_rows i0_p by 32");
  EXPECT_TRUE(replays_to(p.kg, 0, b.schedule, b.f));
  std::string text = loop::print_loop(b.f);
  EXPECT_NE(text.find("parallel for r0_k in 0..4"), std::string::npos) << text;
  // a record with the line round-trips through JSON and replays the same
  tune::Record r;
  r.hash = "h";
  r.target = "t";
  r.kernel = "k0";
  r.kind = "reduce";
  r.schedule = b.schedule;
  r.ms = 1;
  r.baseline_ms = 2;
  r.trials = 3;
  std::string path = ::testing::TempDir() + "split_k_records.jsonl";
  std::remove(path.c_str());
  tune::merge_records(path, {r});
  auto read = tune::read_records(path);
  ASSERT_EQ(read.size(), 1u);
  const tune::Record& back = read[0];
  EXPECT_EQ(back.schedule, b.schedule);
  EXPECT_TRUE(replays_to(p.kg, 0, back.schedule, b.f));
}

TEST(TuneSplitK, SplitKernelsMatchTheInterpreter) {
  // prime sizes; a GEMV at batch 1 and 3; a full sum to one value; a max
  Tensor x = input("x", {53, 7});
  Graph total = Graph::from_outputs({{"y", sum(x, {0, 1}).node()}});
  for (const Graph& g : {colsum(4099, 37), colsum(101, 13), gemv(1, 997, 31), gemv(3, 211, 17), total, row_max(5, 1009)}) {
    Program base = build_program(g);
    TensorMap in = random_inputs(g, 7);
    TensorMap want = interpret(g, in);
    for (int kn = 0; kn < base.num_kernels(); ++kn) {
      tune::Space s = tune::make_space(base.kg, kn, kTwo);
      int k = s.knob("split_k");
      ASSERT_GE(k, 0) << loop::print_loop(base.funcs[kn]);
      std::vector<Program> progs;
      uint64_t seed = 99 + kn;
      for (int t = 0; t < 8; ++t) {
        tune::Point pt = random_point(s, seed);
        pt[k] = 1 + t % 2;  // 2 or 4 parts
        if (int m = s.knob("mode"); m >= 0) pt[m] = 1;  // a matmul's plain reduction (not the packed GEMM)
        tune::Built bt = tune::build(base.kg, kn, s, pt);
        ASSERT_FALSE(bt.schedule.empty());
        EXPECT_EQ(bt.schedule[0].rfind("split_k ", 0), 0u) << bt.schedule[0];
        EXPECT_TRUE(replays_to(base.kg, kn, bt.schedule, bt.f));
        progs.push_back(with_kernel(base, kn, bt.f));
      }
      EXPECT_TRUE(all_match(progs, kn, in, want, 1e-2));
    }
  }
}

TEST(TuneSplitK, RefusalsNameTheReason) {
  Program p = build_program(colsum(101, 13));
  EXPECT_TRUE(refused(p.kg, 0, {"split_k i0 by 2"}, "does not reduce into one accumulator"));
  EXPECT_TRUE(refused(p.kg, 0, {"split_k r0 by 1"}, "parts must be 2..64"));
  EXPECT_TRUE(refused(p.kg, 0, {"split_k r0 by 200"}, "parts must be 2..64"));
  EXPECT_TRUE(refused(p.kg, 0, {"split_k zz by 2"}, "no such loop"));
  EXPECT_TRUE(refused(p.kg, 0, {"split_k r0 by 2", "split_k r0_p by 2"}, "split_k r0_p"));
  // a softmax's row has two reductions in one nest: no knob, and the primitive refuses
  Tensor x = input("x", {5, 77});
  Program sm = build_program(Graph::from_outputs({{"y", softmax(x, -1).node()}}));
  for (int k = 0; k < sm.num_kernels(); ++k) EXPECT_LT(tune::make_space(sm.kg, k, kTwo).knob("split_k"), 0);
  // one core: no knob
  EXPECT_LT(tune::make_space(p.kg, 0, tune::Machine{1, 8, 16}).knob("split_k"), 0);
}

TEST(TuneSplitK, ModelSearchStaysDeterministic) {
  Program p = build_program(gemv(1, 4096, 1000));
  tune::TuneOptions o;
  o.trials = 40;
  o.machine = kTwo;
  auto a = tune::tune_program(p, {}, "test-target", nullptr, o).records;
  auto b = tune::tune_program(p, {}, "test-target", nullptr, o).records;
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(tune::to_json_line(a[0]), tune::to_json_line(b[0]));
}


// the matmul line's bplace=1: B read where it lies (no packed copy) on a batched matmul with
// odd sides and a prime K; the line round-trips, replays, and the code matches the interpreter
TEST(TuneBInPlace, BatchedMatmulReadsBInPlaceAndMatchesTheInterpreter) {
  for (int64_t batch : {1, 3}) {
    Tensor a = input("a", {batch, 17, 101}), b = input("b", {batch, 101, 37});
    Graph g = Graph::from_outputs({{"y", matmul(a, b).node()}});
    Program base = build_program(g);
    tune::Space s = tune::make_space(base.kg, 0, kTwo);
    ASSERT_GE(s.knob("bplace"), 0);
    loop::MatmulParams mp;
    ASSERT_TRUE(tune::parse_matmul_line("matmul mr=4 nr=16 lanes=8 kc=64 mc=16 nc=32 bplace=1", mp));
    EXPECT_EQ(mp.b_in_place, 1);
    EXPECT_EQ(tune::matmul_line(mp), "matmul mr=4 nr=16 lanes=8 kc=64 mc=16 nc=32 bplace=1");
    TensorMap in = random_inputs(g, 11);
    TensorMap want = interpret(g, in);
    std::vector<std::string> lines{"matmul mr=4 nr=16 lanes=8 kc=64 mc=16 nc=32 bplace=1",
                                   "matmul mr=6 nr=24 lanes=8 kc=128 mc=18 nc=48 bplace=1",
                                   "matmul mr=4 nr=16 lanes=8 kc=64 mc=16 nc=32 bplace=0"};
    std::vector<Program> progs;
    for (auto& line : lines) {
      loop::LoopFunc f = tune::replay(base.kg, 0, {line});
      std::string text = loop::print_loop(f);
      bool in_place = line.find("bplace=1") != std::string::npos;
      EXPECT_EQ(text.find("B in place") != std::string::npos, in_place) << text;
      progs.push_back(with_kernel(base, 0, std::move(f)));
    }
    EXPECT_TRUE(all_match(progs, 0, in, want, 1e-3, [&](size_t i) { return lines[i]; }));
  }
  // a bad value is an error naming the line
  loop::MatmulParams mp;
  EXPECT_THROW(tune::parse_matmul_line("matmul mr=4 nr=16 lanes=8 kc=64 mc=16 nc=32 bplace=2", mp), UserError);
}

}  // namespace
}  // namespace lathe
