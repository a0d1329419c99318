// prefetch_b_test.cpp — a plain matmul whose weights are packed at build (a transformer's
// projections, streamed from memory each run) prefetches the next B panel in its
// micro-kernel (lower_matmul_micro.cpp, prefetch_next_b): spread over the micro-kernels that
// read the panel and over every 64-byte line of it, or, where fewer micro-kernels read a
// panel than a depth's row has lines, all the lines of each depth. Against the interpreter
// on the backend under test: odd and prime sizes, M from 1 to 131 (ragged row panels, one
// or more M blocks), K over several K blocks, batch 1 and 3, a bias + GELU epilogue; and the
// prefetch's index in the loop IR.
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

// sin(seed + 0.37 i): deterministic weights (a constant: packed at build)
Tensor weights(std::vector<int64_t> shape, double seed) { return from_host(test::sin_weights(std::move(shape), seed, 0.37)); }

bool mode_off() {
  const char* e = std::getenv("LATHE_MATMUL_PREFETCH_B");
  return e && (std::string(e) == "0" || std::string(e) == "conv" || std::string(e) == "all");
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(PrefetchB, PlainMatmulsWithPackedWeightsMatchTheInterpreter) {
  test::DiffBatch batch;
  struct Case { std::vector<int64_t> a; int64_t n; bool gelu; };
  // (weights of at least 1 MiB: packed at build for few rows, prepack.h)
  for (const Case& c : {Case{{1, 401}, 661, false}, Case{{5, 521}, 509, false}, Case{{17, 577}, 457, true},
                        Case{{128, 401}, 661, false}, Case{{131, 523}, 503, true}, Case{{3, 13, 401}, 661, false},
                        Case{{3, 40, 523}, 503, true}}) {
    const int64_t k = c.a.back();
    Tensor x = input("x", Shape(c.a.begin(), c.a.end()));
    Tensor y = matmul(x, weights({k, c.n}, double(k)));
    if (c.gelu) y = gelu(y + input("b", {c.n}));
    Graph g = Graph::from_outputs({{"y", y.node()}});
    const std::string ir = test::loop_ir_of(build_program(g));
    // (M = 1 is a matrix-vector product: no GEMM, checked for its values only)
    if (c.a[c.a.size() - 2] > 1) EXPECT_NE(ir.find("B prepacked"), std::string::npos) << ir.substr(0, 3000);
    if (ir.find("B prepacked") != std::string::npos && !mode_off())
      EXPECT_NE(ir.find("prefetch.r "), std::string::npos) << ir.substr(0, 3000);
    // (sums of 400-580 products of unit size: an element near zero is off by a few 1e-5 in f32
    // whatever the order of the sums, so 10 times the default tolerance)
    batch.add("matmul " + std::to_string(c.a.front()) + "x" + std::to_string(k) + "x" + std::to_string(c.n), g, 7, 10);
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(PrefetchB, SpreadOverEveryLineOfTheNextPanel) {
  if (mode_off()) GTEST_SKIP() << "LATHE_MATMUL_PREFETCH_B turns the plain matmuls' prefetch off or to the burst";
  // 128 rows: 128 / MR micro-kernels read each B panel; kernel ir at depth kk prefetches
  // line (ir KC + kk) L / D of the next panel (L = NR / 16 lines a depth), clamped to its last
  Tensor x = input("x", {128, 768});
  Graph g = Graph::from_outputs({{"y", matmul(x, weights({768, 384}, 1.0)).node()}});
  const std::string ir = test::loop_ir_of(build_program(g));
  if (ir.find("B prepacked") == std::string::npos) GTEST_SKIP() << "weights not packed at build here";
  if (ir.find("MR=8 NR=32 KC=192 ") != std::string::npos) {  // AVX-512 on a 48 KiB L1d: D 16, L 2
    EXPECT_NE(ir.find("((((((ir*192) + kk)*2) / 16) < 383) ?"), std::string::npos) << ir.substr(0, 4000);
    EXPECT_EQ(count(ir, "prefetch.r "), 1u) << ir.substr(0, 4000);
  }
  if (ir.find("MR=6 NR=16 KC=256 ") != std::string::npos)  // AVX2: one line a depth, D 22
    EXPECT_NE(ir.find(" / 22) < 255) ?"), std::string::npos) << ir.substr(0, 4000);
  // one MR panel of rows: one micro-kernel a panel reads each depth's L lines, each prefetched
  Tensor v = input("v", {8, 768});
  const std::string one = test::loop_ir_of(build_program(Graph::from_outputs({{"y", matmul(v, weights({768, 384}, 2.0)).node()}})));
  if (one.find("B prepacked") != std::string::npos && one.find(" NR=32 ") != std::string::npos)
    EXPECT_EQ(count(one, "prefetch.r "), 2u) << one.substr(0, 4000);
}

}  // namespace
}  // namespace lathe
