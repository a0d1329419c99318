// peel_test.cpp — the `peel` schedule primitive (core/loop/transform.cpp): a vectorized
// innermost loop split into whole vectors of W lanes and a scalar or masked tail gives the
// interpreter's results on the backend under test (c and llvm) for remainders 0..W-1,
// extents below one vector, prime and symbolic extents, batch 1 and 64, max and sum
// reductions (softmax) and plain element-wise loops; illegal requests are refused.
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/transform.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

// peels every innermost loop of kernel 0 by `width` (masked or not), vectorizes nothing
// else, parallelizes the outermost loop; compares with the interpreter
void expect_peeled_matches(const Graph& g, int64_t width, bool masked, const Bindings& dims = {}) {
  Program p = build_program(g, BuildOptions{false});
  loop::LoopFunc& f = p.funcs[0];
  std::vector<std::string> inner;
  loop::walk(f.body, [&](const loop::Stmt& s) {
    if (s.kind != loop::StmtKind::For) return true;
    bool leaf = true;
    loop::walk(s.body, [&](const loop::Stmt& c) { leaf &= c.kind != loop::StmtKind::For; return leaf; });
    if (leaf) inner.push_back(s.var);
    return true;
  });
  ASSERT_FALSE(inner.empty());
  for (auto& l : inner) loop::peel(f, l, width, masked);
  loop::parallel(f, loop::loop_names(f).at(0));
  std::string ir = loop::print_loop(f);
  EXPECT_NE(ir.find("# schedule: peel"), std::string::npos) << ir;
  bool vector_loop = false;
  loop::walk(f.body, [&](const loop::Stmt& s) { vector_loop |= s.kind == loop::StmtKind::For && s.annot.width > 0; return true; });
  if (test::test_backend() == "cuda" && vector_loop) {  // a CPU SIMD primitive: refused with the reason
    EXPECT_THROW(get_backend("cuda").compile(p), UserError);
    return;
  }
  Backend& b = get_backend(test::test_backend());
  auto compiled = b.compile(p);
  Executable e(p, compiled, test::test_backend());
  TensorMap in = random_inputs(g, 7, dims);
  EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in)), "") << ir;
}

TEST(Peel, SoftmaxRowsOfEveryRemainder) {
  // 77 (CLIP's length: 9 vectors + 5), 5 (below one vector), 64 (no tail), 97 (prime), 8+7
  for (int64_t n : {77, 5, 64, 97, 15})
    for (bool masked : {false, true}) {
      SCOPED_TRACE("row " + std::to_string(n) + (masked ? " masked" : " scalar"));
      Tensor x = input("x", {3, n});
      expect_peeled_matches(Graph::from_outputs({{"y", softmax(x, -1).node()}}), 8, masked);
    }
}

TEST(Peel, BatchOneAndSixtyFourAndWidthSixteen) {
  for (int64_t batch : {1, 64}) {
    Tensor x = input("x", {batch, 12, 77});
    Graph g = Graph::from_outputs({{"y", softmax(x, -1).node()}});
    expect_peeled_matches(g, 16, false);
    expect_peeled_matches(g, 4, true);
  }
}

TEST(Peel, ElementwiseAndSumOfOddChannels) {
  Tensor a = input("a", {7, 131}), b = input("b", {7, 131});
  expect_peeled_matches(Graph::from_outputs({{"y", (exp(a) * b + 2).node()}}), 8, false);
  expect_peeled_matches(Graph::from_outputs({{"y", (exp(a) * b + 2).node()}}), 8, true);
  Tensor x = input("x", {13, 3, 29});
  expect_peeled_matches(Graph::from_outputs({{"s", sum(x, {2}).node()}}), 8, true);
  expect_peeled_matches(Graph::from_outputs({{"s", max(x, {2}).node()}}), 8, false);
}

TEST(Peel, SymbolicExtent) {
  Tensor x = input("x", {SymInt(4), SymInt::var("N")});
  Graph g = Graph::from_outputs({{"y", softmax(x, -1).node()}});
  for (int64_t n : {3, 77, 64})
    for (bool masked : {false, true}) expect_peeled_matches(g, 8, masked, {{"N", n}});
}

