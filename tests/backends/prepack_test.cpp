// prepack_test.cpp — constant GEMM B operands (weights) are packed once when the program is
// built (core/loop/prepack.h) and the kernel reads the packed panels on every run, on odd,
// prime and blocked shapes, against the interpreter on the backend under test.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "core/loop/prepack.h"
#include "core/schedule/kernel_graph.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

using test::sin_weights;
using test::ScopedEnv;

// the matmul kernels: (prepacked, loop IR packs B itself)
struct MatmulKernels {
  int prepacked = 0, packs_b = 0, total = 0;
};
MatmulKernels matmul_kernels(const Program& p) {
  MatmulKernels r;
  for (int i = 0; i < p.num_kernels(); ++i) {
    if (p.kg.kernels[i].kind != "matmul") continue;
    ++r.total;
    r.prepacked += p.kg.kernels[i].packed_b >= 0;
    r.packs_b += loop::print_loop(p.funcs[i]).find("pack B") != std::string::npos;
  }
  return r;
}

// Did the lowering of matmul kernel i swap its sides (the positions on A, the weights on B)?
// loop::orient_matmul at the tile its log names ("matmul: MR=8 NR=32 …").
bool swapped_sides(const Program& p, int i) {
  loop::MatmulParams tile;
  const std::string& log = p.funcs[i].schedule_log.at(0);
  EXPECT_EQ(std::sscanf(log.c_str(), "matmul: MR=%d NR=%d", &tile.mr, &tile.nr), 2) << log;
  const Kernel& k = p.kg.kernels[i];
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  EXPECT_TRUE(mm) << log;
  return mm && loop::orient_matmul(*mm, tile);
}

void expect_matches(const Graph& g, const std::string& what, double loosen = 1) {
  TensorMap in = random_inputs(g, 7);
  EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in), loosen), "") << what;
}

// By default only weights larger than the last-level cache are prepacked; these tests use
// small ones, so they ask for all (LATHE_PREPACK=all) while they run.
struct PrepackAll : ScopedEnv {
  PrepackAll() : ScopedEnv("LATHE_PREPACK", "all") {}
};

TEST(Prepack, OnlyWeightsLargerThanTheCacheByDefault) {
  EXPECT_GE(loop::prepack_min_bytes(), int64_t(1) << 20);
  Tensor x = input("x", {6, 37});
  Graph g = Graph::from_outputs({{"y", matmul(x, from_host(sin_weights({37, 53}, 1))).node()}});
  EXPECT_EQ(matmul_kernels(build_program(g)).prepacked, 0);
  PrepackAll all;
  EXPECT_EQ(matmul_kernels(build_program(g)).prepacked, 1);
}

// A weight of 1 MiB or more under few rows (a transformer's projection at T = 128 tokens) is
// prepacked by default whatever its size; many rows (M x batch over kPrepackFewRows) keep the
// per-run copy; LATHE_PREPACK=large restores the size rule alone. Odd and prime T (77, 131),
// batch 1 and 2, K across KC blocks, N no multiple of NR, bias + GELU and residual epilogues.
TEST(Prepack, FewRowsPrepackLargeWeightsByDefault) {
  struct Case { int64_t batch, t, k, n; bool packed; };
  for (Case c : {Case{1, 128, 700, 1543, true}, Case{1, 77, 768, 389, true}, Case{2, 131, 389, 700, true},
                 Case{1, 5, 1031, 257, true}, Case{8, 131, 389, 700, false}}) {
    std::string what = std::to_string(c.batch) + "x" + std::to_string(c.t) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n);
    Tensor x = input("x", {c.batch, c.t, c.k});
    Tensor w = from_host(sin_weights({c.k, c.n}, 5)), b = from_host(sin_weights({c.n}, 2));
    Tensor h = gelu(matmul(x, w) + b, "tanh");
    Tensor w2 = from_host(sin_weights({c.n, c.k}, 7));
    Graph g = Graph::from_outputs({{"y", (matmul(h, w2) + x).node()}});
    Program p = build_program(g);
    MatmulKernels mk = matmul_kernels(p);
    EXPECT_EQ(mk.total, 2) << what;
    EXPECT_EQ(mk.prepacked, c.packed ? 2 : 0) << what << "\n" << test::loop_ir_of(p);
    // two chained sums over 389-1543 products of O(1) values, blocked by KC here and in
    // order in the interpreter: the plain matmul without prepacking differs as much
    expect_matches(g, what, 50);
  }
  Tensor x = input("x", {1, 77, 768});
  Graph g = Graph::from_outputs({{"y", matmul(x, from_host(sin_weights({768, 389}, 5))).node()}});
  const int large = [&] {
    ScopedEnv env("LATHE_PREPACK", "large");
    return matmul_kernels(build_program(g)).prepacked;
  }();
  EXPECT_EQ(large, 0);
}

