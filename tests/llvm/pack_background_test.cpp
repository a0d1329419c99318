// pack_background_test.cpp — a build that fills its large packed weights on a thread of its
// own (loop::DeferPacks with a loop::PackFiller, `lathe run`'s cold start): once the filler
// has finished, the program gives the interpreter's results (odd and prime sizes, batch 1 and 3
// of a few-row product) and the eager build's; two weights of the same shape keep two packed
// copies (their nodes are named apart: hash-consing never compares their unfilled zeros), and
// so do two builds of one graph; a weight two kernels read is packed once; small weights are
// packed at once; a filler dropped with work queued finishes it first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "backends/backend.h"
#include "core/frontend/frontend.h"
#include "core/interp/interp.h"
#include "core/loop/pack_defer.h"
#include "core/loop/prepack.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "core/schedule/executor.h"
#include "core/schedule/program.h"

namespace lathe {
namespace {

HostTensor weights(std::vector<int64_t> shape, double seed) {
  HostTensor t(DType::F32, std::move(shape));
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(std::sin(seed + 0.61 * static_cast<double>(i)));
  return t;
}

// Two few-row products whose weights (K x N floats, over kDeferPackMinBytes) have the same
// shape and different values, a third product reading the first weight again, and an epilogue.
Graph two_weights(int64_t batch, int64_t rows, int64_t K, int64_t N, double seed) {
  Tensor x = input("x", {batch, rows, K});
  Tensor w1 = from_host(weights({K, N}, seed)), w2 = from_host(weights({K, N}, seed + 1));
  Tensor y = relu(matmul(x, w1)) + matmul(x * 0.5, w2);
  Tensor z = matmul(x + 1.0, w1);
  return Graph::from_outputs({{"y", y.node()}, {"z", z.node()}});
}

std::vector<NodeRef> packed_nodes(const Program& p) {
  std::vector<NodeRef> v;
  for (const Kernel& k : p.kg.kernels)
    if (k.packed_b >= 0) v.push_back(p.kg.buffers[k.packed_b].node);
  return v;
}

TensorMap run_program(Program p, const TensorMap& in) {
  Backend& b = get_backend("llvm");
  auto cp = b.compile(p, CompileOptions{});
  Executable exe(std::move(p), std::move(cp), "llvm");
  return exe.run(in);
}

void expect_close(const TensorMap& got, const TensorMap& want, const std::string& what) {
  for (auto& [name, t] : want) {
    std::string why;
    EXPECT_TRUE(allclose(got.at(name), t, 1e-4, 1e-4, &why)) << what << ", " << name << ": " << why;
  }
}

Program build_deferred(const Graph& g, loop::PackFiller& filler) {
  loop::DeferPacks defer(&filler);
  return build_program(g);
}

TEST(PackBackground, FilledOffThreadMatchesInterpreter) {
  struct Case { int64_t batch, rows, K, N; };
  for (Case c : {Case{1, 3, 389, 701}, Case{3, 7, 509, 613}, Case{1, 2, 768, 401}}) {
    const std::string what = "batch " + std::to_string(c.batch) + ", " + std::to_string(c.rows) + " x " +
                             std::to_string(c.K) + " x " + std::to_string(c.N);
    Graph g = two_weights(c.batch, c.rows, c.K, c.N, 0.25 * static_cast<double>(c.K));
    TensorMap in = {{"x", random_tensor(DType::F32, {c.batch, c.rows, c.K}, 7)}};
    TensorMap want = interpret(g, in);
    loop::PackFiller filler;
    Program p = build_deferred(g, filler);
    std::vector<NodeRef> nodes = packed_nodes(p);
    ASSERT_EQ(nodes.size(), 3u) << what << ": three products, each with its weight packed";
    // two weights of one shape: two copies; the first weight, read twice, packed once
    std::set<NodeRef> distinct(nodes.begin(), nodes.end());
    EXPECT_EQ(distinct.size(), 2u) << what;
    EXPECT_EQ(filler.pushed(), 2) << what;
    // a second build of the same graph: its own copies, never the first build's nodes
    Program again = build_deferred(g, filler);
    for (NodeRef n : packed_nodes(again)) EXPECT_EQ(distinct.count(n), 0u) << what;
    EXPECT_EQ(filler.pushed(), 4) << what;
    filler.wait();
    expect_close(run_program(p, in), want, what + ", deferred build");
    expect_close(run_program(again, in), want, what + ", second deferred build");
    // no filler current: the same values, packed at once
    Program eager = build_program(g);
    EXPECT_EQ(filler.pushed(), 4) << what << ": a build outside DeferPacks queued work";
    expect_close(run_program(std::move(eager), in), want, what + ", eager build");
  }
}

TEST(PackBackground, SmallWeightsArePackedAtOnce) {
  // 37 x 53 floats: under kDeferPackMinBytes (packed only because every B is, LATHE_PREPACK=all)
  ::setenv("LATHE_PREPACK", "all", 1);
  Graph g = two_weights(2, 5, 37, 53, 1.5);
  TensorMap in = {{"x", random_tensor(DType::F32, {2, 5, 37}, 3)}};
  loop::PackFiller filler;
  Program p = build_deferred(g, filler);
  ::unsetenv("LATHE_PREPACK");
  EXPECT_FALSE(packed_nodes(p).empty());
  EXPECT_EQ(filler.pushed(), 0);
  expect_close(run_program(std::move(p), in), interpret(g, in), "small weights");
}

TEST(PackBackground, DroppedFillerFinishesItsWork) {
  std::atomic<int> ran{0};
  {
    loop::PackFiller filler;
    for (int i = 0; i < 5; ++i)
      filler.push([&ran] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ++ran;
      });
  }  // dropped at once: its queue still runs
  EXPECT_EQ(ran.load(), 5);
  Graph g = two_weights(2, 5, 401, 677, 3.5);
  TensorMap in = {{"x", random_tensor(DType::F32, {2, 5, 401}, 11)}};
  Program p;
  {
    loop::PackFiller filler;
    p = build_deferred(g, filler);
  }  // the program outlives its filler: its copies are filled
  expect_close(run_program(std::move(p), in), interpret(g, in), "a build whose filler is gone");
}

}  // namespace
}  // namespace lathe
