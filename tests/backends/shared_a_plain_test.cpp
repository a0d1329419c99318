// shared_a_plain_test.cpp — a plain matmul whose weights are packed at build and whose jobs
// are more N blocks than there are threads (GPT-2's LM head: 128 x 768 x 50257, 158 jobs)
// packs its A side (the activations) once for all the jobs, not once per job
// (lower_matmul.cpp, LATHE_MATMUL_SHARED_A_PLAIN). Against the interpreter on the backend
// under test: odd and prime sizes, M from 2 to 263 (ragged row panels, one or more M
// blocks), K over one and several K blocks, a bias + GELU epilogue, batch 1 and 3 (a batch
// of entries packs per job); and the schedule's "A packed once" where it applies.
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

// sin(seed + 0.37 i): deterministic weights (a constant: packed at build)
Tensor weights(std::vector<int64_t> shape, double seed) { return from_host(test::sin_weights(std::move(shape), seed, 0.37)); }

bool switched_off() {
  const char* e = std::getenv("LATHE_MATMUL_SHARED_A_PLAIN");
  const char* s = std::getenv("LATHE_MATMUL_SHARED_PACK");
  return (e && std::string(e) == "0") || (s && std::string(s) == "0");
}

// the job count of the first GEMM in the loop IR (its `parallel for t in 0..J`)
long jobs_of(const std::string& ir) {
  std::smatch m;
  return std::regex_search(ir, m, std::regex("parallel for t in 0\\.\\.(\\d+):")) ? std::stol(m[1]) : 0;
}

TEST(SharedAPlain, ManyNBlocksMatchTheInterpreter) {
  test::DiffBatch batch;
  struct Case { std::vector<int64_t> a; int64_t n; bool gelu; };
  // (weights of at least 1 MiB: packed at build, prepack.h; N wide enough for several N blocks)
  for (const Case& c : {Case{{2, 307}, 4099, false}, Case{{9, 401}, 2053, true}, Case{{37, 211}, 4099, false},
                        Case{{131, 523}, 1031, true}, Case{{128, 96}, 4111, false}, Case{{263, 97}, 3001, true}, Case{{3, 5, 211}, 2053, false},
                        Case{{1, 29, 401}, 3001, true}}) {
    const int64_t k = c.a.back();
    Tensor x = input("x", Shape(c.a.begin(), c.a.end()));
    Tensor y = matmul(x, weights({k, c.n}, double(k)));
    if (c.gelu) y = gelu(y + input("b", {c.n}));
    Graph g = Graph::from_outputs({{"y", y.node()}});
    const std::string ir = test::loop_ir_of(build_program(g));
    const bool once = ir.find("A packed once") != std::string::npos;
    if (switched_off()) EXPECT_FALSE(once) << ir.substr(0, 3000);
    // batch 1, B packed at build, more jobs than threads: packed once where the copies saved
    // are worth a step of their own (at least 32K elements: shares_pack; not 2 x 307)
    const long threads = std::max(1u, std::thread::hardware_concurrency()), jobs = jobs_of(ir);
    const int64_t m = c.a[c.a.size() - 2];
    if (!switched_off() && c.a.size() == 2 && ir.find("B prepacked") != std::string::npos && jobs > threads &&
        (jobs - 1) * m * k >= (int64_t(1) << 15))
      EXPECT_TRUE(once) << ir.substr(0, 3000);
    if (c.a.size() == 3 && c.a[0] > 1) EXPECT_FALSE(once) << ir.substr(0, 3000);  // (a batch: per job)
    // (sums of 100-520 products of unit size: 10 times the default tolerance, as prefetch_b_test)
    batch.add("matmul " + std::to_string(c.a.front()) + "x" + std::to_string(k) + "x" + std::to_string(c.n), g, 7, 10);
  }
  EXPECT_EQ(batch.run(), 0);
}

// A plain matmul's A whose depths are contiguous (rows K apart, or 3K apart where A is a
// slice of a fused QKV output as BERT's attention reads it) keeps the row-wise pack: the
// tap-by-tap pack meant for a strided 1x1 convolution's positions (rows a stride apart, each
// depth a channel plane further) copied it as runs along m, a gather (bert_base 51 -> 60 ms,
// caught by the bench after res22 merged). Against the interpreter too.
TEST(SharedAPlain, RowMajorADoesNotTakeTheTapPack) {
  test::DiffBatch batch;
  struct Case { int64_t t, k, n; };
  for (const Case& c : {Case{16, 256, 64}, Case{7, 97, 131}, Case{37, 263, 97}}) {
    for (bool sliced : {false, true}) {
      const int64_t t = c.t, k = c.k, n = c.n;
      Tensor x = input("x", {1, t, sliced ? 3 * k : k});  // (a leading 1: two M dims, as BERT's)
      Tensor a = sliced ? slice(x, 2, k, 2 * k) : x;
      Tensor y = matmul(a, weights({k, n}, 1.5));
      Graph g = Graph::from_outputs({{"y", y.node()}});
      const std::string ir = test::loop_ir_of(build_program(g));
      EXPECT_EQ(ir.find("tap by tap"), std::string::npos) << ir.substr(0, 3000);
      batch.add("row-major A " + std::to_string(t) + (sliced ? " sliced" : ""), g, 7, 4);
    }
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