TEST(Prepack, ConstantWeightsArePackedOnceNotPerRun) {
  PrepackAll all;
  // K crosses the KC block (256) and N the NC block; M from two rows to more than the MC
  // block (one row is a matrix-vector product: a plain reduction, nothing packed); primes
  // and odd sizes everywhere
  struct Case { int64_t m, k, n; bool transposed; };
  for (Case c : {Case{2, 37, 53, false}, Case{7, 300, 1009, false}, Case{64, 257, 17, true}, Case{149, 13, 97, true},
                 Case{5, 768, 131, false}}) {
    std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + (c.transposed ? " (W^T)" : "");
    Tensor x = input("x", {c.m, c.k});
    Tensor w = c.transposed ? t(from_host(sin_weights({c.n, c.k}, c.n))) : from_host(sin_weights({c.k, c.n}, c.n));
    Graph g = Graph::from_outputs({{"y", relu(matmul(x, w) + from_host(sin_weights({c.n}, 3))).node()}});
    Program p = build_program(g);
    MatmulKernels mk = matmul_kernels(p);
    EXPECT_EQ(mk.total, 1) << what;
    EXPECT_EQ(mk.prepacked, 1) << what;
    EXPECT_EQ(mk.packs_b, 0) << what << "\n" << test::loop_ir_of(p);
    expect_matches(g, what);
  }
}

TEST(Prepack, WeightViewsArePackedByRunsOrTiles) {
  PrepackAll all;
  // the packing's fast paths (whole [K, N] rows copied, B^T transposed in 4 x 4 tiles) over
  // weights that are views of a larger constant: a row stride other than N or K, an offset,
  // ragged panels and KC blocks, against the interpreter. (Offsets that are not one stride,
  // packed element by element, are a convolution's: LateConvWeightsArePackedOnceByDefault.)
  struct Case { int64_t m, k, n; int layout; };  // 0: [K, N] slice, 1: [N, K] slice (W^T)
  for (Case c : {Case{3, 259, 37, 0}, Case{11, 7, 131, 0}, Case{5, 263, 19, 1}, Case{13, 5, 3, 1}, Case{64, 17, 16, 1}}) {
    std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " layout " + std::to_string(c.layout);
    Tensor x = input("x", {c.m, c.k});
    Tensor w;
    if (c.layout == 0) w = narrow(narrow(from_host(sin_weights({c.k + 2, c.n + 5}, 2)), 1, 3, c.n), 0, 2, c.k);
    else w = t(narrow(narrow(from_host(sin_weights({c.n + 1, c.k + 4}, 3)), 1, 1, c.k), 0, 1, c.n));
    Graph g = Graph::from_outputs({{"y", matmul(x, w).node()}});
    Program p = build_program(g);
    EXPECT_EQ(matmul_kernels(p).prepacked, 1) << what << "\n" << test::loop_ir_of(p);
    expect_matches(g, what);
  }
}

TEST(Prepack, BatchedInputsShareOnePackedWeight) {
  PrepackAll all;
  // batch 1 and 64 over a [K, N] weight: one packed copy serves every batch element
  for (int64_t b : {1, 64}) {
    Tensor x = input("x", {b, 3, 41});
    Tensor w = from_host(sin_weights({41, 29}, 1));
    Graph g = Graph::from_outputs({{"y", matmul(x, w).node()}});
    Program p = build_program(g);
    EXPECT_EQ(matmul_kernels(p).prepacked, 1) << "batch " << b << "\n" << test::loop_ir_of(p);
    expect_matches(g, "batch " + std::to_string(b));
  }
}

