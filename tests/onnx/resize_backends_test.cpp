// resize_backends_test.cpp — ONNX Resize / Upsample along the innermost axis as periodic
// phases (lower_resize.cpp, LATHE_RESIZE_PHASES) against the Take form (LATHE_RESIZE_PHASES=0,
// the ONNX reference's taps per output position) on the interpreter, and the phase form
// compiled by a backend (LATHE_TEST_BACKEND: c, llvm) against the interpreter: scales 2, 3,
// 1.5, 0.5, sizes 7 -> 13 and 13 -> 7, linear / nearest / cubic, align_corners / half_pixel
// / asymmetric / pytorch_half_pixel, batch 1 and 3, 2-D to 4-D; where the taps repeat with
// a short period the innermost axis has no Take left (but the edge padding's copy) and its
// tiny phase row is unrolled into the vectorized loop (heuristics.cpp, unroll_tiny_rows).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <random>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "core/ir/build.h"
#include "core/runtime/compare.h"
#include "tests/backends/diff_util.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using test::attr_s;
using test::randt;

struct Case {
  std::vector<int64_t> xshape;
  std::string mode, coord;
  std::vector<float> scales;   // or
  std::vector<int64_t> sizes;
  bool periodic;               // the innermost axis takes the phase form
  std::string nearest = "";    // nearest_mode ("" = default)
  bool upsample = false;       // an Upsample-9 node instead (asymmetric, floor)
};

std::string label(const Case& c) {
  std::string s = (c.upsample ? "Upsample " : "Resize ") + c.mode + " " + c.coord + " " + c.nearest + " [";
  for (int64_t d : c.xshape) s += std::to_string(d) + ",";
  s += "] ->";
  for (float f : c.scales) s += " x" + std::to_string(f);
  for (int64_t d : c.sizes) s += " " + std::to_string(d);
  return s;
}

Graph model(const Case& c) {
  test::OnnxBuilder m(c.upsample ? 9 : 13);
  m.input("x", c.xshape);
  HostTensor sc(DType::F32, {static_cast<int64_t>(c.scales.size())});
  for (size_t i = 0; i < c.scales.size(); ++i) sc.set_f64(static_cast<int64_t>(i), c.scales[i]);
  if (c.upsample) {
    m.init("scales", sc);
    auto* n = m.node("Upsample", {"x", "scales"}, {"y"});
    attr_s(n, "mode", c.mode);
    return m.load("upsample.onnx");
  }
  test::resize_node(m, "x", "y", true, c.mode, c.coord, c.scales, c.sizes, c.nearest);
  return m.load("resize.onnx");
}

Graph model_with(const Case& c, bool phases) {
  if (phases) unsetenv("LATHE_RESIZE_PHASES");
  else setenv("LATHE_RESIZE_PHASES", "0", 1);
  Graph g = model(c);
  unsetenv("LATHE_RESIZE_PHASES");
  return g;
}

// Takes whose output's innermost dim differs from their input's (the Take form along the last
// axis), less the edge-padding copy of the phase form (a Take read only by a Copy)
int innermost_takes(const Graph& g) {
  std::vector<NodeRef> order = g.toposort();
  int n = 0;
  for (NodeRef v : order) {
    if (v->op != Op::Take || v->shape.empty()) continue;
    if (v->inputs[0]->shape.back().value() == v->shape.back().value()) continue;
    bool only_copies = true, used = false;
    for (NodeRef u : order)
      for (const NodeRef& i : u->inputs)
        if (i == v) {
          used = true;
          only_copies &= u->op == Op::Copy;
        }
    if (!(used && only_copies)) ++n;
  }
  return n;
}

