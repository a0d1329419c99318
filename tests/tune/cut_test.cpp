// cut_test.cpp — the cut of clearly slower candidates (core/tune/sampler.h), on scripted
// times: no claim here depends on the machine's timing. The sampler alone (a 10x slower
// candidate is cut after about two samples, a 1.1x slower one is not, nor one a preempted
// sample blurred, the confirmation never cuts, a cut candidate keeps its time), the
// BackendMeasurer with a scripted clock over real kernels (the wiring: measure_each cuts,
// confirm does not), and a search whose measurer cuts (every trial keeps a time).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/tune_measure.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "core/runtime/random.h"
#include "core/tune/sampler.h"
#include "core/tune/search.h"

namespace lathe {
namespace {

// Samples a batch of candidates with fixed times per launch (ms[c]; the heuristic last),
// with extra(c, i) added to the i-th launch of c when given.
struct Scripted {
  std::vector<double> ms;
  std::function<double(size_t, int)> extra;
  tune::ScriptedClock clock;
  std::vector<bool> wrong;
  tune::SampleResult run(const tune::SampleOptions& o) {
    clock.launch_ms = [this](size_t c, int i) { return ms[c] + (extra ? extra(c, i) : 0.0); };
    size_t n = ms.size() - 1;
    wrong.resize(n, false);
    return tune::sample_batch(
        n, [&](size_t c) { clock.launched(c); }, [&](size_t c) { return (bool)wrong[c]; }, [&] { return clock.now(); }, o);
  }
  int launches(size_t c) const { return c < clock.launches.size() ? clock.launches[c] : 0; }
};

tune::SampleOptions opts(int repeats = 7, bool cut_slow = true, double best_ratio = 0) {
  tune::SampleOptions o;
  o.repeats = repeats;
  o.sample_ms = 1.0;
  o.cut_slow = cut_slow;
  o.best_ratio = best_ratio;
  return o;
}

double median(std::vector<double> v) { return BackendMeasurer::robust_median(std::move(v)); }

TEST(TuneCut, TenTimesSlowerIsCutAfterAboutTwoSamples) {
  Scripted s{{0.1, 1.0, 0.1}};  // the heuristic's own speed, 10x slower; the heuristic
  tune::SampleResult r = s.run(opts());
  ASSERT_EQ(r.cut.size(), 2u);
  EXPECT_FALSE(r.cut[0]);
  EXPECT_TRUE(r.cut[1]);
  EXPECT_LE(r.samples[1].size(), 2u);
  EXPECT_EQ(r.samples[0].size(), 7u);
  EXPECT_EQ(r.samples[2].size(), 7u);
  // its launches: the warm-up and two lone timed ones, not 7 samples of `inner` launches
  EXPECT_LE(s.launches(1), 3);
  EXPECT_GE(s.launches(0), 7 * r.inner);
  // it keeps its time: 10x the heuristic's (the cost model learns from it)
  EXPECT_NEAR(median(r.samples[1]), 1.0, 1e-9);
  EXPECT_NEAR(median(r.samples[0]), 0.1, 1e-9);
  EXPECT_GE(r.inner, 10);  // sample_ms / the heuristic's launch (10, or 11 by rounding)
  EXPECT_LE(r.inner, 11);
}

TEST(TuneCut, ThreeTimesSlowerIsCutAfterItsFirstTwoSamples) {
  // under the warm cut (4x), over the round cut (2x): its first sample and one more at once
  Scripted s{{0.3, 0.1, 0.1}};
  tune::SampleResult r = s.run(opts());
  EXPECT_TRUE(r.cut[0]);
  EXPECT_EQ(r.samples[0].size(), 2u);
  EXPECT_FALSE(r.cut[1]);
  EXPECT_NEAR(median(r.samples[0]), 0.3, 1e-9);
}

TEST(TuneCut, ALittleSlowerIsNotCut) {
  Scripted s{{0.11, 0.19, 0.1}};  // 1.1x, and 1.9x: under the 2x bar
  tune::SampleResult r = s.run(opts());
  EXPECT_FALSE(r.cut[0]);
  EXPECT_FALSE(r.cut[1]);
  EXPECT_EQ(r.samples[0].size(), 7u);
  EXPECT_EQ(r.samples[1].size(), 7u);
  EXPECT_NEAR(median(r.samples[0]), 0.11, 1e-9);
}

TEST(TuneCut, OnePreemptedSampleDoesNotCut) {
  // the 1.1x candidate's first-round sample is blurred (a time slice lost: +5 ms in its
  // first timed launch: its 4th, after the warm-up, a lone timed one and the sample's
  // untimed one): the sample taken at once is clean
  Scripted s{{0.11, 0.1}};
  s.extra = [](size_t c, int i) { return c == 0 && i == 3 ? 5.0 : 0.0; };
  tune::SampleResult r = s.run(opts());
  EXPECT_FALSE(r.cut[0]);
  EXPECT_EQ(r.samples[0].size(), 8u);  // 7 rounds and the one taken at once
  EXPECT_NEAR(median(r.samples[0]), 0.11, 1e-9);  // the blurred sample is an outlier
}

TEST(TuneCut, AColdFirstLaunchOfTheHeuristicDoesNotRaiseTheBar) {
  // the heuristic's first timed launch pays a cold cost (a thread team waking): 10x
  Scripted s{{1.0, 0.1}};
  s.extra = [](size_t c, int i) { return c == 1 && i == 1 ? 0.9 : 0.0; };
  tune::SampleResult r = s.run(opts());
  EXPECT_TRUE(r.cut[0]);
  EXPECT_LE(r.samples[0].size(), 2u);
}

TEST(TuneCut, TheSearchsBestLowersTheBar) {
  // the search found a candidate at half the heuristic's time: a candidate as fast as the
  // heuristic is 2x that best and cut; 1.5x its time is not
  Scripted cut{{0.105, 0.1}};
  EXPECT_TRUE(cut.run(opts(7, true, 0.5)).cut[0]);
  Scripted kept{{0.075, 0.1}};
  EXPECT_FALSE(kept.run(opts(7, true, 0.5)).cut[0]);
  // a best ratio over 1 (the heuristic is faster) does not raise the bar over the heuristic
  Scripted slow{{0.3, 0.1}};
  EXPECT_TRUE(slow.run(opts(7, true, 3.0)).cut[0]);
}

TEST(TuneCut, TheConfirmationNeverCuts) {
  Scripted s{{1.0, 0.1}};
  tune::SampleResult r = s.run(opts(15, /*cut_slow=*/false));
  EXPECT_FALSE(r.cut[0]);
  EXPECT_EQ(r.samples[0].size(), 15u);
  EXPECT_NEAR(median(r.samples[0]), 1.0, 1e-9);
}

TEST(TuneCut, AWrongCandidateIsNeitherTimedNorCut) {
  Scripted s{{1.0, 0.1, 0.1}};
  s.wrong = {true, false};
  tune::SampleResult r = s.run(opts());
  EXPECT_TRUE(r.wrong[0]);
  EXPECT_FALSE(r.cut[0]);
  EXPECT_TRUE(r.samples[0].empty());
  EXPECT_EQ(r.samples[1].size(), 7u);
}

// The BackendMeasurer's wiring, on real kernels (their outputs still checked) read through
// a scripted clock: measure_each cuts the slow candidate and keeps its time, confirm does not.
TEST(TuneCut, TheMeasurerCutsInABatchAndNotInTheConfirmation) {
  Tensor x = input("x", {64, 48});
  Graph g = Graph::from_outputs({{"a", sum(x, {0}).node()}});
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 1);
  BackendMeasurer m(p, "c", random_inputs(g, 1), 5);
  loop::LoopFunc same = p.funcs[0];
  loop::LoopFunc slow = loop::lower_kernel(p.kg, 0, /*plain=*/true);
  slow.name = same.name;
  std::vector<std::string> none;
  tune::ScriptedClock clock;  // the heuristic is launch index 2 (after the two candidates)
  clock.launch_ms = [](size_t c, int) { return c == 2 ? 0.02 : c == 0 ? 0.021 : 0.2; };
  m.scripted = &clock;
  std::vector<tune::Timing> t = m.measure_each(0, {{&same, &none}, {&slow, &none}});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(m.cut, 1);
  ASSERT_EQ(m.samples_each.size(), 2u);
  EXPECT_EQ(m.samples_each[0], 5);
  EXPECT_LE(m.samples_each[1], 2);
  EXPECT_NEAR(t[0].ms, 0.021, 1e-9);
  EXPECT_NEAR(t[1].ms, 0.2, 1e-9);  // cut, and still timed
  EXPECT_NEAR(t[0].baseline_ms, 0.02, 1e-9);
  // the winner's confirmation: every round, however slow
  clock = tune::ScriptedClock{};  // the slow candidate alone, the heuristic index 1
  clock.launch_ms = [](size_t c, int) { return c == 1 ? 0.02 : 0.2; };
  std::vector<tune::Timing> c = m.confirm(0, {&slow, &none});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(m.cut, 0);
  EXPECT_GE(m.confirm_samples, BackendMeasurer::kConfirmRepeats);
  EXPECT_NEAR(c[0].ms, 0.2, 1e-9);
  EXPECT_NEAR(c[0].baseline_ms, 0.02, 1e-9);
}

// A measurer on scripted times (by the candidate's code: a third of them 10x slower, the rest
// within 20% of the heuristic) that samples as the BackendMeasurer does, cut included.
class ScriptedMeasurer : public tune::Measurer {
 public:
  std::vector<double> measure(int, const std::vector<const loop::LoopFunc*>& fs, double* baseline_ms) override {
    std::vector<double> ms;
    for (const loop::LoopFunc* f : fs) {
      size_t h = std::hash<std::string>()(tune::code_key(*f));
      ms.push_back(h % 3 == 0 ? 1.0 : 0.085 + 0.005 * (double)(h / 3 % 7));
    }
    ms.push_back(0.1);  // the heuristic
    tune::ScriptedClock clock;
    clock.launch_ms = [&](size_t c, int) { return ms[c]; };
    tune::SampleOptions o;
    o.repeats = 5;
    o.best_ratio = best_ratio;
    tune::SampleResult r = tune::sample_batch(
        fs.size(), [&](size_t c) { clock.launched(c); }, [](size_t) { return false; }, [&] { return clock.now(); }, o);
    std::vector<double> out;
    for (size_t c = 0; c < fs.size(); ++c) {
      out.push_back(BackendMeasurer::robust_median(r.samples[c]));
      cut += r.cut[c];
      if (r.cut[c]) cut_ms.push_back(out.back());
    }
    *baseline_ms = BackendMeasurer::robust_median(r.samples.back());
    return out;
  }
  int cut = 0;
  std::vector<double> cut_ms;
};

TEST(TuneCut, ACutCandidateKeepsItsTimeInTheSearch) {
  Tensor x = input("x", {96, 64});
  Graph g = Graph::from_outputs({{"s", sum(x, {0}).node()}});
  Program p = build_program(g);
  ScriptedMeasurer m;
  tune::TuneOptions o;
  o.trials = 24;
  o.machine = tune::Machine{2, 8, 16};
  std::vector<tune::Trial> trials;
  o.on_trial = [&](const tune::Trial& t) { trials.push_back(t); };
  tune::TuneResult r = tune::tune_program(p, {}, "test-target", &m, o);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_GT(m.cut, 0);
  for (double ms : m.cut_ms) EXPECT_NEAR(ms, 1.0, 1e-9);
  // every trial, cut or not, has a time (what the cost model is fitted to), and the cut
  // ones are among them at their own time
  int slow = 0;
  for (auto& t : trials) {
    EXPECT_GT(t.ms, 0);
    slow += t.ms > 0.5;
  }
  EXPECT_EQ(slow, m.cut);
  EXPECT_LT(r.records[0].ms, 1.0);  // the winner is not a cut one
  EXPECT_LE(r.records[0].ms, r.records[0].baseline_ms * 1.05);
}

}  // namespace
}  // namespace lathe