TEST(Prepack, OperandsThatChangeOrDependOnTheBatchAreNotPrepacked) {
  PrepackAll all;
  // B an input (activations): packed per run (a constant that differs per batch element is
  // packed once per entry: prepack_batched_test.cpp)
  Tensor x = input("x", {6, 23}), y = input("y", {23, 19});
  Graph g1 = Graph::from_outputs({{"z", matmul(x, y).node()}});
  Program p1 = build_program(g1);
  EXPECT_EQ(matmul_kernels(p1).prepacked, 0);
  EXPECT_EQ(matmul_kernels(p1).packs_b, 1);
  expect_matches(g1, "input B");
  // plain loops (no default schedule) never use the packed copy
  Tensor x3 = input("x", {4, 11});
  Graph g3 = Graph::from_outputs({{"z", matmul(x3, from_host(sin_weights({11, 9}, 4))).node()}});
  EXPECT_EQ(matmul_kernels(build_program(g3, BuildOptions{false})).prepacked, 0);
}

// A late convolution layer (few positions, its sides swapped by orient_matmul) has its
// weights on the B side: they are prepacked by default at any size, the positions gathered
// per run; an early layer (positions on B) packs its input per run as before. Batch 1 and 2,
// prime channel counts, 1x1 and 3x3, bias and relu epilogues, against the interpreter.
// Which layers swap depends on the tile (orient_matmul): `late` is AVX2's (NR=16); under
// AVX-512's NR=32 the 7 x 7 layers keep their weights on A (they pad less there), 3 x 3
// and 9 x 9 swap. Both kinds must be among the cases on any host.
TEST(Prepack, LateConvWeightsArePackedOnceByDefault) {
  Conv2dOptions same;
  same.padding = {1, 1};
  struct Case { int64_t n, c, h, k, r; bool late; };
  int swaps = 0, keeps = 0;
  for (Case t : {Case{1, 23, 7, 131, 3, true}, Case{1, 41, 7, 257, 1, true}, Case{2, 19, 3, 67, 3, true},
                 Case{1, 131, 9, 521, 1, false}, Case{1, 9, 17, 13, 3, false}}) {  // (<= 8 input channels: the direct nest, no GEMM)
    std::string what = "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + "x" +
                       std::to_string(t.h) + " k" + std::to_string(t.k) + " " + std::to_string(t.r) + "x" + std::to_string(t.r);
    Tensor x = input("x", {t.n, t.c, t.h, t.h});
    Tensor w = from_host(sin_weights({t.k, t.c, t.r, t.r}, static_cast<double>(t.k)));
    Graph g = Graph::from_outputs({{"y", relu(conv2d(x, w, from_host(sin_weights({t.k}, 5)), t.r == 3 ? same : Conv2dOptions{})).node()}});
    Program p = build_program(g);
    MatmulKernels mk = matmul_kernels(p);
    EXPECT_EQ(mk.total, 1) << what;
    bool swapped = false;
    for (int i = 0; i < p.num_kernels(); ++i)
      if (p.kg.kernels[i].kind == "matmul") swapped = swapped_sides(p, i);
    if (loop::host_matmul_params().nr == 16) EXPECT_EQ(swapped, t.late) << what;
    (swapped ? swaps : keeps) += 1;
    EXPECT_EQ(mk.prepacked, swapped ? 1 : 0) << what << "\n" << test::loop_ir_of(p);
    EXPECT_EQ(mk.packs_b, swapped ? 0 : 1) << what;
    expect_matches(g, what);
  }
  EXPECT_GE(swaps, 1);
  EXPECT_GE(keeps, 1);
}

