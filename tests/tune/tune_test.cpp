// tune_test.cpp — the autotuner's core: spaces build legal schedules that compute what the
// interpreter computes, --measure model is deterministic, records round-trip and replay to
// the same loop IR, hashes ignore names, and records apply only on the same kernel and
// target and only when faster than the heuristic.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <chrono>
#include <map>
#include <thread>

#include <unistd.h>

#include "backends/backend.h"
#include "backends/tune_measure.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/repack.h"
#include "core/ir/diag.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "core/tune/model.h"
#include "core/tune/records.h"
#include "core/tune/search.h"
#include "tune_check.h"

namespace lathe {
namespace {

using namespace tune_test;

Graph colsum(const std::string& name = "x", int64_t r = 64, int64_t c = 48) {
  Tensor x = input(name, {r, c});
  return Graph::from_outputs({{"y", sum(x, {0}).node()}});
}
Graph softmax77() {
  Tensor x = input("x", {5, 77});
  return Graph::from_outputs({{"y", softmax(x, -1).node()}});
}
Graph odd_bmm() {
  Tensor a = input("a", {3, 7, 13}), b = input("b", {3, 13, 11});
  return Graph::from_outputs({{"y", matmul(a, b).node()}});
}
Graph transpose_add() {
  Tensor x = input("x", {33, 40});
  return Graph::from_outputs({{"y", (transpose(x, 0, 1) + 1.0).node()}});
}

tune::TuneOptions model_opts(int trials = 6) {
  tune::TuneOptions o;
  o.trials = trials;
  o.machine = tune::Machine{2, 8, 16};  // fixed, so the test does not depend on the host
  return o;
}

std::vector<tune::Record> model_tune(const Graph& g, int trials = 6) {
  Program p = build_program(g);
  return tune::tune_program(p, {}, "test-target", nullptr, model_opts(trials)).records;
}

TEST(Tune, ModelSearchIsDeterministicAndNotWorseThanTheHeuristic) {
  for (const Graph& g : {colsum(), softmax77(), odd_bmm(), transpose_add()}) {
    auto a = model_tune(g), b = model_tune(g);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(tune::to_json_line(a[i]), tune::to_json_line(b[i]));
      EXPECT_EQ(a[i].measure, "model");
      EXPECT_GT(a[i].ms, 0);
      EXPECT_GT(a[i].trials, 0);
    }
  }
}

TEST(Tune, ColumnSumModelPicksReductionRows) {
  // a column sum read down the columns is strided; the model must prefer rows of accumulators
  auto r = model_tune(colsum("x", 512, 256));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_LT(r[0].ms, r[0].baseline_ms * 1.0001);
  bool rows = false;
  for (auto& l : r[0].schedule) rows |= l.rfind("reduce_rows", 0) == 0;
  EXPECT_TRUE(rows) << tune::to_json_line(r[0]);
}

// the rows knob's shares of the row loop (space.h): blocks sized from its extent and the
// cores, written as plain numbers in the log, replaying to the same code
TEST(Tune, RowsKnobSplitsTheRowLoopOverTheCores) {
  Tensor x = input("x", {1, 8}), w = input("w", {8, 70001});
  Program p = build_program(Graph::from_outputs({{"y", matmul(x, w).node()}}));
  tune::Space s = tune::make_space(p.kg, 0, tune::Machine{2, 8, 16});
  int rows = s.knob("rows");
  ASSERT_GE(rows, 0);
  auto block_of = [&](int64_t value) {
    const auto& v = s.knobs[rows].values;
    auto it = std::find(v.begin(), v.end(), value);
    EXPECT_NE(it, v.end()) << value;
    tune::Point pt(s.knobs.size(), 0);
    pt[rows] = int(it - v.begin());
    tune::Built b = tune::build(p.kg, 0, s, pt);
    EXPECT_TRUE(replays_to(p.kg, 0, b.schedule, b.f));
    return b.schedule.empty() ? std::string() : b.schedule[0];
  };
  EXPECT_EQ(block_of(tune::kRowsPerCore), "reduce_rows i1 by 17504");     // 4 blocks: 2 per core
  EXPECT_EQ(block_of(tune::kRowsPerHalfCore), "reduce_rows i1 by 8752");  // 8 blocks
  EXPECT_EQ(block_of(tune::kRowsWhole), "reduce_rows i1 by 70001");
  EXPECT_EQ(block_of(8192), "reduce_rows i1 by 8192");
  EXPECT_EQ(tune::rows_block(tune::kRowsPerCore, 1000, 3, 8), 336);
  EXPECT_EQ(tune::rows_block(tune::kRowsPerCore, -1, 3, 8), 0);  // unknown extent: no rows
}

// --measure model on 3 cores: a 4096 x 1000 column sum in blocks the 3 cores share evenly (the
// fixed sizes of 2 or 4 blocks leave a core idle half the time; 3 blocks of 336 was the pick
// until the model charged the scalar remainder a 336-element vector loop leaves, 16 of 336,
// since when blocks of 32 (32 blocks: 11, 11 and 10 per core, no remainder) ranked first;
// with the split_k knob the 4096 rows split into 3 parts, one per core, rank first)
TEST(Tune, ColumnSumModelPicksOneBlockPerCore) {
  Program p = build_program(colsum("x", 4096, 1000));
  tune::TuneOptions o = model_opts(8);
  o.machine = tune::Machine{3, 8, 16};
  auto a = tune::tune_program(p, {}, "test-target", nullptr, o).records;
  auto b = tune::tune_program(p, {}, "test-target", nullptr, o).records;
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(tune::to_json_line(a[0]), tune::to_json_line(b[0]));
  ASSERT_GE(a[0].schedule.size(), 2u) << tune::to_json_line(a[0]);
  // since the split_k knob: the rows split into parts, one per core (or a multiple)
  long parts = 0;
  if (std::sscanf(a[0].schedule[0].c_str(), "split_k r0 by %ld", &parts) == 1) {
    EXPECT_EQ(parts % 3, 0) << tune::to_json_line(a[0]);
    return;
  }
  long block = 0;
  ASSERT_EQ(std::sscanf(a[0].schedule[0].c_str(), "reduce_rows i0 by %ld", &block), 1) << tune::to_json_line(a[0]);
  long blocks = (1000 + block - 1) / block;
  EXPECT_TRUE(blocks % 3 == 0 || blocks >= 24) << tune::to_json_line(a[0]);
  EXPECT_EQ(a[0].schedule[1], "parallel i0_b") << tune::to_json_line(a[0]);
}

// on_trial (the app's Tune tab plots it): one call per candidate, numbered 1, 2, … per
// kernel, as many as the record's trials, the best of them the record's time; a stop
// request from it ends the search with what was found (the kernel in progress keeps its best)
TEST(Tune, OnTrialReportsEveryCandidateAndCanStopTheSearch) {
  Graph g = Graph::from_outputs({{"s", sum(input("x", {96, 64}), {0}).node()},
                                 {"t", (transpose(input("y", {33, 40}), 0, 1) + 1.0).node()}});
  Program p = build_program(g);
  std::map<int, std::vector<tune::Trial>> seen;
  tune::TuneOptions o = model_opts(4);
  o.on_trial = [&](const tune::Trial& t) { seen[t.kernel].push_back(t); };
  tune::TuneResult r = tune::tune_program(p, {}, "test-target", nullptr, o);
  ASSERT_EQ(r.records.size(), 2u);
  ASSERT_EQ(seen.size(), 2u);
  for (auto& rec : r.records) {
    int k = -1;
    for (int i = 0; i < p.num_kernels(); ++i)
      if (p.kg.kernels[i].name == rec.kernel) k = i;
    ASSERT_TRUE(seen.count(k)) << rec.kernel;
    const auto& ts = seen[k];
    ASSERT_EQ((int)ts.size(), rec.trials);
    double best = 1e300;
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(ts[i].trial, (int)i + 1);
      EXPECT_EQ(ts[i].baseline_ms, rec.baseline_ms);
      if (ts[i].ms > 0) best = std::min(best, ts[i].ms);
    }
    EXPECT_EQ(best, rec.ms);
  }
  // stop after the 10th candidate: the first kernel keeps its best of those, the second is not tuned
  std::atomic<bool> stop{false};
  int calls = 0;
  tune::TuneOptions s = model_opts(4);
  s.stop = &stop;
  s.on_trial = [&](const tune::Trial&) {
    if (++calls == 10) stop = true;
  };
  tune::TuneResult c = tune::tune_program(p, {}, "test-target", nullptr, s);
  EXPECT_TRUE(c.interrupted);
  ASSERT_EQ(c.records.size(), 1u);
  EXPECT_LE(c.records[0].ms, c.records[0].baseline_ms);
}

