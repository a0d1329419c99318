// peel_space_test.cpp — the tuner's peel knob (space.cpp): kernels whose vectorized
// innermost loops the vector width does not divide (a softmax over 77) get it, its points
// log "peel LOOP by W [masked]" and replay to the same code, the cost model charges the
// compiler's scalar remainder (13 of 77 elements) and --measure model picks a peeled
// schedule, deterministically; kernels of whole vectors do not get the knob.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/schedule/program.h"
#include "core/tune/model.h"
#include "core/tune/records.h"
#include "core/tune/search.h"

namespace lathe {
namespace {

const tune::Machine kMachine{2, 8, 16};

Program softmax_prog(int64_t rows, int64_t n) {
  Tensor x = input("x", {12, rows, n});
  return build_program(Graph::from_outputs({{"y", softmax(x, -1).node()}}));
}

bool has_peel(const std::vector<std::string>& schedule) {
  return std::any_of(schedule.begin(), schedule.end(), [](const std::string& l) { return l.rfind("peel ", 0) == 0; });
}

tune::Built build_with(const Program& p, const tune::Space& s, int64_t peel) {
  tune::Point pt(s.knobs.size(), 0);
  int k = s.knob("peel");
  const auto& v = s.knobs.at(k).values;
  pt[k] = int(std::find(v.begin(), v.end(), peel) - v.begin());
  EXPECT_LT(pt[k], (int)v.size()) << peel;
  tune::Built b = tune::build(p.kg, 0, s, pt);
  b.f.name = p.funcs[0].name;
  return b;
}

TEST(TunePeel, SoftmaxOver77HasTheKnobAndItsPointsReplay) {
  Program p = softmax_prog(77, 77);
  tune::Space s = tune::make_space(p.kg, 0, kMachine);
  ASSERT_GE(s.knob("peel"), 0);
  for (int64_t w : {8, -8, 16}) {
    tune::Built b = build_with(p, s, w);
    ASSERT_TRUE(has_peel(b.schedule)) << w;
    std::string want = "peel r1 by " + std::to_string(std::abs(w)) + (w < 0 ? " masked" : "");
    EXPECT_NE(std::find(b.schedule.begin(), b.schedule.end(), want), b.schedule.end()) << w;
    loop::LoopFunc again = tune::replay(p.kg, 0, b.schedule);
    again.name = b.f.name;
    EXPECT_EQ(tune::code_key(again), tune::code_key(b.f));
  }
  EXPECT_THROW(tune::replay(p.kg, 0, {"peel r1 by 8 twice"}), UserError);
  EXPECT_THROW(tune::replay(p.kg, 0, {"peel r1 by 6"}), UserError);
}

TEST(TunePeel, ModelChargesTheScalarRemainder) {
  Program p = softmax_prog(77, 77);
  tune::Space s = tune::make_space(p.kg, 0, kMachine);
  double plain = tune::estimate(build_with(p, s, 0).f, p.kg, {}, kMachine).ms;
  double peeled = tune::estimate(build_with(p, s, 8).f, p.kg, {}, kMachine).ms;
  EXPECT_LT(peeled, plain * 0.9);
}

TEST(TunePeel, ModelSearchPicksAPeeledSoftmaxDeterministically) {
  // against the heuristic of kMachine's 8 lanes without row jamming (the default schedule's
  // jammed rows and 16-lane peel on an AVX-512 host are beyond these 8 trials)
  setenv("LATHE_JAM_ROWS", "0", 1);
  setenv("LATHE_PEEL_LANES", "8", 1);
  Program p = softmax_prog(77, 77);
  tune::TuneOptions o;
  o.trials = 8;
  o.machine = kMachine;
  auto a = tune::tune_program(p, {}, "test-target", nullptr, o).records;
  auto b = tune::tune_program(p, {}, "test-target", nullptr, o).records;
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(tune::to_json_line(a[0]), tune::to_json_line(b[0]));
  unsetenv("LATHE_JAM_ROWS");
  unsetenv("LATHE_PEEL_LANES");
  EXPECT_TRUE(has_peel(a[0].schedule)) << tune::to_json_line(a[0]);
  EXPECT_LT(a[0].ms, a[0].baseline_ms);
}

TEST(TunePeel, WholeVectorsGetNoKnob) {
  Program p = softmax_prog(5, 128);
  EXPECT_LT(tune::make_space(p.kg, 0, kMachine).knob("peel"), 0);
}

}  // namespace
}  // namespace lathe
