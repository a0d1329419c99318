// direct_space_test.cpp — the direct convolution nest in the tuner's space (space.h): a
// depthwise or stem convolution's kernel gets the knobs `direct` (the nest, or the GEMM /
// plain reduction), `ocb` (output channels per pass, stems only) and `direct_rows` (output
// rows per pass); a point on the nest logs `direct ocb=… rows=… lanes=…`, which replays to
// the same code, and every such point computes what the interpreter computes. Bad lines are
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/backend.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower_depthwise.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "core/tune/model.h"
#include "core/tune/space.h"
#include "tune_check.h"

namespace lathe {
namespace {

using namespace tune_test;

Graph stem() {  // a 7x7 stride-2 stem with 13 outputs (no pass width divides it), odd plane
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {3, 3};
  Tensor y = conv2d(input("x", {1, 3, 29, 31}), input("w", {13, 3, 7, 7}), input("b", {13}), o);
  return Graph::from_outputs({{"y", clamp(y, Scalar(0.0), Scalar(6.0)).node()}});
}
Graph stem3() {  // a 3x3 stride-2 stem (MobileNet's), 13 outputs: quick to compile in every shape
  Conv2dOptions o;
  o.stride = {2, 2};
  o.padding = {1, 1};
  return Graph::from_outputs({{"y", conv2d(input("x", {1, 3, 23, 29}), input("w", {13, 3, 3, 3}), input("b", {13}), o).node()}});
}
Graph dw5() {  // a 5x5 depthwise convolution, 7 channels, batch 2, prime plane
  Conv2dOptions o;
  o.padding = {2, 2};
  o.groups = 7;
  return Graph::from_outputs({{"y", conv2d(input("x", {2, 7, 17, 19}), input("w", {7, 1, 5, 5}), std::nullopt, o).node()}});
}

tune::Point point(const tune::Space& s, std::initializer_list<std::pair<const char*, int64_t>> set) {
  tune::Point pt(s.knobs.size(), 0);
  for (auto& [name, value] : set) {
    int k = s.knob(name);
    EXPECT_GE(k, 0) << name;
    if (k < 0) continue;
    auto& v = s.knobs[k].values;
    auto it = std::find(v.begin(), v.end(), value);
    EXPECT_NE(it, v.end()) << name << "=" << value;
    pt[k] = int(it - v.begin());
  }
  return pt;
}

TEST(TuneDirect, StemAndDepthwiseKernelsHaveTheNestsKnobs) {
  const tune::Machine m{2, 8, 16};
  Program ps = build_program(stem()), pd = build_program(dw5());
  ASSERT_EQ(ps.num_kernels(), 1);
  ASSERT_EQ(pd.num_kernels(), 1);
  tune::Space ss = tune::make_space(ps.kg, 0, m), sd = tune::make_space(pd.kg, 0, m);
  EXPECT_GE(ss.knob("direct"), 0);
  EXPECT_GE(ss.knob("ocb"), 0);
  EXPECT_GE(ss.knob("direct_rows"), 0);
  EXPECT_GE(ss.knob("mr"), 0);  // the GEMM stays a choice for the stem
  EXPECT_GE(sd.knob("direct"), 0);
  EXPECT_LT(sd.knob("ocb"), 0);  // one output per plane: no pass width to choose
  EXPECT_GE(sd.knob("direct_rows"), 0);
  EXPECT_GE(sd.knob("direct_acc"), 0);  // its rows' sums in register accumulators, or not
  EXPECT_LT(ss.knob("direct_acc"), 0);  // a stem's passes always accumulate in registers
  // a GEMM without a window has none of them
  Program pm = build_program(Graph::from_outputs({{"y", matmul(input("a", {9, 16}), input("b", {16, 11})).node()}}));
  EXPECT_LT(tune::make_space(pm.kg, 0, m).knob("direct"), 0);
}

TEST(TuneDirect, PointsLogTheNestAndReplayToTheSameCode) {
  Program p = build_program(stem());
  // the line carries the width the nest was built for (the space's lanes): a search on a
  // machine of 8 lanes replays to its 8-lane code on an AVX-512 host too, and one of 16 to
  // 16-lane code on an AVX2 host (a line without lanes= replayed at the host's width, which
  // was not the code the search measured where the two differ)
  std::string code8;
  for (const tune::Machine m : {tune::Machine{2, 8, 16}, tune::Machine{2, 16, 32}}) {
    tune::Space s = tune::make_space(p.kg, 0, m);
    tune::Built b = tune::build(p.kg, 0, s, point(s, {{"direct", 1}, {"ocb", 3}, {"direct_rows", 4}}));
    ASSERT_EQ(b.schedule, std::vector<std::string>{"direct ocb=3 rows=4 lanes=" + std::to_string(m.lanes)});
    ASSERT_TRUE(loop::is_depthwise(b.f));
    EXPECT_NE(b.f.schedule_log.at(0).find("3 of 13 output channels per pass"), std::string::npos) << b.f.schedule_log[0];
    EXPECT_NE(b.f.schedule_log.at(0).find("4 rows per pass"), std::string::npos) << b.f.schedule_log[0];
    EXPECT_TRUE(replays_to(p.kg, 0, b.schedule, b.f)) << m.lanes << " lanes";
    if (m.lanes == 8) code8 = tune::code_key(b.f);
    else EXPECT_NE(tune::code_key(b.f), code8);  // (the width is in the code)
    // direct = 0: the GEMM or the plain reduction, as before
    tune::Built g = tune::build(p.kg, 0, s, point(s, {{"direct", 0}}));
    EXPECT_FALSE(loop::is_depthwise(g.f));
  }
  // the 7x7 x 3-channel stem's heuristic is the nest (147 taps, the tap loop; the GEMM under
  // LATHE_STEM_DIRECT=0); a 3x3 stem's is the nest, and its point of all defaults on the
  // host's machine (the search's) is the heuristic's code, as is its line without lanes=
  EXPECT_TRUE(loop::is_depthwise(p.funcs[0]));
  Program p3 = build_program(stem3());
  tune::Space s3 = tune::make_space(p3.kg, 0, tune::host_machine());
  tune::Built h = tune::build(p3.kg, 0, s3, point(s3, {{"direct", 1}}));
  ASSERT_TRUE(loop::is_depthwise(p3.funcs[0]));
  EXPECT_EQ(tune::code_key(h.f), tune::code_key(p3.funcs[0]));
  EXPECT_TRUE(replays_to(p3.kg, 0, {"direct ocb=0 rows=0"}, p3.funcs[0]));
}

TEST(TuneDirect, EveryPassShapeMatchesTheInterpreter) {
  for (const Graph& g : {stem3(), dw5()}) {
    Program base = build_program(g);
    TensorMap in = random_inputs(g, 5);
    TensorMap want = interpret(g, in);
    tune::Space s = tune::make_space(base.kg, 0, tune::Machine{2, 8, 16});
    std::vector<Program> progs;
    for (int64_t rows : {1, 3, 4, 6, 8})
      for (int64_t ocb : {2, 6}) {
        // (a depthwise one: ocb 2 and 6 stand for its accumulator pass off and on)
        tune::Built b = s.knob("ocb") >= 0 ? tune::build(base.kg, 0, s, point(s, {{"direct", 1}, {"ocb", ocb}, {"direct_rows", rows}}))
                                           : tune::build(base.kg, 0, s, point(s, {{"direct", 1}, {"direct_rows", rows}, {"direct_acc", ocb == 6}}));
        progs.push_back(with_kernel(base, 0, b.f));
      }
    EXPECT_TRUE(all_match(progs, 0, in, want, 1e-3, nullptr, max_rel_diff));  // (relative to the largest reference value)
  }
}

// A 5x5 depthwise convolution's 25 weights held as values do not fit AVX2's 16 vector
// registers (LLVM spilled them and the input vectors around every output vector): the
// register-accumulator pass replays from its line, and the cost model ranks it first.
// (On AVX2's machine, whatever the host: the heuristic's pass there is the space's point
// of all defaults at 8 lanes.)
TEST(TuneDirect, DepthwiseAccumulatorsReplayAndTheModelPicksThem) {
  const tune::Machine m{2, 8, 16};
  Program p = build_program(dw5());
  tune::Space s = tune::make_space(p.kg, 0, m);
  tune::Built a = tune::build(p.kg, 0, s, point(s, {{"direct", 1}, {"direct_rows", 4}, {"direct_acc", 1}}));
  ASSERT_EQ(a.schedule, std::vector<std::string>{"direct ocb=0 rows=4 acc=1 lanes=8"});
  EXPECT_TRUE(replays_to(p.kg, 0, a.schedule, a.f));
  // acc=0 (and a line without acc) is the heuristic's pass, at the host's width without lanes=
  EXPECT_TRUE(replays_to(p.kg, 0, {"direct ocb=0 rows=0 acc=0"}, p.funcs[0]));
  EXPECT_TRUE(replays_to(p.kg, 0, {"direct ocb=0 rows=0"}, p.funcs[0]));
  const std::string host_lanes = " lanes=" + std::to_string(tune::host_machine().lanes);
  EXPECT_TRUE(replays_to(p.kg, 0, {"direct ocb=0 rows=0" + host_lanes}, p.funcs[0]));
  EXPECT_THROW(tune::replay(p.kg, 0, {"direct ocb=0 rows=2 acc=2"}), UserError);
  // the model: the heuristic's pass above every accumulator pass of 2 or more rows
  Bindings dims;
  tune::Built hb = tune::build(p.kg, 0, s, point(s, {{"direct", 1}}));
  ASSERT_EQ(hb.schedule, std::vector<std::string>{"direct ocb=0 rows=0 lanes=8"});
  double heur = tune::estimate(hb.f, p.kg, dims, m).ms;
  EXPECT_EQ(tune::estimate(hb.f, p.kg, dims, m).features.at(9), 1.0);  // its 25 weights spill
  for (int64_t rows : {3, 4, 6, 8}) {
    tune::Built b = tune::build(p.kg, 0, s, point(s, {{"direct", 1}, {"direct_rows", rows}, {"direct_acc", 1}}));
    EXPECT_LT(tune::estimate(b.f, p.kg, dims, m).ms, heur) << rows;
  }
  // a 3x3 depthwise's 9 weights fit: no charge, the heuristic's pass is no worse there
  Conv2dOptions o;
  o.padding = {1, 1};
  o.groups = 7;
  Program p3 = build_program(Graph::from_outputs({{"y", conv2d(input("x", {1, 7, 17, 19}), input("w", {7, 1, 3, 3}), std::nullopt, o).node()}}));
  tune::Space s3 = tune::make_space(p3.kg, 0, m);
  tune::Built b3 = tune::build(p3.kg, 0, s3, point(s3, {{"direct", 1}, {"direct_acc", 0}}));
  EXPECT_EQ(tune::estimate(b3.f, p3.kg, dims, m).features.at(9), 0.0);  // spill feature
}

TEST(TuneDirect, BadDirectLinesAreErrors) {
  Program p = build_program(stem());
  EXPECT_THROW(tune::replay(p.kg, 0, {"direct ocb=x rows=2"}), UserError);
  EXPECT_THROW(tune::replay(p.kg, 0, {"direct ocb=3 lanes=2"}), UserError);
  EXPECT_THROW(tune::replay(p.kg, 0, {"direct ocb=3 lanes=12"}), UserError);
  EXPECT_THROW(tune::replay(p.kg, 0, {"direct ocb=99"}), UserError);
  Program pm = build_program(Graph::from_outputs({{"y", matmul(input("a", {9, 16}), input("b", {16, 11})).node()}}));
  try {
    tune::replay(pm.kg, 0, {"direct ocb=0 rows=2"});
    ADD_FAILURE() << "a matmul took the direct nest";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no convolution the direct nest takes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