// A build that schedules again (a kernel's lowering asked for a node to be materialized, as
// ResNet-50's and MobileNetV2's heads do) takes the packed copies of its first attempt from a
// PackMemo instead of packing every weight a second time. Both sides (B: a wide weight; A: a
// convolution's weights with few positions, batch 1), odd sizes, matmul rows 2 and 64 (one row is a
// matrix-vector product, not packed); a different weight or
// layout is packed anew, and the program built with the memo matches the interpreter.
TEST(Prepack, ASecondSchedulingAttemptReusesThePackedWeights) {
  PrepackAll all;
  const loop::MatmulParams P = loop::host_matmul_params();
  Conv2dOptions same;
  same.padding = {1, 1};
  for (int64_t n : {2, 64}) {
    Tensor x = input("x", {n, 37}), img = input("img", {1, 9, 7, 7});
    Tensor y = relu(matmul(x, from_host(sin_weights({37, 53}, 9))));
    Tensor z = matmul(x, from_host(sin_weights({37, 29}, 10)));
    Tensor c = conv2d(img, from_host(sin_weights({13, 9, 3, 3}, 11)), std::nullopt, same);  // W · X: W on the A side
    Graph g = Graph::from_outputs({{"y", y.node()}, {"z", z.node()}, {"c", c.node()}});
    loop::PackMemo memo;
    auto packed_nodes = [&](KernelGraph& kg) {
      std::vector<int> b = loop::prepack_constant_b(kg, P, 0, 0, &memo);
      std::vector<int> a = loop::prepack_constant_a(kg, P, loop::kPrepackAMaxN, loop::kPrepackAMaxBytes, 0, 0, 0, &memo);
      std::vector<NodeRef> nodes;
      for (const Kernel& k : kg.kernels)
        for (int buf : {k.packed_b, loop::packed_a_buffer(kg, k)})
          if (buf >= 0) nodes.push_back(kg.buffers[buf].node);
      EXPECT_EQ(nodes.size(), b.size() + a.size());
      return nodes;
    };
    KernelGraph first = schedule_graph(g), second = schedule_graph(g);
    std::vector<NodeRef> one = packed_nodes(first);
    const size_t entries = memo.packed.size();
    EXPECT_EQ(memo.reused, 0);
    EXPECT_GE(one.size(), 3u) << "batch " << n << ": two weights on the B side and the conv's on the A side";
    EXPECT_EQ(entries, one.size()) << "batch " << n << ": a different weight is a different packing";
    std::vector<NodeRef> two = packed_nodes(second);
    EXPECT_EQ(memo.reused, static_cast<int>(one.size())) << "batch " << n << ": the second attempt packed again";
    EXPECT_EQ(two, one);
    EXPECT_EQ(memo.packed.size(), entries);
    expect_matches(g, "batch " + std::to_string(n));
  }
}

