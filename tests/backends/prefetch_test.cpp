// prefetch_test.cpp — the loop IR's Prefetch statement (a cache hint: buffer[index]'s line
// toward the core, for a read or a write, at a locality 0-3): its builder's checks, the
// printer (`prefetch.w out[…]`), the kernel keys (write and locality are part of the code),
// the base-offset hoist, and the backend under test running it (c: __builtin_prefetch, llvm:
// llvm.prefetch, cuda: nothing) through split / unroll / vectorize / parallel with the
// interpreter's results; and the packed matmul's output-tile prefetches at odd sizes.
#include "backends/kernel_dedup.h"
#include "backends/kernel_param.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/base_offsets.h"
#include "core/loop/loop_print.h"
#include "core/loop/transform.h"
#include "core/tune/space.h"
#include "diff_util.h"

namespace lathe {
namespace {

using loop::StmtKind;

int count_prefetches(const loop::LoopFunc& f) {
  int n = 0;
  loop::walk(f.body, [&](const loop::Stmt& s) { n += s.kind == StmtKind::Prefetch; return true; });
  return n;
}

int param(const loop::LoopFunc& f, bool written) {
  for (size_t p = 0; p < f.buffers.size(); ++p)
    if (f.buffers[p].written == written) return static_cast<int>(p);
  return -1;
}

// The plain loops of y = x * 2 + 1 over `shape` with, before the innermost loop's store, a
// read prefetch of x 16 elements ahead (clamped into x) at locality `loc` and a write
// prefetch of y at the store's element.
loop::LoopFunc with_prefetches(const Program& p, int64_t numel, int loc) {
  loop::LoopFunc f = tune::replay(p.kg, 0, {});
  f.name = p.funcs[0].name;
  const int in = param(f, false), out = param(f, true);
  int inserted = 0;
  loop::walk(f.body, [&](loop::Stmt& s) {
    if (s.kind != StmtKind::For) return true;
    for (size_t i = 0; i < s.body.size(); ++i)
      if (s.body[i].kind == StmtKind::Store) {
        loop::ExprRef at = s.body[i].index;
        loop::ExprRef ahead = loop::min_of(loop::add(at, loop::const_int(16)), loop::const_int(numel - 1));
        s.body.insert(s.body.begin() + static_cast<std::ptrdiff_t>(i),
                      {loop::make_prefetch(in, ahead, /*write=*/false, loc), loop::make_prefetch(out, at, /*write=*/true)});
        inserted += 2;
        return false;
      }
    return true;
  });
  EXPECT_EQ(inserted, 2) << loop::print_loop(f);
  return f;
}

Graph scale_graph(const Shape& shape) {
  Tensor x = input("x", shape);
  return Graph::from_outputs({{"y", (x * 2.0 + 1.0).node()}});
}

// f in place of kernel 0 of p, run on the backend under test against the interpreter
void expect_runs(Program p, const loop::LoopFunc& f, const Graph& g) {
  p.funcs[0] = f;
  Backend& b = get_backend(test::test_backend());
  Executable e(p, b.compile(p), test::test_backend());
  TensorMap in = random_inputs(g, 11);
  EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in)), "") << loop::print_loop(f);
}

TEST(Prefetch, TheBuilderChecksItsOperands) {
  loop::Stmt s = loop::make_prefetch(2, loop::var("i"), /*write=*/true, 1);
  EXPECT_EQ(s.kind, StmtKind::Prefetch);
  EXPECT_EQ(s.buffer, 2);
  EXPECT_TRUE(s.write);
  EXPECT_EQ(s.locality, 1);
  EXPECT_FALSE(s.value);
  EXPECT_ANY_THROW(loop::make_prefetch(-1, loop::var("i"), false));
  EXPECT_ANY_THROW(loop::make_prefetch(0, loop::var("i"), false, 4));
  EXPECT_ANY_THROW(loop::make_prefetch(0, loop::var("i"), false, -1));
  EXPECT_ANY_THROW(loop::make_prefetch(0, loop::var("i", DType::I64, 8), false));  // a vector index
  EXPECT_ANY_THROW(loop::make_prefetch(0, loop::const_float(1, DType::F32), false));
  EXPECT_ANY_THROW(loop::make_prefetch(0, nullptr, false));
}

