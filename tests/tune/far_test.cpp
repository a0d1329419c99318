// far_test.cpp — a measured search does not spend its budget on candidates the analytic
// estimate puts far behind the heuristic: the cost model does not extrapolate its fitted
// correction past the measured points (a plain convolution nest estimated at 14 s was ranked
// first after a fit on packed GEMMs, ran 11 s a launch and ate 45 s of a 300 s budget), such
// candidates are never handed to the measurer, one slow batch does not end the budget for
// the kernels after it, and the end-to-end check runs the records file as --tuned will.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/schedule/program.h"
#include "core/tune/model.h"
#include "core/tune/records.h"
#include "core/tune/search.h"

namespace lathe {
namespace {

TEST(TuneFar, TheFittedCorrectionIsNotExtrapolated) {
  // measured: every candidate ~18 ms whatever its estimate (3-5 ms): a fit whose
  // log(estimate) weight is near -1
  tune::CostModel m;
  for (int i = 0; i < 12; ++i) {
    double est = 3.0 + 0.2 * i;
    m.add({std::log(est), 1.0 + 0.01 * (i % 3)}, std::log(18.0 / est));
  }
  tune::Estimate near{4.0, {std::log(4.0), 1.01}};
  EXPECT_NEAR(m.predict(near), 18.0, 2.0);
  // a nest estimated at 14 s keeps (at least) the correction at the edge of the range
  tune::Estimate far{14000.0, {std::log(14000.0), 1.01}};
  EXPECT_GT(m.predict(far), 14000.0) << "the fit extrapolated to " << m.predict(far) << " ms";
}

// records the estimate of every candidate it is given; candidates run 1 ms against the
// heuristic's 2
class EstimatingMeasurer : public tune::Measurer {
 public:
  EstimatingMeasurer(const Program& p, const tune::Machine& m) : p_(p), m_(m) {}
  std::vector<double> measure(int kernel, const std::vector<const loop::LoopFunc*>& c, double* baseline_ms) override {
    for (auto* f : c) seen.push_back(tune::estimate(*f, p_.kg, {}, m_).ms);
    if (baseline_ms) *baseline_ms = 2;
    (void)kernel;
    return std::vector<double>(c.size(), 1);
  }
  std::vector<double> seen;

 private:
  const Program& p_;
  tune::Machine m_;
};

TEST(TuneFar, CandidatesFarBehindTheHeuristicAreNeverMeasured) {
  // a 3x3 convolution (the GEMM nest) whose plain nests estimate far slower
  Tensor x = input("x", {1, 32, 30, 30}), w = input("w", {32, 32, 3, 3});
  Conv2dOptions co;
  co.padding = {1, 1};
  Graph g = Graph::from_outputs({{"y", conv2d(x, w, std::nullopt, co).node()}});
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 1);
  tune::TuneOptions o;
  o.trials = 48;
  o.machine = tune::Machine{2, 8, 16};
  EstimatingMeasurer m(p, o.machine);
  tune::TuneResult r = tune::tune_program(p, {}, "T", &m, o);
  const double base = tune::estimate(p.funcs[0], p.kg, {}, o.machine).ms;
  ASSERT_FALSE(m.seen.empty());
  for (double e : m.seen) EXPECT_LE(e, tune::kFarFromHeuristic * base * (1 + 1e-9));
  // the space has such candidates, and the run says how many it left out
  bool noted = false;
  for (auto& n : r.notes) noted |= n.find("not measured") != std::string::npos;
  EXPECT_TRUE(noted);
  ASSERT_EQ(r.records.size(), 1u);
}

// the first batch of the first kernel takes `slow` seconds, every other `fast`
class OneSlowBatch : public tune::Measurer {
 public:
  std::vector<double> measure(int kernel, const std::vector<const loop::LoopFunc*>& c, double* baseline_ms) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(calls++ == 0 ? 0.6 : 0.02));
    if (baseline_ms) *baseline_ms = 2;
    ++per_kernel[kernel];
    return std::vector<double>(c.size(), 1);
  }
  int calls = 0;
  std::map<int, int> per_kernel;
};

TEST(TuneFar, OneSlowBatchDoesNotEndTheBudgetForTheKernelsAfterIt) {
  // 4 distinct column sums, equal shares of 2.4 s: the first kernel's slow batch (0.6 s)
  // would have made every later kernel wait for a 0.6 s window at the end
  std::vector<std::pair<std::string, const Node*>> outs;
  for (int64_t c : {40, 41, 43, 47})
    outs.emplace_back("s" + std::to_string(c), sum(input("x" + std::to_string(c), {48, c}), {0}).node());
  Graph g = Graph::from_outputs(outs);
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 4);
  tune::TuneOptions o;
  o.trials = 1000;
  o.batch = 6;
  o.budget_s = 2.4;
  o.machine = tune::Machine{2, 8, 16};
  OneSlowBatch m;
  auto t0 = std::chrono::steady_clock::now();
  tune::TuneResult r = tune::tune_program(p, {}, "T", &m, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(s, o.budget_s + 0.5);
  EXPECT_EQ(r.records.size(), 4u);
  for (auto& [k, n] : m.per_kernel) EXPECT_GE(n, 2) << "kernel " << k;
}

// The end-to-end check times the program as --tuned will run it: the file's records for the
// other kernels with this run's, a fresh record replacing the file's of its hash and target
TEST(TuneFar, TheCheckedRecordsAreTheFilesWithThisRunsMergedIn) {
  auto rec = [](std::string hash, std::string target, double ms) {
    tune::Record r;
    r.hash = std::move(hash);
    r.target = std::move(target);
    r.ms = ms;
    r.baseline_ms = 2;
    return r;
  };
  std::vector<tune::Record> file = {rec("h1", "T", 1), rec("h2", "T", 1.5), rec("h2", "U", 1)};
  file[1].from_default = true;
  std::vector<tune::Record> all = tune::merged_records(file, {rec("h2", "T", 0.5), rec("h3", "T", 1)});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].hash, "h1");                     // kept: another kernel's record
  EXPECT_EQ(all[1].ms, 0.5);                        // replaced by this run's
  EXPECT_TRUE(all[1].from_default);                 // (still read from the default file)
  EXPECT_EQ(all[2].target, "U");                    // another target's: kept, not applied here
  EXPECT_EQ(all[3].hash, "h3");                     // a new kernel's: appended
}

}  // namespace
}  // namespace lathe