// An early or middle convolution (NCHW: W · X, the weights on the A side) with at most
// kPrepackAMaxN positions has its weights packed once into MR-tall panels, by default; the
// kernel no longer packs A per run. Output channels no multiple of MR (6 on AVX2), K across
// the KC block, stride 2, an M split (few positions, many channels), batch 1, 2 and 64,
// residual and relu epilogues, against the interpreter. Beyond kPrepackAMaxN positions, or
// with weights over kPrepackAMaxBytes (1801 x 37 floats) and more than kPrepackAFewN
// columns (33 x 33; 5 x 5 at batch 48: 1200), A is packed per run as before; with few
// columns (9 x 9, 8 x 8 after stride 2) weights of any size are packed (a 14 x 14 layer's
// 2.4 MB 3x3 weights). LATHE_PREPACK_A=small keeps the old cap for those too. Where the
// lowering puts the positions on the A side (loop::orient_matmul: 9 x 9 under AVX-512's
// NR=32), the weights are B, packed once; 11 x 11 keeps them on A under both tiles.
TEST(Prepack, ConvWeightsOnTheASideArePackedOnceWhenPositionsAreFew) {
  Conv2dOptions same, strided;
  same.padding = {1, 1};
  strided.padding = {1, 1};
  strided.stride = {2, 2};
  struct Case { int64_t n, c, h, k, r; bool stride2; bool packed; };
  for (Case t : {Case{1, 23, 14, 13, 1, false, true}, Case{2, 41, 11, 37, 3, false, true}, Case{1, 17, 23, 31, 3, true, true},
                 Case{1, 29, 9, 257, 1, false, true}, Case{64, 7, 5, 11, 1, false, true}, Case{1, 3, 67, 7, 1, false, false},
                 Case{1, 37, 33, 1801, 1, false, false}, Case{1, 131, 9, 521, 1, false, true}, Case{1, 131, 11, 521, 1, false, true},
                 Case{1, 29, 15, 257, 3, true, true}, Case{48, 8, 5, 911, 3, false, false}}) {
    std::string what = "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + "x" +
                       std::to_string(t.h) + " k" + std::to_string(t.k) + " " + std::to_string(t.r) + "x" + std::to_string(t.r) +
                       (t.stride2 ? " stride 2" : "");
    Tensor x = input("x", {t.n, t.c, t.h, t.h});
    Tensor w = from_host(sin_weights({t.k, t.c, t.r, t.r}, static_cast<double>(t.k)));
    Conv2dOptions o = t.stride2 ? strided : t.r == 3 ? same : Conv2dOptions{};
    Tensor y = conv2d(x, w, from_host(sin_weights({t.k}, 5)), o);
    Graph g = Graph::from_outputs({{"y", relu(y + y).node()}});
    Program p = build_program(g);
    int packed_a = 0, packs_a = 0, packed_b = 0, packs_b = 0, matmuls = 0;
    bool swapped = false;  // the weights on the B side (loop::orient_matmul at the kernel's tile)
    for (int i = 0; i < p.num_kernels(); ++i) {
      const Kernel& k = p.kg.kernels[i];
      if (k.kind != "matmul") continue;
      ++matmuls;
      packed_a += loop::packed_a_buffer(p.kg, k) >= 0;
      packed_b += k.packed_b >= 0;
      const std::string ir = loop::print_loop(p.funcs[i]);
      packs_a += ir.find("pack A") != std::string::npos;
      packs_b += ir.find("pack B") != std::string::npos;
      swapped = swapped_sides(p, i);
    }
    EXPECT_EQ(matmuls, 1) << what;
    // which side is packed at build depends on the job split, i.e. the thread count: the
    // expectations are a 2-thread machine's (CI's); more threads may split M instead
    if (std::thread::hardware_concurrency() == 2) {
      if (!swapped) {
        EXPECT_EQ(packed_a, t.packed ? 1 : 0) << what << "\n" << test::loop_ir_of(p);
        EXPECT_EQ(packs_a, t.packed ? 0 : 1) << what;
      } else {
        // positions in rows shorter than NR, fewer than 4 NR, that pad less as the rows
        // (9 x 9 under AVX-512's NR=32; never under AVX2's 16): the positions are A, packed
        // per run, and the weights B, packed once whatever their size
        EXPECT_TRUE(t.packed) << what << ": the weights on the B side, expected on A\n" << test::loop_ir_of(p);
        EXPECT_EQ(packed_a, 0) << what;
        EXPECT_EQ(packed_b, 1) << what << "\n" << test::loop_ir_of(p);
        EXPECT_EQ(packs_b, 0) << what;
      }
    }
    expect_matches(g, what);
  }
  // LATHE_PREPACK=0: nothing prepacked, A packed per run; LATHE_PREPACK_A=0: A packed per run
  // (each switch set only while the program is built)
  auto built_with = [](const char* name, const char* value, const Graph& g) {
    ScopedEnv env(name, value);
    return build_program(g);
  };
  Tensor x = input("x", {1, 23, 14, 14});
  Graph g = Graph::from_outputs({{"y", conv2d(x, from_host(sin_weights({13, 23, 1, 1}, 2)), std::nullopt, Conv2dOptions{}).node()}});
  Program p = built_with("LATHE_PREPACK", "0", g);
  EXPECT_EQ(loop::packed_a_buffer(p.kg, p.kg.kernels[0]), -1);
  expect_matches(g, "LATHE_PREPACK=0");
  Program pa = built_with("LATHE_PREPACK_A", "0", g);  // the A side alone
  EXPECT_EQ(loop::packed_a_buffer(pa.kg, pa.kg.kernels[0]), -1);
  Program pd = build_program(g);  // and by default it is prepacked
  EXPECT_GE(loop::packed_a_buffer(pd.kg, pd.kg.kernels[0]), 0);
  // 300 x 256 weights at 9 x 9: over kPrepackAMaxBytes, packed only with the few-columns cap
  Tensor xb = input("x", {1, 256, 9, 9});
  Graph gb = Graph::from_outputs({{"y", conv2d(xb, from_host(sin_weights({300, 256, 1, 1}, 3)), std::nullopt, Conv2dOptions{}).node()}});
  Program ps = built_with("LATHE_PREPACK_A", "small", gb);
  EXPECT_EQ(loop::packed_a_buffer(ps.kg, ps.kg.kernels[0]), -1);
  Program pb = build_program(gb);
  EXPECT_GE(loop::packed_a_buffer(pb.kg, pb.kg.kernels[0]), 0);
  expect_matches(gb, "300 x 256 weights at 9 x 9");
}