// every point the search may pick computes what the interpreter computes
TEST(Tune, RandomPointsOfEverySpaceMatchTheInterpreter) {
  Graph gemv = Graph::from_outputs({{"y", matmul(input("x", {1, 5}), input("w", {5, 4099})).node()}});
  for (const Graph& g : {colsum("x", 37, 29), softmax77(), odd_bmm(), transpose_add(), gemv}) {
    Program base = build_program(g);
    TensorMap in = random_inputs(g, 3);
    TensorMap want = interpret(g, in);
    for (int k = 0; k < base.num_kernels(); ++k) {
      tune::Space s = tune::make_space(base.kg, k, tune::Machine{2, 8, 16});
      std::vector<Program> progs;
      uint64_t seed = 12345 + k;
      for (int t = 0; t < 6; ++t) {
        tune::Built bt = tune::build(base.kg, k, s, random_point(s, seed));
        EXPECT_TRUE(replays_to(base.kg, k, bt.schedule, bt.f));  // the schedule replays to the same code
        progs.push_back(with_kernel(base, k, bt.f));
      }
      EXPECT_TRUE(all_match(progs, k, in, want, 1e-3));
    }
  }
}

TEST(Tune, HashIgnoresNamesAndIdsButNotShapes) {
  Graph a = colsum("x"), b = colsum("totally_different_name");
  // extra nodes first shift every node id
  Tensor z = input("zz", {3});
  Tensor x = input("q", {64, 48});
  Graph c = Graph::from_outputs({{"other", (z * 2.0).node()}, {"y", sum(x, {0}).node()}});
  Program pa = build_program(a), pb = build_program(b), pc = build_program(c);
  std::string h = tune::structural_hash(pa.kg, 0);
  EXPECT_EQ(h, tune::structural_hash(pb.kg, 0));
  bool found = false;
  for (int k = 0; k < pc.num_kernels(); ++k) found |= tune::structural_hash(pc.kg, k) == h;
  EXPECT_TRUE(found);
  Program pd = build_program(colsum("x", 64, 49));
  EXPECT_NE(h, tune::structural_hash(pd.kg, 0));
}

