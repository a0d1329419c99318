// b_in_place_rows_test.cpp — a 1x1 convolution (stride 1, no padding) reads its input (the
// GEMM's B side) in place for up to the host's M block of output channels (ResNet-50's
// 512 -> 128 and 256 -> 128 layers), not only up to 64 (lower_matmul_pack.cpp,
// b_in_place_max_m; LATHE_MATMUL_B_IN_PLACE_MC=0: the old 64). Against the interpreter on
// the backend under test: prime and odd channel counts between 64 and the M block, K over
// several K blocks, ragged last panels (positions no multiple of NR: the ragged-columns
// kernel on its zero-padded copy, LATHE_MATMUL_RAGGED_COLS_IN_PLACE), batch 1, 3 and 64,
// constant weights (packed at build) and weights as an input, with a bias + ReLU or a
// residual epilogue; and where the schedule reads B in place.
#include <cstdlib>
#include <string>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"
#include "conv_case.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

using test::ConvCase;

bool old_bound() {
  const char* e = std::getenv("LATHE_MATMUL_B_IN_PLACE_MC");
  const char* off = std::getenv("LATHE_MATMUL_B_IN_PLACE");
  return (e && std::string(e) == "0") || (off && std::string(off) == "0");
}

TEST(BInPlaceRows, OneByOneConvsUpToTheMBlockMatchTheInterpreter) {
  auto in_place = [](const ConvCase& c) {
    return test::loop_ir_of(build_program(test::conv_graph(c))).find("B in place") != std::string::npos;
  };
  const int64_t mc = loop::host_matmul_params().mc;
  // ResNet-50's layer2 conv1 (512 -> 128 at 28 x 28): in place where 128 rows fit the M block
  const ConvCase resnet{1, 512, 28, 28, 128, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true};
  if (old_bound()) EXPECT_FALSE(in_place(resnet));
  else if (mc >= 128) EXPECT_TRUE(in_place(resnet));
  // more rows than the M block (and a strided 1x1, a 3x3) keep their packed panels
  if (!old_bound()) {
    EXPECT_FALSE(in_place({1, 256, 14, 14, mc + 64, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true}));
    EXPECT_FALSE(in_place({1, 256, 28, 28, 128, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, true}));
    EXPECT_FALSE(in_place({1, 96, 14, 14, 128, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}));
  }
  test::DiffBatch batch;
  // {n, c, h, w, k, constant weights}
  struct Case { int64_t n, c, h, w, k; bool constant; };
  for (const Case& t : {Case{1, 300, 13, 17, 131, true}, Case{1, 512, 14, 14, 128, true}, Case{3, 97, 11, 9, 200, true},
                        Case{64, 67, 5, 5, 97, true}, Case{1, 257, 8, 8, 256, true}, Case{2, 131, 7, 11, 67, false},
                        Case{1, 64, 16, 16, 251, true}, Case{1, 200, 28, 28, 131, true}}) {
    ConvCase cc{t.n, t.c, t.h, t.w, t.k, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, t.constant, true};
    // (few positions swap the sides, orient_matmul: the weights are then B, prepacked; a batch
    // folded into the positions gathers its columns through a table: both stay packed)
    const std::string ir = test::loop_ir_of(build_program(test::conv_graph(cc)));
    if (!old_bound() && t.k <= mc && ir.find("A prepacked") != std::string::npos && ir.find("gather(") == std::string::npos)
      EXPECT_NE(ir.find("B in place"), std::string::npos) << test::label(cc) << "\n" << ir.substr(0, 2000);
    Tensor x = input("x", {t.n, t.c, t.h, t.w});
    Tensor y = relu(test::conv_on(x, cc));
    batch.add(test::label(cc) + " + relu", Graph::from_outputs({{"y", y.node()}}), 7, 4);
    ConvCase nb = cc;
    nb.bias = false;
    Tensor r = test::conv_on(x, nb) + input("res", {t.n, t.k, t.h, t.w});
    batch.add(test::label(nb) + " + residual", Graph::from_outputs({{"y", r.node()}}), 7, 4);
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
