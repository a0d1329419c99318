// concat_place_test.cpp — concat operands placed inside the concat's output (core/schedule/
// operand_place.h): an intermediate that the concat kernel copies unchanged into a contiguous
// slice lives there, its copy dropped, and the memory plan puts it at that slice; every case
// against the interpreter on the backend under test: batch 1 (slices contiguous: placed) and
// 3 (not: copied as before), odd and prime sizes, two- and three-way concats, an operand read
// again after the concat (its readers see it in the slice), an operand with arithmetic on it
// (copied: not a plain copy), a concat along the innermost axis (not placed). Off by default
// (LATHE_CONCAT_IN_PLACE=1 turns it on: operand_place.h says why).
#include <cstdlib>

#include "core/frontend/tensor.h"
#include "core/frontend/nn.h"
#include "core/ir/build.h"
#include "core/schedule/memory_plan.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

int placed(const Program& p) {
  int n = 0;
  for (auto& f : p.funcs) n += static_cast<int>(f.placed.size());
  return n;
}

// x [n, c, h, w] through a matmul over its last axis: an intermediate buffer (a kernel of its own)
Tensor mixed(const Tensor& x, int64_t w, uint64_t seed) {
  HostTensor m(DType::F32, {w, w});
  for (int64_t i = 0; i < w * w; ++i) m.set_f64(i, 0.05 * static_cast<double>((i * 7 + static_cast<int64_t>(seed)) % 11) - 0.2);
  return matmul(x, from_host(m));
}

// the concat read by a matmul (so it is a buffer of its own, not fused into its reader)
Tensor head(const Tensor& y, int64_t w) { return mixed(y, w, 3); }

TEST(ConcatPlace, CopiedOperandsLiveInTheirSlices) {
  test::ScopedEnv on("LATHE_CONCAT_IN_PLACE", "1");
  test::DiffBatch batch;
  struct Case { int64_t n, c1, c2, h, w; };
  for (auto [n, c1, c2, h, w] : std::vector<Case>{{1, 5, 3, 7, 16}, {3, 5, 3, 7, 16}, {1, 3, 2, 13, 32}, {1, 4, 7, 5, 48}}) {
    const std::string name = std::to_string(n) + "x(" + std::to_string(c1) + "+" + std::to_string(c2) + ")x" +
                             std::to_string(h) + "x" + std::to_string(w);
    Tensor a = input("a", {n, c1, h, w}), b = input("b", {n, c2, h, w}), d = input("d", {n, 2, h, w});
    Tensor xa = mixed(a, w, 1), xb = mixed(b, w, 2);
    {  // two operands, both copied unchanged; xa read again after the concat
      Tensor y = concat({xa, xb}, 1);
      Graph g = Graph::from_outputs({{"y", head(y, w).node()}, {"again", (sum(xa, {3}) * Scalar(0.5)).node()}});
      Program p = build_program(g);
      // batch 1: each slice is contiguous and 64-byte aligned where c1·h·w floats are 16k
      const int64_t want = n > 1 ? 0 : (c1 * h * w) % 16 == 0 ? 2 : 1;
      EXPECT_EQ(placed(p), want) << name << "\n" << test::loop_ir_of(p);
      batch.add("two-way " + name, g);
    }
    {  // three-way: the middle one has arithmetic on it (copied), the others placed
      Tensor y = concat({xa, xb * Scalar(2.0), mixed(d, w, 4)}, 1);
      Graph g = Graph::from_outputs({{"y", head(y, w).node()}});
      batch.add("three-way " + name, g);
    }
    {  // along the innermost axis: not contiguous slices
      Tensor y = concat({xa, mixed(a, w, 5)}, 3);
      Graph g = Graph::from_outputs({{"y", head(y, 2 * w).node()}});
      EXPECT_EQ(placed(build_program(g)), 0) << name;
      batch.add("innermost " + name, g);
    }
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(ConcatPlace, OffByDefaultLeavesTheCopies) {
  Tensor a = input("a", {1, 4, 8, 16}), b = input("b", {1, 4, 8, 16});
  Graph g = Graph::from_outputs({{"y", head(concat({mixed(a, 16, 1), mixed(b, 16, 2)}, 1), 16).node()}});
  {
    test::ScopedEnv on("LATHE_CONCAT_IN_PLACE", "1");
    EXPECT_EQ(placed(build_program(g)), 2) << test::loop_ir_of(build_program(g));
  }
  for (const char* v : {static_cast<const char*>(nullptr), "0"}) {
    test::ScopedEnv off("LATHE_CONCAT_IN_PLACE", v);
    EXPECT_EQ(placed(build_program(g)), 0);
    test::DiffBatch batch;
    batch.add("off", g);
    EXPECT_EQ(batch.run(), 0);
  }
}

// the memory plan puts a placed operand at its slice and writes nothing else over either
TEST(ConcatPlace, MemoryPlanHonoursThePlacement) {
  test::ScopedEnv on("LATHE_CONCAT_IN_PLACE", "1");
  Tensor a = input("a", {1, 4, 8, 16}), b = input("b", {1, 4, 8, 16});
  Graph g = Graph::from_outputs({{"y", head(concat({mixed(a, 16, 1), mixed(b, 16, 2)}, 1), 16).node()}});
  Program p = build_program(g);
  MemoryPlan plan = plan_memory(p.kg, p.funcs, {});
  int seen = 0;
  for (auto& f : p.funcs)
    for (auto& pl : f.placed) {
      const int x = f.buffers[static_cast<size_t>(pl.param)].buffer, y = f.buffers[0].buffer;
      EXPECT_EQ(plan.offset[static_cast<size_t>(x)], plan.offset[static_cast<size_t>(y)] + pl.at * 4);
      EXPECT_EQ(plan.in_place_of[static_cast<size_t>(x)], -1);
      EXPECT_EQ(plan.in_place_of[static_cast<size_t>(y)], -1);
      ++seen;
    }
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace lathe
