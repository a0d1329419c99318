// prepack_batched_test.cpp — a constant GEMM operand that differs per batch entry (a
// [B, M, K] or [B, K, N] weight; Winograd's transformed weights U [16, K, C]) is packed once
// per entry when the program is built (core/loop/prepack.h) and each job reads its entry's
// copy: batch 1, 3 and 16, prime M, K and N, the weight on either side, a weight broadcast
// over one of two batch axes, against the interpreter on the backend under test.
#include <cstdlib>
#include <string>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/prepack.h"
#include "core/schedule/kernel_graph.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

using test::sin_weights;
using test::ScopedEnv;

// matmul kernels whose constant side is packed per batch entry (A rank 5, B rank 2), and
// whose schedule log says a side is prepacked
struct Packed {
  int per_entry = 0, prepacked = 0;
};
Packed packed_of(const Program& p) {
  Packed r;
  for (int i = 0; i < p.num_kernels(); ++i) {
    const Kernel& k = p.kg.kernels[i];
    if (k.kind != "matmul") continue;
    const int a = loop::packed_a_buffer(p.kg, k);
    r.per_entry += (a >= 0 && p.kg.buffers[a].shape.size() == 5) || (k.packed_b >= 0 && p.kg.buffers[k.packed_b].shape.size() == 2);
    for (const std::string& line : p.funcs[i].schedule_log) r.prepacked += line.find("prepacked") != std::string::npos;
  }
  return r;
}

void expect_matches(const Graph& g, const std::string& what) {
  TensorMap in = random_inputs(g, 7);
  EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in), 4), "") << what;
}

TEST(PrepackBatched, PerBatchConstantsArePackedOncePerEntry) {
  ScopedEnv all("LATHE_PREPACK", "all");
  struct Case { int64_t b, m, k, n; bool weight_a; };
  for (Case c : {Case{1, 13, 37, 29, true}, Case{3, 13, 37, 29, true}, Case{16, 67, 71, 11, true},
                 Case{16, 7, 263, 5, true}, Case{3, 11, 41, 53, false}, Case{16, 3, 67, 131, false},
                 Case{1, 5, 19, 23, false}}) {
    const std::string what = "b" + std::to_string(c.b) + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                             std::to_string(c.n) + (c.weight_a ? " weight A" : " weight B");
    Tensor y = c.weight_a ? matmul(from_host(sin_weights({c.b, c.m, c.k}, 3)), input("x", {c.b, c.k, c.n}))
                          : matmul(input("x", {c.b, c.m, c.k}), from_host(sin_weights({c.b, c.k, c.n}, 3)));
    Graph g = Graph::from_outputs({{"y", relu(y).node()}});
    Program p = build_program(g);
    const Packed pk = packed_of(p);
    EXPECT_EQ(pk.prepacked, 1) << what << "\n" << test::loop_ir_of(p);
    EXPECT_EQ(pk.per_entry, c.b > 1 ? 1 : 0) << what;
    expect_matches(g, what);
  }
}

TEST(PrepackBatched, AWeightBroadcastOverOneBatchAxis) {
  ScopedEnv all("LATHE_PREPACK", "all");
  // w [3, 1, M, K] against x [3, 5, K, N]: entries over the first batch axis only
  for (bool weight_a : {true, false}) {
    Tensor y = weight_a ? matmul(from_host(sin_weights({3, 1, 17, 43}, 2)), input("x", {3, 5, 43, 19}))
                        : matmul(input("x", {3, 5, 19, 43}), from_host(sin_weights({3, 1, 43, 17}, 2)));
    Graph g = Graph::from_outputs({{"y", y.node()}});
    Program p = build_program(g);
    EXPECT_EQ(packed_of(p).per_entry, 1) << (weight_a ? "A" : "B") << "\n" << test::loop_ir_of(p);
    expect_matches(g, weight_a ? "broadcast A" : "broadcast B");
  }
}

TEST(PrepackBatched, OffBySwitch) {
  ScopedEnv all("LATHE_PREPACK", "all");
  ScopedEnv off("LATHE_PREPACK_BATCHED", "0");
  if (loop::prepack_batched_enabled()) GTEST_SKIP() << "the switch is read once per process";
  Graph g = Graph::from_outputs({{"y", matmul(input("x", {3, 6, 23}), from_host(sin_weights({3, 23, 19}, 2))).node()}});
  EXPECT_EQ(packed_of(build_program(g)).per_entry, 0);
}

// Winograd's 16 GEMMs (conv2d_winograd): U prepacked per ξ, both orientations (a 14 x 14 map
// of 49 tiles and a 7 x 7 one of 16: the late layer's sides swapped), prime channels, batch 1 and 2
TEST(PrepackBatched, WinogradWeightsArePackedOncePerTilePosition) {
  struct Case { int64_t n, c, h, k; };
  for (Case t : {Case{1, 67, 14, 71}, Case{1, 131, 7, 127}, Case{2, 41, 9, 37}}) {
    const std::string what = "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + " k" + std::to_string(t.k);
    Tensor x = input("x", {t.n, t.c, t.h, t.h});
    Tensor y = conv2d_winograd(x, sin_weights({t.k, t.c, 3, 3}, 1), from_host(sin_weights({t.k}, 4)), {1, 1, 1, 1});
    Graph g = Graph::from_outputs({{"y", relu(y).node()}});
    Program p = build_program(g);
    EXPECT_EQ(packed_of(p).per_entry, 1) << what << "\n" << test::loop_ir_of(p);
    expect_matches(g, what);
  }
}

// Winograd's U is a computed tensor (HostTensor::computed, winograd.cpp): once the program
// reads only its packed copy, the build frees it (prepack.cpp: resnet50's ~80 MB), while the
// graph's node still gives its values (the interpreter computes them again). The program runs
// right before and after that, and after a second build freed it again.
TEST(PrepackBatched, WinogradWeightsAreFreedOncePacked) {
  struct Case { int64_t n, c, h, k; };
  for (Case t : {Case{1, 67, 14, 71}, Case{2, 41, 9, 37}}) {
    const std::string what = "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + " k" + std::to_string(t.k);
    Tensor y = conv2d_winograd(input("x", {t.n, t.c, t.h, t.h}), sin_weights({t.k, t.c, 3, 3}, 1), std::nullopt, {1, 1, 1, 1});
    Graph g = Graph::from_outputs({{"y", relu(y).node()}});
    NodeRef u;
    for (const NodeRef& n : g.toposort())
      if (n->op == Op::Const && n->attrs.data && n->attrs.data->recomputable()) u = n;
    ASSERT_TRUE(u) << what;
    const HostTensor& U = *u->attrs.data;
    const HostTensor before = U.clone();
    Executable e = compile_graph(g, test::test_backend());
    if (packed_of(e.program()).per_entry != 1) GTEST_SKIP() << "U not prepacked on this backend";
    EXPECT_FALSE(U.materialized()) << what;
    TensorMap in = random_inputs(g, 7);
    EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in), 4), "") << what;
    EXPECT_TRUE(U.materialized()) << what << ": the interpreter computes U again";
    EXPECT_TRUE(U.same_content(before)) << what;
    EXPECT_EQ(test::compare_outputs(e.run(in), interpret(g, in), 4), "") << what << " (second run)";
    Executable e2 = compile_graph(g, test::test_backend());
    EXPECT_FALSE(U.materialized()) << what << ": freed by the second build";
    for (Executable* x : {&e, &e2}) EXPECT_EQ(test::compare_outputs(x->run(in), interpret(g, in), 4), "") << what;
  }
}

}  // namespace
}  // namespace lathe