TEST(Tune, RecordsRoundTripThroughAFile) {
  auto recs = model_tune(odd_bmm());
  ASSERT_FALSE(recs.empty());
  std::string path = std::string(LATHE_BINARY_DIR) + "/tests/tune/roundtrip.jsonl";
  std::remove(path.c_str());
  tune::merge_records(path, recs);
  tune::merge_records(path, recs);  // same hash + target: replaced, not appended
  auto back = tune::read_records(path);
  ASSERT_EQ(back.size(), recs.size());
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(tune::to_json_line(back[i]), tune::to_json_line(recs[i]));
}

tune::Record record_for(const Program& p, int k, std::vector<std::string> schedule, double ms, double base,
                        const std::string& target) {
  tune::Record r;
  r.hash = tune::structural_hash(p.kg, k);
  r.target = target;
  r.kernel = p.kg.kernels[k].name;
  r.kind = p.kg.kernels[k].kind;
  r.schedule = std::move(schedule);
  r.ms = ms;
  r.baseline_ms = base;
  return r;
}

TEST(Tune, AppliedOnlyOnTheSameTargetAndOnlyWhenFaster) {
  Graph g = colsum("x", 40, 24);
  Program p = build_program(g);
  std::vector<std::string> sched{"reduce_rows i0 by 8", "parallel i0_b"};
  std::string before = tune::code_key(p.funcs[0]);
  {
    Program q = p;
    auto rep = tune::apply_records(q, {record_for(q, 0, sched, 1.0, 2.0, "T")}, "T");
    EXPECT_EQ(rep.applied, 1);
    EXPECT_EQ(q.funcs[0].schedule_log.front(), "reduce_rows i0 by 8");
    EXPECT_EQ(q.funcs[0].name, p.funcs[0].name);
  }
  {
    Program q = p;  // measured slower than (or as fast as) the heuristic: never applied
    auto rep = tune::apply_records(q, {record_for(q, 0, sched, 2.0, 2.0, "T")}, "T");
    EXPECT_EQ(rep.applied, 0);
    EXPECT_EQ(tune::code_key(q.funcs[0]), before);
  }
  {
    Program q = p;  // another target: ignored with a note
    auto rep = tune::apply_records(q, {record_for(q, 0, sched, 1.0, 2.0, "other")}, "T");
    EXPECT_EQ(rep.applied, 0);
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("measured on 'other'"), std::string::npos) << rep.notes[0];
    EXPECT_EQ(tune::code_key(q.funcs[0]), before);
  }
  {
    Program q = p;  // a record of this kernel's name made before the kernel changed
    tune::Record r = record_for(q, 0, sched, 1.0, 2.0, "T");
    r.hash = "0123456789abcdef0123456789abcdef";
    r.graph = "colsum.lua";
    auto rep = tune::apply_records(q, {r}, "T", "other.lua");  // another file's kernel of that name: quiet
    EXPECT_TRUE(rep.notes.empty());
    rep = tune::apply_records(q, {r}, "T", "colsum.lua");
    EXPECT_EQ(rep.applied, 0);
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("has changed"), std::string::npos) << rep.notes[0];
  }
  {
    Program q = p;  // a schedule that no longer applies: ignored with the reason
    auto rep = tune::apply_records(q, {record_for(q, 0, {"parallel r0"}, 1.0, 2.0, "T")}, "T");
    EXPECT_EQ(rep.applied, 0);
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("carries a reduction"), std::string::npos) << rep.notes[0];
  }
}