TEST(Peel, LogAndRefusals) {
  Tensor x = input("x", {6, 77});
  Program p = build_program(Graph::from_outputs({{"y", softmax(x, -1).node()}}), BuildOptions{false});
  loop::LoopFunc& f = p.funcs[0];
  auto refused = [&](const std::function<void()>& fn, const std::string& why) {
    std::string before = loop::print_loop(f);
    try {
      fn();
      ADD_FAILURE() << "accepted; expected '" << why << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_EQ(loop::print_loop(f), before);
  };
  refused([&] { loop::peel(f, "i0", 8); }, "contains other loops");
  refused([&] { loop::peel(f, "r1", 3); }, "power of two");
  refused([&] { loop::peel(f, "zz", 8); }, "no such loop");
  loop::peel(f, "r1", 8, true);
  EXPECT_EQ(f.schedule_log.back(), "peel r1 by 8 masked");
  std::string ir = loop::print_loop(f);
  EXPECT_NE(ir.find("vectorized(8) for r1 in 0..72"), std::string::npos) << ir;
  EXPECT_NE(ir.find("vectorized(8 masked) for r1_t in 0..5"), std::string::npos) << ir;
}

// The default schedule's use of peel (heuristics.cpp, peel_short_rows): a vectorized f32 row
// of 32 or more whose compiler-interleaved remainder would be over 1/8 of it runs
// as whole 8-lane vectors and one masked vector; rows of 7, 9, 13, 64, 100 and 1001 and the rows
// inside a window sum keep the plain vectorized loop. Results match the interpreter at batch
// 1 and 5; LATHE_PEEL_ROWS=0 turns the rule off.

void expect_default_matches(const Graph& g) {
  Program p = build_program(g);
  Backend& b = get_backend(test::test_backend());
  auto compiled = b.compile(p);
  Executable e(p, compiled, test::test_backend());
  TensorMap in = random_inputs(g, 11);
  EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in)), "") << loop::print_loop(p.funcs[0]);
}

TEST(Peel, DefaultSchedulePeelsShortOddRows) {
  for (int64_t batch : {1, 5})
    for (int64_t n : {77, 9, 13, 37, 59, 7, 64, 100, 1001}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + " row " + std::to_string(n));
      Tensor x = input("x", {batch, 3, n});
      Graph g = Graph::from_outputs({{"y", softmax(x, -1).node()}});
      const bool peeled = n == 77 || n == 37 || n == 59;  // not 9, 13: under 4 vectors
      std::string log = test::default_schedule_log(g);
      EXPECT_EQ(log.find("peel") != std::string::npos, peeled) << log;
      if (peeled) {  // by the host's lanes (16 on AVX-512) where the row holds 4 of them, else by 8
        const int64_t w = n >= 4 * loop::peel_lanes() ? loop::peel_lanes() : 8;
        EXPECT_NE(log.find(" by " + std::to_string(w) + " masked"), std::string::npos) << log;
      }
      expect_default_matches(g);
    }
  // element-wise rows (collapsed) and a plain row sum of a prime length
  Tensor a = input("a", {5, 3, 23}), c = input("c", {5, 3, 23});
  Graph ew = Graph::from_outputs({{"y", (exp(a) * c + 2).node()}});
  // (its rows of 23 collapse into rows of 69 first: 2 × 32 + 5, not peeled)
  EXPECT_EQ(test::default_schedule_log(ew).find("peel"), std::string::npos) << test::default_schedule_log(ew);
  expect_default_matches(ew);
  Tensor s = input("s", {1, 41, 53});
  Graph rs = Graph::from_outputs({{"y", sum(s, {2}).node()}});
  EXPECT_NE(test::default_schedule_log(rs).find("peel"), std::string::npos) << test::default_schedule_log(rs);
  expect_default_matches(rs);
}

TEST(Peel, DefaultScheduleLeavesWindowRowsAndSwitchOff) {
  // a 7 × 7 window sum (resnet50's mean pool over a relu): its rows of 7 sit in a reduction;
  // by default the two reduction loops collapse into one of 49, which is peeled
  Tensor w = input("w", {1, 64, 7, 7});
  Graph pool = Graph::from_outputs({{"y", sum(w, {2, 3}).node()}});
  {
    test::ScopedEnv apart("LATHE_COLLAPSE_REDUCE_ROWS", "0");
    EXPECT_EQ(test::default_schedule_log(pool).find("peel"), std::string::npos) << test::default_schedule_log(pool);
    expect_default_matches(pool);
  }
  EXPECT_NE(test::default_schedule_log(pool).find("collapse rows r0 r1 -> r1 (49)"), std::string::npos) << test::default_schedule_log(pool);
  expect_default_matches(pool);
  Tensor x = input("x", {4, 77});
  Graph g = Graph::from_outputs({{"y", softmax(x, -1).node()}});
  setenv("LATHE_PEEL_ROWS", "0", 1);
  std::string off = test::default_schedule_log(g);
  unsetenv("LATHE_PEEL_ROWS");
  EXPECT_EQ(off.find("peel"), std::string::npos) << off;
  EXPECT_NE(test::default_schedule_log(g).find("peel r1 by " + std::to_string(loop::peel_lanes()) + " masked"), std::string::npos)
      << test::default_schedule_log(g);
  setenv("LATHE_PEEL_LANES", "8", 1);  // the A/B switch: 8 lanes on any host
  std::string eight = test::default_schedule_log(g);
  unsetenv("LATHE_PEEL_LANES");
  EXPECT_NE(eight.find("peel r1 by 8 masked"), std::string::npos) << eight;
}

}  // namespace
}  // namespace lathe
