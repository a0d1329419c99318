// jam_test.cpp — the tuner's jam knob (row blocking, loop::jam): a softmax's space has it,
// a point logs "jam LOOP by R" and replays to the same code, a row loop R does not divide is
// left alone, refusals name why, and a kernel without row-wise reductions gets no knob.
// (The jammed code against the interpreter, on c and on llvm: tests/backends/jam_test.cpp;
// random points of the softmax space, jam included: Tune.RandomPointsOfEverySpace….)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/schedule/program.h"
#include "core/tune/search.h"
#include "tune_check.h"

namespace lathe {
namespace {

using namespace tune_test;

Graph softmax_graph(const Shape& shape) {
  Tensor x = input("x", shape);
  return Graph::from_outputs({{"y", softmax(x, -1).node()}});
}

TEST(TuneJam, TheKnobLogsReplaysAndRefusesWhatItCannotJam) {
  setenv("LATHE_TUNE_JAM", "1", 1);  // the knob is off by default (no gain measured yet)
  Program p = build_program(softmax_graph({12, 77, 77}));
  tune::Space s = tune::make_space(p.kg, 0, tune::Machine{2, 8, 16});
  int k = s.knob("jam"), fuse = s.knob("fuse");
  ASSERT_GE(k, 0);
  ASSERT_GE(fuse, 0);
  tune::Point pt(s.knobs.size(), 0);
  pt[k] = 1;     // 2 rows
  pt[fuse] = 1;  // fuse i0 i1: 924 rows
  tune::Built b = tune::build(p.kg, 0, s, pt);
  EXPECT_NE(std::find(b.schedule.begin(), b.schedule.end(), "jam i0_i1 by 2"), b.schedule.end());
  EXPECT_TRUE(replays_to(p.kg, 0, b.schedule, b.f));
  // the jammed passes: one loop each, two rows' chains in it
  std::string text = loop::print_loop(b.f);
  EXPECT_NE(text.find("reduce max(acc2, acc2_1)"), std::string::npos) << text;
  // without the fuse the row loop (77) is not a multiple of 2: no jam in the log
  pt[fuse] = 0;
  tune::Built nb = tune::build(p.kg, 0, s, pt);
  for (auto& l : nb.schedule) EXPECT_EQ(l.rfind("jam", 0), std::string::npos) << l;
  // refusals name the reason
  EXPECT_TRUE(refused(p.kg, 0, {"jam i1 by 2"}, "constant that 2 divides"));
  EXPECT_TRUE(refused(p.kg, 0, {"jam r1 by 7"}, "carries a reduction"));
  EXPECT_TRUE(refused(p.kg, 0, {"jam i0 by 2"}, "not innermost"));
  EXPECT_TRUE(refused(p.kg, 0, {"jam i1 by 9"}, "from 2 to 8"));
  EXPECT_TRUE(refused(p.kg, 0, {"jam zz by 2"}, "no such loop"));
  // no jam knob on a kernel without row-wise reductions
  Tensor x = input("x", {33, 40});
  Program e = build_program(Graph::from_outputs({{"y", (x * 2.0).node()}}));
  EXPECT_LT(tune::make_space(e.kg, 0, tune::Machine{2, 8, 16}).knob("jam"), 0);
  unsetenv("LATHE_TUNE_JAM");
  EXPECT_LT(tune::make_space(p.kg, 0, tune::Machine{2, 8, 16}).knob("jam"), 0);
}

}  // namespace
}  // namespace lathe