TEST(Tune, ReplayErrorsNameTheLine) {
  Program p = build_program(odd_bmm());
  EXPECT_TRUE(refused(p.kg, 0, {"spin i0"}, "unknown primitive 'spin'"));
  EXPECT_TRUE(refused(p.kg, 0, {"split i0 by x"}, "expected a number"));
  EXPECT_TRUE(refused(p.kg, 0, {"matmul mr=6 nr=12 lanes=8 kc=64 mc=36 nc=48"}, "must nest"));
  EXPECT_TRUE(refused(p.kg, 0, {"matmul mr=6"}, "give all of"));
  EXPECT_TRUE(refused(p.kg, 0, {"parallel i0", "vectorize nope"}, "schedule line 2"));
  // the packed GEMM line replays, with the lowering's own description first
  loop::LoopFunc f = tune::replay(p.kg, 0, {"matmul mr=4 nr=16 lanes=8 kc=8 mc=8 nc=32"});
  EXPECT_TRUE(loop::is_packed_matmul(f));
}

TEST(Tune, BadRecordsFileNamesTheLine) {
  std::string path = std::string(LATHE_BINARY_DIR) + "/tests/tune/bad.jsonl";
  std::ofstream(path) << "\n{\"hash\":\"a\",\"target\":\"t\",\"schedule\":[],\"ms\":1,\"baseline_ms\":2}\nnot json\n";
  try {
    tune::read_records(path);
    ADD_FAILURE();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:3:"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(tune::read_records(path + ".missing", true).empty());
  EXPECT_THROW(tune::read_records(path + ".missing"), UserError);
}

TEST(Tune, RobustMedianDropsOutliers) {
  EXPECT_DOUBLE_EQ(BackendMeasurer::robust_median({1.0, 1.1, 0.9, 1.0, 50.0}), 1.0);
  EXPECT_DOUBLE_EQ(BackendMeasurer::robust_median({2.0}), 2.0);
  EXPECT_LT(BackendMeasurer::robust_median({}), 0);
}

// a real (timed) search: few trials, on the c backend, identical kernels tuned once
TEST(Tune, MeasuredSearchTunesRepeatedKernelsOnce) {
  Tensor x = input("x", {48, 40}), y = input("y", {48, 40});
  Graph g = Graph::from_outputs({{"a", sum(x, {0}).node()}, {"b", sum(y, {0}).node()}});
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 2);
  BackendMeasurer m(p, "c", random_inputs(g, 1), 3);
  tune::TuneOptions o = model_opts(3);
  o.batch = 3;
  int reports = 0;
  o.progress = [&](const tune::Progress& pr) { ++reports; EXPECT_EQ(pr.count, 1); };
  auto r = tune::tune_program(p, {}, tune::target_of("c"), &m, o);
  std::string notes_text;
  for (auto& n : r.notes) notes_text += n + "\n";
  ASSERT_EQ(r.records.size(), 1u) << notes_text;
  EXPECT_EQ(r.records[0].measure, "time");
  EXPECT_GT(r.records[0].ms, 0);
  EXPECT_GT(r.records[0].baseline_ms, 0);
  EXPECT_EQ(r.records[0].trials, 3);
  EXPECT_GE(reports, 2);
  // a record that beat the heuristic applies to both kernels, and the result is right
  tune::Record rec = r.records[0];
  rec.ms = rec.baseline_ms / 2;
  std::vector<std::string> notes;
  int applied = 0;
  Executable e = compile_tuned(g, "c", {rec}, &notes, &applied);
  EXPECT_EQ(applied, 2);
  TensorMap in = random_inputs(g, 2);
  EXPECT_LT(max_diff(e.run(in), interpret(g, in)), 1e-3);
}

// the winner's confirmation times the kernel's own time: many back-to-back launches of the
// candidate and of the heuristic's kernel in one run of the program (warm-up, rounds, samples
// long enough to time), not one launch per whole run (which added a lone launch's fixed costs
// to both sides and squeezed dwconv5's 1.2-1.4x kernel gain under the 5% bar)
TEST(Tune, ConfirmationTimesTheKernelBackToBack) {
  Tensor x = input("x", {48, 40});
  Graph g = Graph::from_outputs({{"a", sum(x, {0}).node()}, {"b", (x * 2.0).node()}});
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 2);
  BackendMeasurer m(p, "c", random_inputs(g, 1), 3);
  tune::Space sp = tune::make_space(p.kg, 0, tune::Machine{2, 8, 16});
  tune::Built b = tune::build(p.kg, 0, sp, tune::Point(sp.knobs.size(), 0));
  auto t = m.confirm(0, {&b.f, &b.schedule});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_GT(t[0].ms, 0);
  EXPECT_GT(t[0].baseline_ms, 0);
  EXPECT_EQ(m.confirm_runs, 1);                                 // one run of the program
  EXPECT_GE(m.confirm_samples, BackendMeasurer::kConfirmRepeats);  // more rounds than a batch's 3
  EXPECT_GE(m.confirm_inner, 2);                                // each sample back to back
  // the same code on both sides: the kernel's own times agree (no fixed cost on one side)
  EXPECT_LT(t[0].ms / t[0].baseline_ms, 2.0);
  EXPECT_GT(t[0].ms / t[0].baseline_ms, 0.5);
}

