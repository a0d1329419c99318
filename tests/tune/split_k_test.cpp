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

namespace lathe {
namespace {

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

double max_diff(const TensorMap& a, const TensorMap& b) {
  double m = 0;
  for (auto& [n, t] : b) {
    const HostTensor& u = a.at(n);
    for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(u.get_f64(i) - t.get_f64(i)));
  }
  return m;
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
  b.f.name = p.funcs[0].name;
  loop::LoopFunc again = tune::replay(p.kg, 0, b.schedule);
  again.name = b.f.name;
  EXPECT_EQ(tune::code_key(again), tune::code_key(b.f));
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
  loop::LoopFunc third = tune::replay(p.kg, 0, back.schedule);
  third.name = b.f.name;
  EXPECT_EQ(tune::code_key(third), tune::code_key(b.f));
}

TEST(TuneSplitK, SplitKernelsMatchTheInterpreter) {
  Backend& be = get_backend("c");
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
        tune::Point pt;
        for (auto& knob : s.knobs) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          pt.push_back(int((seed >> 33) % knob.values.size()));
        }
        pt[k] = 1 + t % 2;  // 2 or 4 parts
        if (int m = s.knob("mode"); m >= 0) pt[m] = 1;  // a matmul's plain reduction (not the packed GEMM)
        Program p = base;
        tune::Built bt = tune::build(p.kg, kn, s, pt);
        ASSERT_FALSE(bt.schedule.empty());
        EXPECT_EQ(bt.schedule[0].rfind("split_k ", 0), 0u) << bt.schedule[0];
        bt.f.name = p.funcs[kn].name;
        loop::LoopFunc again = tune::replay(p.kg, kn, bt.schedule);
        again.name = bt.f.name;
        EXPECT_EQ(tune::code_key(again), tune::code_key(bt.f));
        p.funcs[kn] = bt.f;
        progs.push_back(std::move(p));
      }
      std::vector<const Program*> ps;
      for (auto& p : progs) ps.push_back(&p);
      auto compiled = be.compile_many(ps);
      for (size_t i = 0; i < progs.size(); ++i) {
        Executable e(progs[i], compiled[i], "c");
        EXPECT_LT(max_diff(e.run(in), want), 1e-2) << loop::print_loop(progs[i].funcs[kn]);
      }
    }
  }
}

TEST(TuneSplitK, RefusalsNameTheReason) {
  Program p = build_program(colsum(101, 13));
  auto refuses = [&](std::vector<std::string> lines, const std::string& why) {
    try {
      tune::replay(p.kg, 0, lines);
      ADD_FAILURE() << "accepted: " << lines.back();
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refuses({"split_k i0 by 2"}, "does not reduce into one accumulator");
  refuses({"split_k r0 by 1"}, "parts must be 2..64");
  refuses({"split_k r0 by 200"}, "parts must be 2..64");
  refuses({"split_k zz by 2"}, "no such loop");
  refuses({"split_k r0 by 2", "split_k r0_p by 2"}, "split_k r0_p");
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
  Backend& be = get_backend("c");
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
      Program p = base;
      loop::LoopFunc f = tune::replay(p.kg, 0, {line});
      std::string text = loop::print_loop(f);
      bool in_place = line.find("bplace=1") != std::string::npos;
      EXPECT_EQ(text.find("B in place") != std::string::npos, in_place) << text;
      f.name = p.funcs[0].name;
      p.funcs[0] = f;
      progs.push_back(std::move(p));
    }
    std::vector<const Program*> ps;
    for (auto& p : progs) ps.push_back(&p);
    auto compiled = be.compile_many(ps);
    for (size_t i = 0; i < progs.size(); ++i) {
      Executable e(progs[i], compiled[i], "c");
      EXPECT_LT(max_diff(e.run(in), want), 1e-3) << lines[i] << "\n" << loop::print_loop(progs[i].funcs[0]);
    }
  }
  // a bad value is an error naming the line
  loop::MatmulParams mp;
  EXPECT_THROW(tune::parse_matmul_line("matmul mr=4 nr=16 lanes=8 kc=64 mc=16 nc=32 bplace=2", mp), UserError);
}

}  // namespace
}  // namespace lathe
