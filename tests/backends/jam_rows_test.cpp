// jam_rows_test.cpp — the default schedule's row jamming (heuristics.cpp, jam_short_rows): a
// row-wise reduction over short f32 rows (a softmax over 77) runs 4 (or 2) rows together,
// the row loop fused with its parent first where its own extent is odd (12 × 77 rows);
// long rows (1001, 4096), odd row counts with no parent to fuse, and LATHE_JAM_ROWS=0 keep
// one row at a time. Results match the interpreter on the backend under test for row
// lengths 5, 13, 37, 59 (prime), 77, 100, 256, batch 1 and more, softmax, a plain row sum
// and a mean-centred norm. Also: 2^x (the llvm backend's exp2 polynomial, emit_math.cpp)
// against the interpreter near its edges (saturation, subnormal results, NaN, ±inf), in
// both forms (LATHE_EXP2_FAST=0: the previous one).
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/build.h"
#include "core/loop/transform.h"
#include "diff_util.h"

namespace lathe {
namespace {


void expect_default_matches(const Graph& g, uint64_t seed = 5) {
  Program p = build_program(g);
  Backend& b = get_backend(test::test_backend());
  auto compiled = b.compile(p);
  Executable e(p, compiled, test::test_backend());
  TensorMap in = random_inputs(g, seed);
  // wide inputs: a row's max well above the others (exp of large negatives)
  for (auto& [name, t] : in)
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, t.get_f64(i) * 8);
  EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in)), "") << test::loop_ir_of(p);
}

Graph softmax_graph(const Shape& shape) {
  Tensor x = input("x", shape);
  return Graph::from_outputs({{"y", softmax(x, -1).node()}});
}

TEST(JamRows, DefaultScheduleJamsShortRowsOfSoftmax) {
  if (test::test_backend() == "cuda") GTEST_SKIP() << "the CPU default schedule";
  struct Case {
    Shape shape;
    const char* jam;  // the jam line expected in the log ("" none)
  };
  const std::vector<Case> cases = {
      {{12, 77, 77}, "jam i0_i1 by 4"},  // 77 rows per i0: fused with it, 924 = 4 × 231
      {{1, 77, 77}, ""},                 // 77 rows, a parent of 1: no even count
      {{3, 8, 37}, "jam i0_i1 by 4"},   // 3 < 4 × threads: fused for the parallel loop first
      {{2, 5, 59}, "jam i0_i1 by 2"},   // 10 rows = 2 × 5
      {{1, 6, 13}, "jam i1 by 2"},
      {{4, 100}, "jam i0 by 4"},
      {{2, 3, 256}, "jam i0_i1 by 2"},
      {{5, 3, 5}, ""},                   // 15 rows, odd
      {{2, 4, 1001}, ""},                // long rows: throughput-bound, left alone
      {{1, 2, 4096}, ""},
  };
  for (const Case& c : cases) {
    std::string what;
    for (auto& d : c.shape) what += std::to_string(*d.try_value()) + " ";
    SCOPED_TRACE("softmax over " + what);
    Graph g = softmax_graph(c.shape);
    std::string log = test::default_schedule_log(g);
    if (*c.jam) EXPECT_NE(log.find(c.jam), std::string::npos) << log;
    else EXPECT_EQ(log.find("jam"), std::string::npos) << log;
    expect_default_matches(g);
  }
}

TEST(JamRows, RowSumAndNormAndSwitchOff) {
  if (test::test_backend() == "cuda") GTEST_SKIP() << "the CPU default schedule";
  Tensor s = input("s", {2, 41, 53});  // a plain row sum, prime lengths: 82 rows
  Graph rs = Graph::from_outputs({{"y", sum(s, {2}).node()}});
  EXPECT_NE(test::default_schedule_log(rs).find("jam"), std::string::npos) << test::default_schedule_log(rs);
  expect_default_matches(rs);
  Tensor x = input("x", {3, 6, 77});  // (x - mean) / (sum of squares + 1): three passes, two reductions
  Tensor c = x - mean(x, {-1}, true);
  Graph norm = Graph::from_outputs({{"y", (c / (sum(c * c, {-1}, true) + 1.0)).node()}});
  EXPECT_NE(test::default_schedule_log(norm).find("jam"), std::string::npos) << test::default_schedule_log(norm);
  expect_default_matches(norm);
  Graph g = softmax_graph({12, 77, 77});
  setenv("LATHE_JAM_ROWS", "0", 1);
  std::string off = test::default_schedule_log(g);
  Program p = build_program(g);
  unsetenv("LATHE_JAM_ROWS");
  EXPECT_EQ(off.find("jam"), std::string::npos) << off;
  EXPECT_EQ(off.find("fuse"), std::string::npos) << off;
  expect_default_matches(g);
}

// 2^x near the polynomial's edges within 4e-7 relative (or 1e-44 absolute: subnormal
// results) of the interpreter and of exp2 in double; NaN for NaN, inf at and above 128, 0
// far below -150. The form LATHE_EXP2_FAST selects (read once per process): CTest runs this
// test again with LATHE_EXP2_FAST=0 (llvm.exp2_previous_form).
TEST(JamRows, Exp2EdgesMatchTheInterpreter) {
  if (test::test_backend() != "llvm") GTEST_SKIP() << "the llvm backend's exp2 polynomial";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,    -0.0f,   1.0f,    -1.0f,   0.5f,    -0.5f,    0.49999997f, 127.0f, 127.4f,
                          127.5f,  127.99f, 128.0f,  128.5f,  300.0f,  -125.5f,  -126.0f,     -126.7f, -130.0f,
                          -140.3f, -149.0f, -149.5f, -150.0f, -151.0f, -1000.0f, nan,         -nan,    inf,
                          -inf,    3.3e-8f, 17.25f,  -17.75f, 88.7f,   -87.3f,   1e-30f};
  for (int i = 0; i < 301; ++i) v.push_back(-160.0f + 0.97f * static_cast<float>(i));  // -160 .. 131
  NodeRef x = prim::input("x", DType::F32, {static_cast<int64_t>(v.size())});
  Graph g = Graph::from_outputs({{"y", prim::unary(Op::Exp2, x)}});
  Program p = build_program(g);
  Backend& b = get_backend("llvm");
  auto compiled = b.compile(p);
  Executable e(p, compiled, "llvm");
  TensorMap in = random_inputs(g, 1);
  for (size_t i = 0; i < v.size(); ++i) in.at("x").set_f64(static_cast<int64_t>(i), v[i]);
  TensorMap got = e.run(in), want = interpret(g, in);
  for (size_t i = 0; i < v.size(); ++i) {
    double y = got.at("y").get_f64(static_cast<int64_t>(i)), r = want.at("y").get_f64(static_cast<int64_t>(i));
    double t = std::exp2(static_cast<double>(v[i]));
    SCOPED_TRACE("x = " + std::to_string(v[i]));
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(y)) << y;
      continue;
    }
    if (std::isinf(static_cast<float>(t))) {
      EXPECT_EQ(y, inf);
      continue;
    }
    EXPECT_LE(std::fabs(y - t), 4e-7 * t + 1e-44) << "got " << y << " want " << t;
    EXPECT_LE(std::fabs(y - r), 4e-7 * std::fabs(r) + 1e-44) << "got " << y << " interpreter " << r;
  }
}

}  // namespace
}  // namespace lathe