// (the cut of clearly slower candidates: cut_test.cpp, on scripted times)

// the end-to-end check times whole runs of the program with the records against the heuristic's
TEST(Tune, ProgramCheckTimesWholeRunsWithTheRecords) {
  Tensor x = input("x", {64, 48});
  Graph g = Graph::from_outputs({{"a", sum(x, {0}).node()}, {"b", (x * 2.0).node()}});
  Program p = build_program(g);
  BackendMeasurer m(p, "c", random_inputs(g, 1), 3);
  tune::Space sp = tune::make_space(p.kg, 0, tune::Machine{2, 8, 16});
  tune::Record rec;
  rec.hash = tune::structural_hash(p.kg, 0);
  rec.target = tune::target_of("c");
  rec.kernel = p.kg.kernels[0].name;
  rec.schedule = tune::build(p.kg, 0, sp, tune::Point(sp.knobs.size(), 0)).schedule;
  rec.ms = 1;
  rec.baseline_ms = 2;
  auto c = m.check_program({rec}, tune::target_of("c"), 5, 10);
  EXPECT_EQ(c.applied, 1);
  EXPECT_EQ(c.pairs, 5);
  EXPECT_GT(c.ratio, 0);
  EXPECT_GT(c.heuristic_ms, 0);
  EXPECT_GT(c.tuned_ms, 0);
  // a record of another target applies to nothing: nothing is timed
  c = m.check_program({rec}, "other", 5, 10);
  EXPECT_EQ(c.applied, 0);
  EXPECT_EQ(c.pairs, 0);
}

// --compile-limit: each candidate compiles in a child process, killed past the limit; the
// candidate fails (is not measured) and the others are measured as before
TEST(Tune, ACandidateOverTheCompileLimitIsDropped) {
  // a shape of its own (no kernel cache entry from an earlier run of this test)
  Tensor x = input("x", {24, 1000 + (int64_t)(getpid() % 997)});
  Graph g = Graph::from_outputs({{"a", sum(x, {0}).node()}});
  Program p = build_program(g);
  BackendMeasurer m(p, "c", random_inputs(g, 1), 3);
  tune::Space sp = tune::make_space(p.kg, 0, tune::Machine{2, 8, 16});
  tune::Built b = tune::build(p.kg, 0, sp, tune::Point(sp.knobs.size(), 0));
  m.compile_limit_s = 0.001;  // no C compile is that fast
  auto t = m.measure_each(0, {{&b.f, &b.schedule}});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_LT(t[0].ms, 0);
  EXPECT_EQ(m.compile_killed, 1);
  m.compile_limit_s = 60;
  t = m.measure_each(0, {{&b.f, &b.schedule}, {&p.funcs[0], &b.schedule}});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(m.compile_killed, 0);
  EXPECT_GT(t[0].ms, 0);
  EXPECT_GT(t[1].ms, 0);
  EXPECT_GT(t[0].baseline_ms, 0);
}

// a measurer whose every batch takes `seconds` (compiling and timing, as on a loaded machine)
class SlowMeasurer : public tune::Measurer {
 public:
  explicit SlowMeasurer(double seconds) : seconds_(seconds) {}
  std::vector<double> measure(int, const std::vector<const loop::LoopFunc*>& c, double* baseline_ms) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    if (baseline_ms) *baseline_ms = 2;
    return std::vector<double>(c.size(), 1);
  }

 private:
  double seconds_;
};

// --time-budget bounds the whole run: no batch or confirmation starts that would end past it
// (a kernel started near the end used to run a batch and a confirmation over it)
TEST(Tune, TimeBudgetIsNeverOverrun) {
  Tensor x = input("x", {48, 40}), y = input("y", {48, 41}), z = input("z", {48, 43});
  Graph g = Graph::from_outputs({{"a", sum(x, {0}).node()}, {"b", sum(y, {0}).node()}, {"c", sum(z, {0}).node()}});
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 3);
  SlowMeasurer m(0.3);
  tune::TuneOptions o = model_opts(48);
  o.budget_s = 1.2;
  auto t0 = std::chrono::steady_clock::now();
  auto r = tune::tune_program(p, {}, "T", &m, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(s, o.budget_s + 0.05);
  ASSERT_GE(r.records.size(), 1u);  // the first kernel had the time for a batch and its confirmation
  std::string notes;
  for (auto& n : r.notes) notes += n + "\n";
  EXPECT_NE(notes.find("time budget spent before"), std::string::npos) << notes;
}