// build_program schedules again when lowering asks for a node to be materialized; the memo
// gives that attempt the first one's packed copies instead of packing every weight again:
// a second schedule of one graph, packed through the same memo, reuses every packed copy
// (A and B sides) and gets the same ones. Odd sizes: a 3x3 conv (weights on A) and a late
// conv whose weights are B.
TEST(Prepack, ASecondScheduleReusesThePackedCopies) {
  Conv2dOptions same;
  same.padding = {1, 1};
  Tensor x = input("x", {1, 10, 13, 13});
  Tensor h = relu(conv2d(x, from_host(sin_weights({11, 10, 3, 3}, 3)), std::nullopt, same));
  Tensor y = conv2d(max_pool2d(h, Pool2dOptions{}), from_host(sin_weights({131, 11, 3, 3}, 4)), std::nullopt, same);
  Graph g = Graph::from_outputs({{"y", y.node()}});
  auto packed_storage = [](const KernelGraph& kg) {
    std::vector<const void*> r;
    for (const Kernel& k : kg.kernels)
      for (int b : {k.packed_b, loop::packed_a_buffer(kg, k)})
        if (b >= 0) r.push_back(kg.buffers[b].node->attrs.data->data());
    return r;
  };
  const loop::MatmulParams P = loop::host_matmul_params();
  auto pack = [&](KernelGraph& kg, loop::PackMemo* memo) {
    loop::prepack_constant_b(kg, P, 0, 0, memo);
    loop::prepack_constant_a(kg, P, loop::kPrepackAMaxN, loop::kPrepackAMaxBytes, 0, loop::kPrepackAFewN,
                             loop::kPrepackAFewNMaxBytes, memo);
  };
  loop::PackMemo memo;
  KernelGraph k1 = schedule_graph(g), k2 = schedule_graph(g);
  pack(k1, &memo);
  EXPECT_EQ(memo.reused, 0);
  pack(k2, &memo);
  auto s1 = packed_storage(k1), s2 = packed_storage(k2);
  EXPECT_EQ(s1.size(), 2u);
  EXPECT_EQ(memo.reused, static_cast<int>(s1.size()));
  EXPECT_EQ(s1, s2);
  // two stacked 3x3 convolutions of unit-sized weights: terms of ~10-100 cancel to outputs
  // near zero, where the summation order's rounding reaches the default atol
  expect_matches(g, "two convolutions", 4);
}

}  // namespace
// An embedding table that kernels only gather rows from (gathers_only) does not count as a
// reader of all of it: a tied vocabulary projection (the table transposed, prepacked) releases
// its pages, and a table only gathered from is released at build (release_gathered_constants).
// Odd sizes, batch 1 and 3, against the interpreter (the release is a hint: values stay).
TEST(Prepack, GatheredEmbeddingTablesAreNotReadersOfTheWholeTable) {
  PrepackAll all;
  for (int64_t b : {1, 3}) {
    const int64_t vocab = 211, d = 37, T = 5;
    Tensor table = from_host(sin_weights({vocab, d}, 5));
    Tensor tokens = input("tokens", {b, T}, DType::I64);
    Tensor h = embedding(tokens, table);                       // [b, T, d]
    Tensor logits = matmul(relu(h), t(table));                 // tied: [b, T, vocab]
    Graph g = Graph::from_outputs({{"logits", logits.node()}});
    Program p = build_program(g);
    const int tb = p.kg.buffer_of.at(table.node());
    int gather_kernels = 0, whole_readers = 0;
    for (const Kernel& k : p.kg.kernels) {
      if (std::find(k.inputs.begin(), k.inputs.end(), tb) == k.inputs.end()) continue;
      if (loop::gathers_only(p.kg, k, tb)) ++gather_kernels;
      else ++whole_readers;
    }
    EXPECT_EQ(gather_kernels, 1) << test::loop_ir_of(p);
    EXPECT_EQ(whole_readers, 1) << "the projection";
    EXPECT_EQ(matmul_kernels(p).prepacked, 1);
    EXPECT_EQ(loop::release_gathered_constants(p.kg), 0) << "the projection reads all of the table";
    TensorMap in{{"tokens", HostTensor(DType::I64, {b, T})}};
    for (int64_t i = 0; i < b * T; ++i) in["tokens"].set_f64(i, static_cast<double>((i * 37 + 11) % vocab));
    EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in)), "") << "batch " << b;
  }
  // a table only gathered from (and one read whole by a sum: not released)
  Tensor tokens = input("tokens", {2, 7}, DType::I64);
  Tensor emb = from_host(sin_weights({1009, 13}, 6)), other = from_host(sin_weights({101, 13}, 7));
  Graph g = Graph::from_outputs({{"h", (embedding(tokens, emb) * 2.0).node()}, {"s", sum(other).node()}});
  Program p = build_program(g);
  for (const Kernel& k : p.kg.kernels) {
    for (int buf : k.inputs) {
      if (p.kg.buffers[buf].node == other.node()) {
        EXPECT_FALSE(loop::gathers_only(p.kg, k, buf));
      }
    }
  }
  EXPECT_EQ(loop::release_gathered_constants(p.kg), 1);
  TensorMap in{{"tokens", HostTensor(DType::I64, {2, 7})}};
  for (int64_t i = 0; i < 14; ++i) in["tokens"].set_f64(i, static_cast<double>((i * 131) % 1009));
  EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in)), "");
}