TEST(Prefetch, PrintsAndKeysItsKind) {
  Graph g = scale_graph({7, 13});
  Program p = build_program(g);
  ASSERT_EQ(p.num_kernels(), 1);
  loop::LoopFunc f = with_prefetches(p, 7 * 13, 0);
  const std::string in = f.buffers[param(f, false)].name, out = f.buffers[param(f, true)].name;
  std::string text = loop::print_loop(f);
  EXPECT_NE(text.find("prefetch.r " + in + "[(("), std::string::npos) << text;
  EXPECT_NE(text.find("locality 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("prefetch.w " + out + "["), std::string::npos) << text;
  EXPECT_EQ(text.find("locality 3"), std::string::npos) << text;  // the default is not printed
  // write and locality are part of the code: the kernel-cache and shape-parameter keys see them
  loop::LoopFunc g3 = with_prefetches(p, 7 * 13, 3), plain = tune::replay(p.kg, 0, {});
  g3.name = plain.name = f.name;
  EXPECT_NE(code_key(f), code_key(g3));
  EXPECT_NE(shape_param_key(f), shape_param_key(g3));
  EXPECT_NE(code_key(f), code_key(plain));
  EXPECT_NE(shape_param_key(f), shape_param_key(plain));
  loop::LoopFunc again = with_prefetches(p, 7 * 13, 0);
  EXPECT_EQ(code_key(f), code_key(again));
}

TEST(Prefetch, BaseOffsetsMoveAReadOnlyBuffersPrefetchesWithItsLoads) {
  // for i in 0..8: out[i] = in[i + 5] * 2; prefetch.r in[i + 7]  ->  in @+5: in[i], in[i + 2]
  loop::LoopFunc f;
  f.name = "k";
  f.kind = "elementwise";
  f.buffers = {{0, "in", DType::F32, false}, {1, "out", DType::F32, true}};
  loop::ExprRef i = loop::var("i");
  f.body.push_back(loop::make_for(
      "i", loop::const_int(8),
      {loop::make_prefetch(0, loop::add(i, loop::const_int(7)), false),
       loop::make_store(1, i, loop::binary(Op::Mul, loop::load(0, DType::F32, loop::add(i, loop::const_int(5))),
                                           loop::const_float(2, DType::F32)))}));
  EXPECT_EQ(loop::hoist_base_offsets(f), 1);
  EXPECT_EQ(f.buffers[0].offset, 5);
  std::string text = loop::print_loop(f);
  EXPECT_NE(text.find("prefetch.r in[(i + 2)]"), std::string::npos) << text;
  EXPECT_NE(text.find("out[i] = (in[i]*2.0)"), std::string::npos) << text;
  // a prefetch below every load keeps the buffer where it is (the address stays inside it)
  loop::LoopFunc h = f;
  h.buffers[0].offset = 0;
  h.body[0].body[0] = loop::make_prefetch(0, i, false);
  h.body[0].body[1].value = loop::binary(Op::Mul, loop::load(0, DType::F32, loop::add(i, loop::const_int(5))),
                                         loop::const_float(2, DType::F32));
  EXPECT_EQ(loop::hoist_base_offsets(h), 0) << loop::print_loop(h);
}

// Prefetches through the schedule primitives, then run: rows of 29 (prime), batch 1 and 3.
TEST(Prefetch, ScheduledKernelsMatchTheInterpreter) {
  for (Shape shape : {Shape{1, 29}, Shape{3, 7, 29}, Shape{37, 29}}) {
    Graph g = scale_graph(shape);
    Program p = build_program(g);
    ASSERT_EQ(p.num_kernels(), 1);
    int64_t numel = 1;
    for (auto& d : shape) numel *= d.value();
    loop::LoopFunc f = with_prefetches(p, numel, 1);
    expect_runs(p, f, g);  // plain loops
    std::vector<std::string> names = loop::loop_names(f);
    const std::string inner = names.back(), outer = names.front();
    loop::split(f, inner, 8);  // 29 = 3 x 8 + 5: a guarded tail
    names = loop::loop_names(f);
    loop::vectorize(f, names.back());
    loop::unroll(f, names[names.size() - 2], 2);
    if (names.size() > 2) loop::parallel(f, outer);
    EXPECT_EQ(count_prefetches(f), 2) << loop::print_loop(f);
    expect_runs(p, f, g);
  }
}

// The packed matmul prefetches each full output tile (for a write) before its k loop: odd
// sizes, a ragged panel, batch 1 and 2, M = 1 (no full tile).
TEST(Prefetch, MatmulOutputTilePrefetchesMatchTheInterpreter) {
  test::DiffBatch batch;
  struct Case { Shape a, b; };
  for (Case c : {Case{{67, 45}, {45, 131}}, Case{{2, 29, 53}, {53, 97}}, Case{{1, 61}, {61, 67}}, Case{{1, 13, 37}, {1, 37, 41}}}) {
    Tensor a = input("a", c.a), b = input("b", c.b);
    Graph g = Graph::from_outputs({{"y", matmul(a, b).node()}});
    std::string ir = test::loop_ir_of(build_program(g));
    const char* env = std::getenv("LATHE_MATMUL_PREFETCH_C");
    if (ir.find("matmul: MR=") != std::string::npos && c.a[c.a.size() - 2].value() > 1 && !(env && std::string(env) == "0")) {
      EXPECT_NE(ir.find("prefetch.w out["), std::string::npos) << ir;
    }
    EXPECT_EQ(ir.find("let prefetch"), std::string::npos) << ir;
    batch.add(c.a.size() == 2 ? "matmul 2-d" : "matmul batched", g);
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