TEST(Tune, StopFlagEndsTheSearchWithWhatWasFound) {
  std::atomic<bool> stop{true};
  tune::TuneOptions o = model_opts();
  o.stop = &stop;
  Program p = build_program(colsum());
  auto r = tune::tune_program(p, {}, "T", nullptr, o);
  EXPECT_TRUE(r.interrupted);
  EXPECT_TRUE(r.records.empty());
}

// a pool as app/tune_mpi.cpp's ranks see it: each batch cut into parts, each part rebuilt
// from its schedule lines (replay) and estimated apart, its own baseline beside it: the
// search writes the same records as with one ModelMeasurer, and every candidate replays
class SplittingPool : public tune::Measurer {
 public:
  SplittingPool(const Program& p, const tune::Machine& m) : p_(p), m_(m) {}
  std::vector<double> measure(int, const std::vector<const loop::LoopFunc*>&, double*) override {
    ADD_FAILURE() << "the search must call measure_each";
    return {};
  }
  std::vector<tune::Timing> measure_each(int kernel, const std::vector<tune::Candidate>& cs) override {
    std::vector<tune::Timing> out;
    for (size_t i = 0; i < cs.size(); i += 3) {
      std::vector<loop::LoopFunc> fs;
      std::vector<tune::Candidate> part;
      for (size_t j = i; j < std::min(cs.size(), i + 3); ++j) {
        fs.push_back(tune::replay(p_.kg, kernel, *cs[j].schedule));
        fs.back().name = cs[j].f->name;
        EXPECT_EQ(tune::code_key(fs.back()), tune::code_key(*cs[j].f));
      }
      for (size_t j = 0; j < fs.size(); ++j) part.push_back({&fs[j], cs[i + j].schedule});
      tune::ModelMeasurer mm(p_, {}, m_);
      for (auto& t : mm.measure_each(kernel, part)) out.push_back(t);
      ++parts;
    }
    return out;
  }
  std::string kind() const override { return "model"; }
  int parts = 0;

 private:
  const Program& p_;
  tune::Machine m_;
};

TEST(Tune, ModelSearchGivesTheSameRecordsWhenItsBatchesAreSplit) {
  for (const Graph& g : {colsum(), softmax77(), odd_bmm()}) {
    Program p = build_program(g);
    tune::TuneOptions o = model_opts(4);
    std::vector<std::string> written;
    o.on_record = [&](const tune::Record& r) { written.push_back(tune::to_json_line(r)); };
    auto one = tune::tune_program(p, {}, "T", nullptr, o).records;
    SplittingPool pool(p, o.machine);
    auto split = tune::tune_program(p, {}, "T", &pool, o).records;
    EXPECT_GT(pool.parts, 2);
    ASSERT_EQ(one.size(), split.size());
    ASSERT_EQ(written.size(), 2 * one.size());  // on_record: each record as it is final
    for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(tune::to_json_line(one[i]), tune::to_json_line(split[i]));
  }
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// A late MobileNet 1x1 convolution as a matmul: 49 positions x 320 -> 1280 channels, its
// weights (1.6 MB) packed when the program is built ("B prepacked").
Program pointwise_with_packed_weights() {
  HostTensor w(DType::F32, {320, 1280});
  for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, std::sin(0.37 * static_cast<double>(i)));
  Tensor x = input("x", {49, 320});
  // weights are prepacked by default when larger than the last-level cache: ask for all
  setenv("LATHE_PREPACK", "all", 1);
  Program p = build_program(Graph::from_outputs({{"y", matmul(x, from_host(w)).node()}}));
  unsetenv("LATHE_PREPACK");
  return p;
}

loop::MatmulParams params_of(const loop::LoopFunc& f) {
  loop::MatmulParams mp;
  long mr = 0, nr = 0, kc = 0, mc = 0, nc = 0;
  EXPECT_EQ(std::sscanf(f.schedule_log.at(0).c_str(), "matmul: MR=%ld NR=%ld KC=%ld MC=%ld NC=%ld", &mr, &nr, &kc, &mc, &nc), 5);
  mp.mr = (int)mr, mp.nr = (int)nr, mp.kc = (int)kc, mp.mc = (int)mc, mp.nc = (int)nc;
  return mp;
}

