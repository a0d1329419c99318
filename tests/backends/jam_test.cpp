// jam_test.cpp — the `jam` schedule primitive (row blocking, core/loop/transform_jam.cpp):
// R rows of a row-wise reduction together, each pass's R copies fused into one loop, gives
// the interpreter's results on the backend under test: softmax rows of 77, 13 (prime) and
// 6 x 77 (batch 1), R from 2 to 5, with peel (scalar and masked tails), vectorize and
// parallel after it, and a mean-centred norm (three passes per row, two of them reductions),
// plain and vectorized. (The tuner's jam knob: tests/tune/jam_test.cpp.)
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/loop_print.h"
#include "core/loop/transform_jam.h"
#include "core/tune/space.h"
#include "diff_util.h"

namespace lathe {
namespace {

Graph softmax_graph(const Shape& shape) {
  Tensor x = input("x", shape);
  return Graph::from_outputs({{"y", softmax(x, -1).node()}});
}
Graph norm_graph(const Shape& shape) {  // (x - mean) / (sum of squares + 1), per row
  Tensor x = input("x", shape);
  Tensor c = x - mean(x, {-1}, true);
  return Graph::from_outputs({{"y", (c / (sum(c * c, {-1}, true) + 1.0)).node()}});
}

// the schedule lines replayed on kernel 0 of g, run on the backend under test
void expect_jammed_matches(const Graph& g, const std::vector<std::string>& lines) {
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 1);
  loop::LoopFunc f = tune::replay(p.kg, 0, lines);
  f.name = p.funcs[0].name;
  p.funcs[0] = f;
  std::string ir = loop::print_loop(f);
  EXPECT_NE(ir.find("# schedule: jam"), std::string::npos) << ir;
  bool vector_loop = false;
  loop::walk(f.body, [&](const loop::Stmt& s) { vector_loop |= s.kind == loop::StmtKind::For && s.annot.width > 0; return true; });
  if (test::test_backend() == "cuda" && vector_loop) return;  // peel: a CPU SIMD primitive
  Backend& b = get_backend(test::test_backend());
  Executable e(p, b.compile(p), test::test_backend());
  TensorMap in = random_inputs(g, 7);
  EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in)), "") << ir;
}

TEST(Jam, SoftmaxRowsTogether) {
  expect_jammed_matches(softmax_graph({1, 6, 77}), {"jam i1 by 2", "parallel i1",  // batch 1: no i0
                                                    "vectorize r1", "vectorize r0", "vectorize i2"});
  expect_jammed_matches(softmax_graph({3, 4, 13}), {"fuse i0 i1 -> i0_i1", "jam i0_i1 by 4", "vectorize r1", "vectorize r0",
                                                    "vectorize i2", "peel r1 by 8 masked", "peel r0 by 8 masked", "peel i2 by 8"});
  expect_jammed_matches(softmax_graph({12, 7, 13}), {"fuse i0 i1 -> i0_i1", "jam i0_i1 by 3", "parallel i0_i1"});
  expect_jammed_matches(softmax_graph({5, 77}), {"jam i0 by 5", "vectorize r1", "peel r0 by 8"});
}

TEST(Jam, NormRowsTogether) {
  Program n = build_program(norm_graph({6, 29}));
  if (n.num_kernels() != 1) GTEST_SKIP() << "the norm graph is " << n.num_kernels() << " kernels";
  expect_jammed_matches(norm_graph({6, 29}), {"jam i0 by 2", "parallel i0"});
  expect_jammed_matches(norm_graph({6, 29}), {"jam i0 by 2", "parallel i0", "vectorize r1", "vectorize r0", "vectorize i1"});
}

}  // namespace
}  // namespace lathe