// A weight given as bytes at an odd address (an ONNX initializer unaligned in its file,
// HostTensor::deferred) is packed straight from those bytes: no aligned copy is made while
// only its packed panels are read; a kernel that reads the weight itself gets the copy.
// [K, N] (runs copied) and [N, K] (transposed) weights, odd and prime sizes, 1 and 3 rows
// (1: a matrix-vector product that reads the weight itself), against the interpreter.
static HostTensor deferred_weight(const HostTensor& w, int misalign, std::shared_ptr<int> fills) {
  auto buf = std::make_shared<std::vector<std::byte>>(w.nbytes() + 8);
  std::byte* src = buf->data() + misalign;
  std::memcpy(src, w.data(), w.nbytes());
  const size_t n = w.nbytes();
  return HostTensor::deferred(w.dtype(), w.shape(), src, buf, [src, n, fills](void* dst) {
    std::memcpy(dst, src, n);
    ++*fills;
  });
}

TEST(Prepack, UnalignedWeightsArePackedFromTheirBytesWithoutACopy) {
  PrepackAll all;
  const bool compiled = test::test_backend() == "llvm" || test::test_backend() == "c";
  int case_no = 0;
  for (int64_t m : {1, 3})
    for (auto [K, N] : {std::pair<int64_t, int64_t>{37, 53}, {131, 67}})
      for (bool transposed : {false, true}) {
        ++case_no;
        auto fills = std::make_shared<int>(0);
        HostTensor plain = sin_weights(transposed ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}, 0.3 * case_no);
        HostTensor w = deferred_weight(plain, 1 + case_no % 3, fills);
        ASSERT_FALSE(w.materialized());
        Tensor x = input("x", {m, K}), W = from_host(w);
        Graph g = Graph::from_outputs({{"y", (matmul(x, transposed ? t(W) : W) + 0.5).node()}});
        TensorMap in = random_inputs(g, 7);
        Executable exe = compile_graph(g, test::test_backend());
        TensorMap got = exe.run(in);
        std::string what = "m " + std::to_string(m) + " K " + std::to_string(K) + " N " + std::to_string(N) +
                           (transposed ? " W^T" : " W");
        if (compiled) {
          // m = 1: a matrix-vector product, which reads the weight itself (no packing)
          const int prepacked = matmul_kernels(exe.program()).prepacked;
          if (m > 1) EXPECT_EQ(prepacked, 1) << what;
          EXPECT_EQ(*fills, prepacked ? 0 : 1)
              << what << (prepacked ? ": the weight was copied though only its packed panels are read" : ": read once");
        }
        EXPECT_EQ(test::compare_outputs(got, interpret(g, in)), "") << what;
        EXPECT_LE(*fills, 1) << what;
      }
  // read whole by a sum besides the matmul: the kernels that read it get the aligned copy
  auto fills = std::make_shared<int>(0);
  HostTensor w = deferred_weight(sin_weights({41, 29}, 9), 2, fills);
  Tensor x = input("x", {2, 41}), W = from_host(w);
  Graph g = Graph::from_outputs({{"y", matmul(x, W).node()}, {"s", sum(W).node()}});
  TensorMap in = random_inputs(g, 7);
  TensorMap got = compile_graph(g, test::test_backend()).run(in);
  EXPECT_EQ(*fills, 1);
  EXPECT_EQ(test::compare_outputs(got, interpret(g, in)), "");
}

}  // namespace lathe