// Measured on MobileNetV2 (2 cores, AVX2): the model called a KC=512 candidate of this
// kernel 7% faster than the heuristic; it ran ~1.8x slower, because another KC loses the
// prepacked weights and copies 1.6 MB of B on every run. The model now charges that copy
// (at memory speed) to the candidate and not to the prepacked heuristic.
TEST(TuneModel, RanksThePrepackedHeuristicAheadOfABlockingThatCopiesTheWeights) {
  Program p = pointwise_with_packed_weights();
  int k = -1;
  for (int i = 0; i < p.num_kernels(); ++i)
    if (p.kg.kernels[i].kind == "matmul") k = i;
  ASSERT_GE(k, 0);
  const loop::LoopFunc& heur = p.funcs[k];
  ASSERT_NE(heur.schedule_log.at(0).find(" B prepacked"), std::string::npos) << heur.schedule_log[0];
  loop::MatmulParams mp = params_of(heur);
  mp.lanes = 8;
  mp.kc = 320;  // all of K in one block: fewer write-backs, but not the prepacked KC
  loop::LoopFunc cand = loop::lower_matmul_kernel(p.kg, k, mp);
  ASSERT_EQ(cand.schedule_log.at(0).find(" B prepacked"), std::string::npos) << cand.schedule_log[0];
  tune::Machine m{2, 8, 16};
  double h = tune::estimate(heur, p.kg, {}, m).ms, c = tune::estimate(cand, p.kg, {}, m).ms;
  EXPECT_LT(h * 1.2, c) << "heuristic " << h << " ms, candidate " << c << " ms";
  // the candidate as its record's program builds it (the weights packed once for KC 320:
  // loop::repack_for) is charged no copy, and the model-only search estimates it so
  KernelGraph kg = p.kg;
  ASSERT_TRUE(loop::repack_for(kg, k, mp));
  loop::LoopFunc repacked = loop::lower_matmul_kernel(kg, k, mp);
  ASSERT_NE(repacked.schedule_log.at(0).find(" B prepacked"), std::string::npos) << repacked.schedule_log[0];
  EXPECT_LT(tune::estimate(repacked, kg, {}, m).ms, c);
  // and whatever the model-only search applies reads prepacked weights, in its own layout
  auto recs = tune::tune_program(p, {}, "T", nullptr, model_opts(6)).records;
  for (auto& r : recs)
    if (r.kind == "matmul" && r.ms < r.baseline_ms * tune::kApplyMargin) {
      KernelGraph applied = p.kg;
      loop::MatmulParams rp;
      ASSERT_TRUE(tune::parse_matmul_line(r.schedule.at(0), rp)) << tune::to_json_line(r);
      loop::repack_for(applied, k, rp);
      loop::LoopFunc f = tune::replay(applied, k, r.schedule);
      EXPECT_NE(f.schedule_log.at(0).find(" B prepacked"), std::string::npos) << tune::to_json_line(r);
    }
}

// An MR=2 NR=16 register tile keeps 4 accumulators: each k step waits on the FMA latency.
// Measured ~1.6x slower than the heuristic's MR=6 on MobileNetV2's last 1x1 convolution;
// the model called it 6% faster (issue rate only). The host's tile at its width on its
// machine (AVX-512: MR=7 NR=32 of 16 lanes, 32 registers; MR=2 keeps 4 accumulators there
// too), and AVX2's 6x16 of 8 lanes on a 16-register machine, on any host. (The host's
// tile at 8 lanes on AVX2's machine needs 33 registers: the model charged the heuristic
// a spill and called MR=2 3x faster.)
TEST(TuneModel, ATileWithFewAccumulatorsIsLatencyBound) {
  Program p = pointwise_with_packed_weights();
  int k = -1;
  for (int i = 0; i < p.num_kernels(); ++i)
    if (p.kg.kernels[i].kind == "matmul") k = i;
  ASSERT_GE(k, 0);
  loop::MatmulParams host = params_of(p.funcs[k]);
  host.lanes = loop::host_matmul_params().lanes;
  ASSERT_GE(host.mr, 4);
  ASSERT_EQ(host.nr % host.lanes, 0);
  loop::MatmulParams avx2 = host;
  avx2.mr = 6, avx2.nr = 16, avx2.lanes = 8;
  avx2.mc = host.mc / host.mr * 6, avx2.nc = host.nc / host.nr * 16;
  const tune::Machine host_m{2, host.lanes, host.lanes >= 16 ? 32 : 16}, avx2_m{2, 8, 16};
  for (auto [mp, m] : {std::pair{host, host_m}, std::pair{avx2, avx2_m}}) {
    loop::MatmulParams small = mp;
    small.mr = 2;
    small.mc = std::max(2, mp.mc / mp.mr * 2);
    loop::LoopFunc heur = loop::lower_matmul_kernel(p.kg, k, mp), cand = loop::lower_matmul_kernel(p.kg, k, small);
    double h = tune::estimate(heur, p.kg, {}, m).ms, c = tune::estimate(cand, p.kg, {}, m).ms;
    EXPECT_LT(h * 1.2, c) << "MR=" << mp.mr << " NR=" << mp.nr << " lanes=" << mp.lanes << ": " << h << " ms, MR=2: " << c
                          << " ms";
    EXPECT_EQ(tune::estimate(heur, p.kg, {}, m).features.at(9), 0.0) << "MR=" << mp.mr << " NR=" << mp.nr;  // no spill
  }
}

