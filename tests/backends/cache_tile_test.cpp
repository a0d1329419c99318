// cache_tile_test.cpp — the `cache` schedule primitive (core/loop/transform_cache.cpp):
// staged tiles give the interpreter's results on the backend under test (c and llvm), and
// illegal requests are refused with a reason, leaving the kernel as it was.
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/transform.h"
#include "diff_util.h"

namespace lathe {
namespace {

using Schedule = std::function<void(loop::LoopFunc&)>;

// Builds g without the default schedule, applies `sched` to kernel `k`, compiles on the
// backend under test and compares every output with the interpreter.
void expect_matches(const Graph& g, int k, const Schedule& sched, const std::string& must_print = "") {
  Program p = build_program(g, BuildOptions{false});
  ASSERT_LT(k, p.num_kernels());
  sched(p.funcs[k]);
  std::string ir = loop::print_loop(p.funcs[k]);
  if (!must_print.empty()) {
    EXPECT_NE(ir.find(must_print), std::string::npos) << ir;
  }
  Backend& b = get_backend(test::test_backend());
  auto compiled = b.compile(p);
  Executable e(p, compiled, test::test_backend());
  TensorMap in = random_inputs(g, 11);
  EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in)), "") << ir;
}

// The refusal's message contains `why`, and f is unchanged.
void expect_refused(loop::LoopFunc& f, const std::function<void()>& apply, const std::string& why) {
  std::string before = loop::print_loop(f);
  try {
    apply();
    ADD_FAILURE() << "accepted; expected a refusal mentioning '" << why << "'\n" << loop::print_loop(f);
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
  EXPECT_EQ(loop::print_loop(f), before);
}

TEST(CacheTile, BroadcastRowIsStagedOnce) {
  Tensor x = input("x", {30, 40}), b = input("b", {40});
  Graph g = Graph::from_outputs({{"y", (x * b + 1).node()}});
  expect_matches(g, 0, [](loop::LoopFunc& f) {
    loop::cache(f, "root", f.buffers[2].name);  // b: once for the whole kernel
    loop::cache(f, "i0", f.buffers[1].name);    // x: one row per iteration of i0
    loop::parallel(f, "i0");
  }, "_tile: f32[40]");
}

TEST(CacheTile, SoftmaxRowPassesShareOneTile) {
  Tensor x = input("x", {24, 40});
  Graph g = Graph::from_outputs({{"y", softmax(x, -1).node()}});
  Program p = build_program(g, BuildOptions{false});
  loop::LoopFunc& f = p.funcs[0];
  // the row is read by every pass (max, sum, normalize): one 40-element tile per row
  EXPECT_EQ(loop::cache(f, "i0", "in0"), "in0_tile");
  int allocs = 0;
  loop::walk(f.body, [&](const loop::Stmt& s) { allocs += s.kind == loop::StmtKind::Alloc; return true; });
  EXPECT_EQ(allocs, 1) << loop::print_loop(f);
  expect_matches(g, 0, [](loop::LoopFunc& f) {
    loop::cache(f, "i0", "in0");
    loop::parallel(f, "i0");  // the tile is declared inside the parallel loop: one per thread
  }, "alloc in0_tile: f32[40]");
}

TEST(CacheTile, TransposedTileIsReadContiguously) {
  Tensor x = input("x", {48, 40});
  Graph g = Graph::from_outputs({{"y", (transpose(x, 0, 1) * 2).node()}});
  expect_matches(g, 0, [](loop::LoopFunc& f) {
    loop::tile(f, "i0", "i1", 8, 8);
    loop::cache(f, "i1_o", "in0");
    // the copy loop's innermost dim has stride 1 in x
    std::string ir = loop::print_loop(f);
    EXPECT_NE(ir.find("in0_tile[((in0_tile_s0*8) + in0_tile_s1)] = in0[(((i0_o*8) + in0_tile_s1)"), std::string::npos) << ir;
  });
}

TEST(CacheTile, OutputTileIsWrittenBack) {
  Tensor a = input("a", {30, 40}), b = input("b", {30, 40});
  Graph g = Graph::from_outputs({{"y", (exp(a) * b + 2).node()}});
  expect_matches(g, 0, [](loop::LoopFunc& f) { loop::cache(f, "i0", "out"); }, "(written back)");
  // a split that leaves a remainder puts a guard around the store: the write-back honours it
  expect_matches(g, 0, [](loop::LoopFunc& f) {
    loop::split(f, "i1", 7);
    loop::cache(f, "i0", "out");
    loop::parallel(f, "i0");
  }, "out_tile: f32[42]");
  expect_matches(g, 0, [](loop::LoopFunc& f) {
    loop::split(f, "i1", 16);
    loop::cache(f, "i1_o", "in0");
    loop::cache(f, "i1_o", "out");
    loop::vectorize(f, "i1_i");
  });
}

TEST(CacheTile, ReductionInputAndAccumulatorOutput) {
  Tensor x = input("x", {16, 24, 12});
  Graph g = Graph::from_outputs({{"s", sum(x, {1}).node()}});
  expect_matches(g, 0, [](loop::LoopFunc& f) {
    auto names = loop::loop_names(f);
    loop::cache(f, names[0], "in0");   // the 24×12 slab for one output row
    loop::cache(f, names[0], "out");   // and the row of sums, written back after
  }, "(written back)");
}

TEST(CacheTile, Refusals) {
  Tensor x = input("x", {300, 400}), b = input("b", {400});
  Program p = build_program(Graph::from_outputs({{"y", (x * b).node()}}), BuildOptions{false});
  loop::LoopFunc& f = p.funcs[0];
  expect_refused(f, [&] { loop::cache(f, "i0", "nope"); }, "has no buffer nope (buffers: out, ");
  expect_refused(f, [&] { loop::cache(f, "zz", "in0"); }, "no such loop");
  expect_refused(f, [&] { loop::cache(f, "root", "in0"); }, "more than the 65536-byte limit");

  // symbolic extents: the tile size must be known
  Tensor y = input("y", {SymInt::var("N"), SymInt(8)});
  Program q = build_program(Graph::from_outputs({{"z", (y * 3).node()}}), BuildOptions{false});
  expect_refused(q.funcs[0], [&] { loop::cache(q.funcs[0], "root", "in0"); }, "needs constant extents");

  // hand-written kernels: an indirect access, an index that the loop itself updates, and
  // a written buffer accessed with two patterns
  loop::LoopFunc h;
  h.name = "hand";
  h.buffers = {{0, "out", DType::F32, true}, {1, "vals", DType::F32, false}, {2, "idx", DType::I64, false}};
  using namespace loop;
  h.body.push_back(make_let("k", DType::I64, const_int(0)));
  h.body.push_back(make_for("i", const_int(8), {
      make_store(0, load(2, DType::I64, var("i")), load(1, DType::F32, var("i"))),
      make_assign("k", add(var("k"), const_int(1))),
      make_store(0, add(var("i"), const_int(8)), load(1, DType::F32, var("k"))),
  }));
  expect_refused(h, [&] { cache(h, "root", "out"); }, "depends on loaded data");
  expect_refused(h, [&] { cache(h, "root", "vals"); }, "uses k, which the loop updates");
  EXPECT_EQ(cache(h, "root", "idx"), "idx_tile");  // the index buffer itself is a plain read

  LoopFunc w;
  w.name = "two";
  w.buffers = {{0, "out", DType::F32, true}};
  w.body.push_back(make_for("i", const_int(8), {
      make_store(0, var("i"), const_float(1, DType::F32)),
      make_store(0, mul(var("i"), const_int(2)), const_float(2, DType::F32)),
  }));
  expect_refused(w, [&] { cache(w, "root", "out"); }, "2 different index patterns");
  LoopFunc o;
  o.name = "overlap";
  o.buffers = {{0, "out", DType::F32, true}};
  o.body.push_back(make_for("i", const_int(4), {make_for("j", const_int(4), {
      make_store(0, add(var("i"), var("j")), const_float(1, DType::F32))})}));
  expect_refused(o, [&] { cache(o, "root", "out"); }, "one-to-one");
}

TEST(CacheTile, MatmulMicroKernelIsRefusedNotBroken) {
  Tensor a = input("a", {32, 48}), b = input("b", {48, 40});
  Program p = build_program(Graph::from_outputs({{"c", matmul(a, b).node()}}));
  loop::LoopFunc& f = p.funcs[0];
  ASSERT_EQ(f.kind, "matmul");
  std::string before = loop::print_loop(f);
  EXPECT_THROW(loop::cache(f, "t", "a"), UserError);
  EXPECT_EQ(loop::print_loop(f), before);
}

}  // namespace
}  // namespace lathe