std::vector<Case> cases() {
  return {
      {{1, 3, 7, 7}, "linear", "half_pixel", {1, 1, 2, 2}, {}, true},
      {{3, 2, 5, 13}, "linear", "half_pixel", {1, 1, 3, 3}, {}, true},
      {{1, 4, 6, 7}, "linear", "pytorch_half_pixel", {1, 1, 1.5f, 1.5f}, {}, true},
      {{3, 2, 8, 13}, "linear", "half_pixel", {1, 1, 0.5f, 0.5f}, {}, true},
      {{1, 2, 7, 7}, "linear", "asymmetric", {1, 1, 2, 2}, {}, true},
      {{3, 1, 7, 7}, "linear", "align_corners", {}, {3, 1, 13, 13}, true},    // (7-1)/(13-1) = 1/2
      {{1, 2, 7, 7}, "linear", "align_corners", {1, 1, 2, 2}, {}, false},         // 6/13: too long a period
      {{1, 2, 7, 13}, "linear", "half_pixel", {}, {1, 2, 13, 7}, false},      // 13 -> 7: not periodic
      {{1, 3, 7, 7}, "nearest", "asymmetric", {1, 1, 2, 2}, {}, true},
      {{3, 2, 13, 7}, "nearest", "half_pixel", {1, 1, 3, 3}, {}, true, "round_prefer_ceil"},
      {{1, 2, 7, 13}, "nearest", "half_pixel", {1, 1, 1.5f, 1.5f}, {}, true},
      {{3, 2, 8, 13}, "nearest", "asymmetric", {1, 1, 0.5f, 0.5f}, {}, true, "floor"},
      {{1, 2, 7, 7}, "nearest", "align_corners", {}, {1, 2, 13, 13}, true, "round_prefer_floor"},
      {{1, 2, 7, 7}, "cubic", "half_pixel", {1, 1, 2, 2}, {}, true},
      {{3, 2, 7, 13}, "cubic", "asymmetric", {1, 1, 3, 3}, {}, true},
      {{1, 2, 7, 7}, "cubic", "align_corners", {}, {1, 2, 13, 13}, true},
      {{1, 2, 8, 13}, "cubic", "pytorch_half_pixel", {1, 1, 0.5f, 0.5f}, {}, true},
      {{3, 13}, "linear", "half_pixel", {1, 2}, {}, true},                          // 2-D, batch 3
      {{2, 7, 9}, "cubic", "half_pixel", {1, 1, 1.5f}, {}, true},                  // 3-D, last only
      {{2, 7, 5}, "cubic", "half_pixel", {1, 1, 1.5f}, {}, false},                 // too short: clamped everywhere
      {{1, 3, 7, 7}, "nearest", "asymmetric", {1, 1, 2, 2}, {}, true, "", true},   // Upsample
      {{3, 2, 5, 7}, "linear", "asymmetric", {1, 1, 3, 2}, {}, true, "", true},
  };
}

TEST(ResizePhases, SameValuesAsTheTakeFormOnTheInterpreter) {
  std::mt19937 rng(5);
  for (const Case& c : cases()) {
    SCOPED_TRACE(label(c));
    Graph a = model_with(c, true), b = model_with(c, false);
    HostTensor x = randt(c.xshape, rng, 1.0);
    TensorMap ya = interpret(a, {{"x", x}}), yb = interpret(b, {{"x", x}});
    std::string why;
    EXPECT_TRUE(allclose(ya.at("y"), yb.at("y"), 1e-5, 1e-6, &why)) << why;
    EXPECT_GT(innermost_takes(b), 0);
    if (c.periodic) EXPECT_EQ(innermost_takes(a), 0);
    else EXPECT_GT(innermost_takes(a), 0);
  }
}

TEST(ResizePhases, CompiledMatchesTheInterpreter) {
  test::DiffBatch batch;
  uint64_t seed = 3;
  for (const Case& c : cases()) batch.add(label(c), model_with(c, true), seed++);
  EXPECT_EQ(batch.run(), 0);
}

TEST(ResizePhases, TinyPhaseRowIsUnrolledIntoTheVectorizedLoop) {
  Case c{{1, 3, 7, 16}, "linear", "half_pixel", {1, 1, 2, 2}, {}, true};
  std::string ir = test::loop_ir_of(build_program(model_with(c, true)));
  EXPECT_NE(ir.find("unroll row"), std::string::npos) << ir;
  setenv("LATHE_UNROLL_TINY_ROWS", "0", 1);
  std::string off = test::loop_ir_of(build_program(model_with(c, true)));
  unsetenv("LATHE_UNROLL_TINY_ROWS");
  EXPECT_EQ(off.find("unroll row"), std::string::npos) << off;
  // both ways against the interpreter
  test::DiffBatch batch;
  batch.add("unrolled", model_with(c, true), 9);
  EXPECT_EQ(batch.run(), 0);
  setenv("LATHE_UNROLL_TINY_ROWS", "0", 1);
  test::DiffBatch kept;
  kept.add("kept", model_with(c, true), 9);
  EXPECT_EQ(kept.run(), 0);
  unsetenv("LATHE_UNROLL_TINY_ROWS");
}

}  // namespace
}  // namespace lathe