// MR=4 NR=24 on AVX2 needs all 16 vector registers (12 accumulators, 3 B vectors, a
// broadcast): LLVM spills two accumulators per k step (seen in its assembly) and the kernel
// ran 1.8x slower than MR=6 NR=16 (15 registers) on MobileNetV2's 1x1 convolutions, where
// the model had called it 10% faster (no edge rows for M = 32).
TEST(TuneModel, ATileNeedingEveryRegisterSpills) {
  Tensor x = input("x", {32, 144}), w = input("w", {144, 196});
  Program p = build_program(Graph::from_outputs({{"y", matmul(x, w).node()}}));
  ASSERT_EQ(p.num_kernels(), 1);
  ASSERT_EQ(p.kg.kernels[0].kind, "matmul");
  loop::MatmulParams a;  // 6 x 16: 15 registers
  a.mr = 6, a.nr = 16, a.lanes = 8, a.kc = 144, a.mc = 36, a.nc = 208;
  loop::MatmulParams b = a;  // 4 x 24: 16
  b.mr = 4, b.nr = 24, b.mc = 32, b.nc = 216;
  tune::Machine m{2, 8, 16};
  double ea = tune::estimate(loop::lower_matmul_kernel(p.kg, 0, a), p.kg, {}, m).ms;
  double eb = tune::estimate(loop::lower_matmul_kernel(p.kg, 0, b), p.kg, {}, m).ms;
  EXPECT_LT(ea * 1.2, eb) << "6x16 " << ea << " ms, 4x24 " << eb << " ms";
}

// A depthwise 3x3 convolution (MobileNet's, odd 29x29): the heuristic's depthwise lowering
// is outside the search space, whose plain-reduction candidates measured ~1.7x slower on
// MobileNetV2 (0.38-0.48 ms against 0.23-0.28 ms): the model must rank the heuristic ahead,
// so a --measure model record of it never claims to beat it (a guard: it held before).
TEST(TuneModel, DepthwiseConvolutionKeepsTheHeuristic) {
  Tensor x = input("x", {1, 32, 29, 29}), w = input("w", {32, 1, 3, 3});
  Conv2dOptions o;
  o.padding = {1, 1};
  o.groups = 32;
  Graph g = Graph::from_outputs({{"y", conv2d(x, w, std::nullopt, o).node()}});
  Program p = build_program(g);
  bool depthwise = false;
  for (auto& f : p.funcs) depthwise |= loop::is_depthwise(f);
  ASSERT_TRUE(depthwise);
  auto recs = model_tune(g);
  ASSERT_FALSE(recs.empty());
  for (auto& r : recs) EXPECT_GE(r.ms, r.baseline_ms * tune::kApplyMargin) << tune::to_json_line(r);
}

// Records of --measure model are predictions: never applied from the default records file
// (with a note), applied from a file the user names (with a note that they are predictions).
TEST(TuneRecords, ModelRecordsApplyOnlyFromANamedFile) {
  Graph g = colsum("x", 40, 24);
  Program p = build_program(g);
  std::string before = tune::code_key(p.funcs[0]);
  tune::Record r = record_for(p, 0, {"reduce_rows i0 by 8", "parallel i0_b"}, 1.0, 2.0, "T");
  r.measure = "model";
  // the default file (LATHE_CACHE_DIR is the test's): load_tuned("") marks its records
  std::remove(tune::default_records_path().c_str());
  tune::merge_records(tune::default_records_path(), {r});
  auto from_default = tune::load_tuned("");
  ASSERT_EQ(from_default.size(), 1u);
  EXPECT_TRUE(from_default[0].from_default);
  {
    Program q = p;
    auto rep = tune::apply_records(q, from_default, "T");
    EXPECT_EQ(rep.applied, 0);
    EXPECT_EQ(tune::code_key(q.funcs[0]), before);
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("cost-model predictions"), std::string::npos) << rep.notes[0];
    EXPECT_NE(rep.notes[0].find("--tuned"), std::string::npos) << rep.notes[0];
  }
  {
    Program q = p;  // the same file named: applied, with a note
    auto named = tune::load_tuned(tune::default_records_path());
    ASSERT_EQ(named.size(), 1u);
    EXPECT_FALSE(named[0].from_default);
    auto rep = tune::apply_records(q, named, "T");
    EXPECT_EQ(rep.applied, 1);
    EXPECT_EQ(q.funcs[0].schedule_log.front(), "reduce_rows i0 by 8");
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("predictions"), std::string::npos) << rep.notes[0];
  }
  {
    Program q = p;  // a measured record in the default file applies as before
    tune::Record t = from_default[0];
    t.measure = "time";
    auto rep = tune::apply_records(q, {t}, "T");
    EXPECT_EQ(rep.applied, 1);
    EXPECT_TRUE(rep.notes.empty());
  }
  std::remove(tune::default_records_path().c_str());
}

}  // namespace
}  // namespace lathe
