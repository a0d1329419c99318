// epilogue_interleave_test.cpp — a GEMM whose epilogue holds a transcendental (a GELU's exp2
// and reciprocal, a sigmoid) writes its full tiles' rows as one straight body of NR / lanes
// vectors (lower_matmul.cpp, loop annotation interleave: the llvm vectorizer's interleave
// count); a bias-only epilogue keeps one vector per step; LATHE_MATMUL_EPILOGUE_INTERLEAVE=0
// none (CTest runs this file again so: llvm.epilogue_interleave_off). Against the
// interpreter on the backend under test: odd and prime sizes (ragged row and column tiles),
// K over one and several K blocks, the tanh and erf GELUs, a sigmoid (SiLU) and a bias only,
// batch 1 and 3.
#include <cstdlib>
#include <regex>
#include <string>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "diff_util.h"

namespace lathe {
namespace {

bool switched_off() {
  const char* e = std::getenv("LATHE_MATMUL_EPILOGUE_INTERLEAVE");
  return e && std::string(e) == "0";
}

// NR of the first GEMM in the loop IR's schedule line (0: none)
int nr_of(const std::string& ir) {
  std::smatch m;
  return std::regex_search(ir, m, std::regex("matmul: MR=\\d+ NR=(\\d+)")) ? std::stoi(m[1]) : 0;
}

TEST(EpilogueInterleave, TranscendentalEpiloguesMatchTheInterpreter) {
  test::DiffBatch batch;
  struct Case { std::vector<int64_t> a; int64_t n; const char* epi; };
  const std::vector<Case> cases = {
      {{7, 13}, 31, "tanh"},     {{37, 211}, 67, "none"},    {{128, 401}, 97, "tanh"},  {{1, 53}, 131, "sigmoid"},
      {{3, 17, 97}, 61, "tanh"}, {{3, 9, 263}, 33, "none"},  {{41, 29}, 64, "bias"},    {{2, 5, 211}, 96, "bias"},
      {{64, 768}, 257, "tanh"},  {{19, 101}, 193, "sigmoid"},
  };
  for (const Case& c : cases) {
    const int64_t k = c.a.back();
    Tensor x = input("x", Shape(c.a.begin(), c.a.end()));
    Tensor y = matmul(x, input("w", {k, c.n})) + input("b", {c.n});
    const std::string epi = c.epi;
    if (epi == "tanh" || epi == "none") y = gelu(y, epi);
    if (epi == "sigmoid") y = y * sigmoid(y);
    Graph g = Graph::from_outputs({{"y", y.node()}});
    const std::string label = "matmul " + std::to_string(c.a.front()) + "x" + std::to_string(k) + "x" +
                              std::to_string(c.n) + " " + epi;
    if (test::test_backend() == "c" || test::test_backend() == "llvm") {
      const std::string ir = test::loop_ir_of(build_program(g));
      const bool interleaved = ir.find("interleave(") != std::string::npos;
      const int nr = nr_of(ir);
      if (epi == "bias" || switched_off()) EXPECT_FALSE(interleaved) << label << "\n" << ir.substr(0, 4000);
      // (NR of 32: two vectors of 16 lanes on AVX-512, four of 8 on AVX2)
      else if (nr >= 32 && ir.find("+epilogue") != std::string::npos)
        EXPECT_TRUE(interleaved) << label << "\n" << ir.substr(0, 4000);
    }
    // (sums of up to 768 products of unit-size inputs: as prefetch_b_test's tolerance)
    batch.add(label, g, 11, 10);
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
