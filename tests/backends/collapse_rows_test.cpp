// collapse_rows_test.cpp — the default schedule's collapse of short innermost rows with their
// parent loop (core/loop/heuristics.cpp: a 14×14 map runs one vectorized loop of 196): taken
// where every access steps over whole rows (per-channel scales, casts, batch 1 and 3, prime
// and odd maps), refused where a read goes by row alone, a slice strides past the row's end or
// a transpose reads across rows; every case against the interpreter on the backend under test.
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/build.h"
#include "diff_util.h"

namespace lathe {
namespace {

Graph one(const Tensor& y) { return Graph::from_outputs({{"y", y.node()}}); }

bool collapsed(const Program& p) {
  for (auto& f : p.funcs)
    for (auto& l : f.schedule_log)
      if (l.rfind("collapse rows", 0) == 0) return true;
  return false;
}

// the QDQ residual epilogue's shape: per-channel dequantize, add, relu, quantize to u8
Tensor requant(int64_t n, int64_t c, int64_t h, int64_t w) {
  Tensor acc = input("acc", {n, c, h, w}, DType::I32);
  Tensor scale = input("scale", {c, 1, 1}), res = input("res", {n, c, h, w});
  Tensor y = relu(cast(acc, DType::F32) * scale + res);
  return cast(clamp(round(y * Scalar(7.0)), Scalar(0.0), Scalar(255.0)), DType::U8);
}

TEST(CollapseRows, TakenWhereRowsAreWholeAndMatchesInterpreter) {
  test::DiffBatch batch;
  struct Case { int64_t n, c, h, w; };
  for (auto [n, c, h, w] : std::vector<Case>{{1, 5, 14, 14}, {3, 3, 7, 7}, {1, 2, 13, 13}, {3, 1, 5, 11}, {1, 7, 3, 5}}) {
    Graph g = one(requant(n, c, h, w));
    Program p = build_program(g);
    EXPECT_TRUE(collapsed(p)) << n << "x" << c << "x" << h << "x" << w << "\n" << test::loop_ir_of(p);
    batch.add("requant " + std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w), g);
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(CollapseRows, RefusedWhereRowsAreNotWholeAndMatchesInterpreter) {
  test::DiffBatch batch;
  std::vector<std::pair<std::string, Tensor>> cases;
  {  // a value per row (broadcast along the row): the row index alone addresses it
    Tensor x = input("x", {3, 13, 11}), r = input("r", {3, 13, 1});
    cases.emplace_back("per-row", x * r + Scalar(1.0));
  }
  {  // a slice inside each row: rows of 5 out of 7
    Tensor x = input("x", {3, 3, 7, 7});
    cases.emplace_back("slice", slice(slice(x, 2, 1, 6), 3, 1, 6) * Scalar(2.0));
  }
  {  // a transpose of a small plane: reads across rows
    Tensor x = input("x", {2, 11, 13});
    cases.emplace_back("transpose", transpose(x, 1, 2) + Scalar(1.0));
  }
  for (auto& [name, y] : cases) {
    Graph g = one(y);
    Program p = build_program(g);
    EXPECT_FALSE(collapsed(p)) << name << "\n" << test::loop_ir_of(p);
    batch.add(name, g);
  }
  EXPECT_EQ(batch.run(), 0);
}

// Two reduction loops of the same accumulator whose accesses step over whole rows (a global
// average pool's 7 x 7 map, a sum or max over the last two axes) run as one reduction loop of
// h·w (LATHE_COLLAPSE_REDUCE_ROWS=0: apart); a reduction over axes that are not adjacent in
// memory, or a sliced map, keeps its two loops. Prime channels, odd maps, batch 1 and 3, keepdim
// or not, against the interpreter.
TEST(CollapseRows, ReductionRowsCollapseAndMatchInterpreter) {
  test::DiffBatch batch;
  struct Case { int64_t n, c, h, w; };
  int i = 0;
  for (auto [n, c, h, w] : std::vector<Case>{{1, 13, 7, 7}, {3, 5, 3, 11}, {1, 2048, 7, 7}, {3, 7, 13, 5}, {1, 3, 1, 9}}) {
    std::string shape = std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
    Tensor x = input("x", {n, c, h, w});
    for (int kind = 0; kind < 3; ++kind, ++i) {
      Tensor y = kind == 0 ? global_avg_pool2d(x) : kind == 1 ? sum(x, {2, 3}, i % 2) : amax(x, {2, 3}, true) * Scalar(2.0);
      Graph g = one(y);
      Program p = build_program(g);
      if (h > 1) EXPECT_TRUE(collapsed(p)) << shape << " " << kind << "\n" << test::loop_ir_of(p);
      batch.add("reduce rows " + shape + " " + std::to_string(kind), g);
    }
  }
  {  // axes 1 and 3: not adjacent in memory
    Tensor x = input("x", {3, 5, 7, 11});
    Graph g = one(sum(x, {1, 3}));
    Program p = build_program(g);
    EXPECT_FALSE(collapsed(p)) << test::loop_ir_of(p);
    batch.add("reduce axes 1, 3", g);
  }
  {  // a slice of each map: rows of 5 out of 7
    Tensor x = input("x", {2, 3, 7, 7});
    Graph g = one(mean(slice(slice(x, 2, 1, 6), 3, 1, 6), {2, 3}));
    Program p = build_program(g);
    EXPECT_FALSE(collapsed(p)) << test::loop_ir_of(p);
    batch.add("reduce sliced", g);
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
