// winograd_test.cpp — conv2d_winograd (core/frontend/winograd.cpp): Winograd F(2x2, 3x3) of a
// stride-1 3x3 convolution with constant weights. Its graph on the backend under test
// matches the interpreter, and the interpreter's Winograd graph matches the direct conv2d
// (the oracle) to float rounding: odd and prime maps (7x7, 13x11, a 1x1 map with padding 1),
// prime channel counts, batch 1 and 3, padding 0 and 1, bias, and a fused residual + ReLU
// after it. winograd_pays: where LATHE_WINOGRAD lets it fire.
#include <cstdlib>
#include <string>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "conv_case.h"
#include "diff_util.h"

namespace lathe {
namespace {

struct WCase {
  int64_t n, c, h, w, k, pad;
  bool bias = false, residual = false;
};

std::string name_of(const WCase& t) {
  return "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + "x" + std::to_string(t.w) +
         " k" + std::to_string(t.k) + " pad " + std::to_string(t.pad) + (t.bias ? " bias" : "") + (t.residual ? " +res relu" : "");
}

// y = conv(x) (+ bias), then relu(y + r) when residual; Winograd or direct
Graph graph_of(const WCase& t, bool winograd) {
  Tensor x = input("x", {t.n, t.c, t.h, t.w});
  HostTensor w = test::sin_weights({t.k, t.c, 3, 3}, static_cast<double>(t.k), 0.37);
  std::optional<Tensor> b;
  if (t.bias) b = from_host(test::sin_weights({t.k}, 0.5, 0.37));
  Tensor y;
  if (winograd) {
    y = conv2d_winograd(x, w, b, {t.pad, t.pad, t.pad, t.pad});
  } else {
    Conv2dOptions o;
    o.padding = {t.pad, t.pad};
    y = conv2d(x, from_host(w), b, o);
  }
  if (t.residual) y = relu(y + input("r", y.shape()));
  return Graph::from_outputs({{"y", y.node()}});
}

TEST(Winograd, MatchesDirectConvolution) {
  const std::vector<WCase> cases = {
      {1, 64, 7, 7, 64, 1, true, true},     // resnet's 7x7 stage, smaller: odd map, cropped tile
      {1, 67, 14, 14, 71, 1, true},          // prime channels, even map
      {3, 13, 13, 11, 17, 1, false, true},   // batch 3, 13x11, residual
      {1, 11, 1, 1, 7, 1, true},             // a 1x1 map with padding 1
      {1, 19, 9, 12, 23, 0},                 // padding 0: 7x10
      {3, 5, 6, 5, 3, 0, true},              // batch 3, padding 0: 4x3
      {2, 31, 2, 3, 29, 1, false, true},     // a 2x3 map
  };
  test::DiffBatch batch;
  for (const WCase& t : cases) {
    Graph wg = graph_of(t, true), dg = graph_of(t, false);
    TensorMap in = random_inputs(dg, 11);
    TensorMap got = interpret(wg, in), want = interpret(dg, in);
    std::string why;
    EXPECT_TRUE(allclose(got.at("y"), want.at("y"), 1e-4, 1e-4, &why)) << name_of(t) << ": " << why;
    batch.add(name_of(t), wg, in, t.c > 40 ? 4 : 1);
  }
  EXPECT_EQ(batch.run(), 0);
}

// LATHE_WINOGRAD_SPARSE=1: the same cases with the transforms as ±1 sums of strided views
TEST(Winograd, SparseTransformsMatchDirectConvolution) {
  const char* e = std::getenv("LATHE_WINOGRAD_SPARSE");
  const std::string saved = e ? e : "";
  setenv("LATHE_WINOGRAD_SPARSE", "1", 1);
  const std::vector<WCase> cases = {
      {1, 64, 7, 7, 64, 1, true, true}, {3, 13, 13, 11, 17, 1, false, true}, {1, 11, 1, 1, 7, 1, true},
      {1, 19, 9, 12, 23, 0},            {3, 5, 6, 5, 3, 0, true},            {2, 31, 2, 3, 29, 1, false, true},
      {2, 7, 8, 8, 64, 1, true},  // K·tiles = 1024: U gets a zero row (M's plane not a multiple of 4 KiB)
  };
  test::DiffBatch batch;
  for (const WCase& t : cases) {
    Graph wg = graph_of(t, true), dg = graph_of(t, false);
    TensorMap in = random_inputs(dg, 13);
    TensorMap got = interpret(wg, in), want = interpret(dg, in);
    std::string why;
    EXPECT_TRUE(allclose(got.at("y"), want.at("y"), 1e-4, 1e-4, &why)) << name_of(t) << ": " << why;
    batch.add(name_of(t), wg, in, t.c > 40 ? 4 : 1);
  }
  if (e) setenv("LATHE_WINOGRAD_SPARSE", saved.c_str(), 1);
  else unsetenv("LATHE_WINOGRAD_SPARSE");
  EXPECT_EQ(batch.run(), 0);
}

// LATHE_WINOGRAD_SPARSE_OUT=1: the dense input transform with the sparse output one (U padded
// with zero rows where M's planes would alias: {2, 7, 8, 8, 64} and {3, 5, 16, 16, 16})
TEST(Winograd, SparseOutputMatchesDirectConvolution) {
  const char* e = std::getenv("LATHE_WINOGRAD_SPARSE_OUT");
  const std::string saved = e ? e : "";
  setenv("LATHE_WINOGRAD_SPARSE_OUT", "1", 1);
  const std::vector<WCase> cases = {
      {1, 64, 7, 7, 64, 1, true, true}, {3, 13, 13, 11, 17, 1, false, true}, {1, 11, 1, 1, 7, 1, true},
      {1, 19, 9, 12, 23, 0},            {2, 31, 2, 3, 29, 1, false, true},   {2, 7, 8, 8, 64, 1, true},
      {3, 5, 16, 16, 16, 1, true, true},  // batch 3: K · N · tiles = 3072, U padded to 17 rows
  };
  test::DiffBatch batch;
  for (const WCase& t : cases) {
    Graph wg = graph_of(t, true), dg = graph_of(t, false);
    TensorMap in = random_inputs(dg, 17);
    TensorMap got = interpret(wg, in), want = interpret(dg, in);
    std::string why;
    EXPECT_TRUE(allclose(got.at("y"), want.at("y"), 1e-4, 1e-4, &why)) << name_of(t) << ": " << why;
    batch.add(name_of(t), wg, in, t.c > 40 ? 4 : 1);
  }
  if (e) setenv("LATHE_WINOGRAD_SPARSE_OUT", saved.c_str(), 1);
  else unsetenv("LATHE_WINOGRAD_SPARSE_OUT");
  EXPECT_EQ(batch.run(), 0);
}

// U's rows are padded only where M's 16 planes would share 4 KiB offsets (more than 2 a line)
TEST(Winograd, PaddedRowsOnlyWhereThePlanesAlias) {
  const char* e = std::getenv("LATHE_WINOGRAD_PAD");
  const std::string saved = e ? e : "";
  unsetenv("LATHE_WINOGRAD_PAD");
  EXPECT_EQ(winograd_padded_rows(64, 28 * 28), 65);   // 64 ch at 56x56: planes 49 x 4 KiB
  EXPECT_EQ(winograd_padded_rows(512, 4 * 4), 513);   // 512 ch at 7x7: 8 x 4 KiB
  EXPECT_EQ(winograd_padded_rows(128, 14 * 14), 129); // two offsets, 8 planes each
  EXPECT_EQ(winograd_padded_rows(256, 7 * 7), 257);   // four offsets, 4 each
  EXPECT_EQ(winograd_padded_rows(67, 7 * 7), 67);     // prime: already spread
  EXPECT_EQ(winograd_padded_rows(64, 1), 64);         // 256-byte planes: 16 lines apart
  setenv("LATHE_WINOGRAD_PAD", "0", 1);
  EXPECT_EQ(winograd_padded_rows(64, 28 * 28), 64);
  if (e) setenv("LATHE_WINOGRAD_PAD", saved.c_str(), 1);
  else unsetenv("LATHE_WINOGRAD_PAD");
}

TEST(Winograd, FiresOnManyChannelsOverSmallMaps) {
  const char* e = std::getenv("LATHE_WINOGRAD");
  const std::string saved = e ? e : "";
  unsetenv("LATHE_WINOGRAD");
  EXPECT_TRUE(winograd_pays(256, 256, 14, 14));
  EXPECT_TRUE(winograd_pays(64, 64, 56, 56));
  EXPECT_TRUE(winograd_pays(512, 512, 7, 7));    // 16 tiles (U prepacked per ξ)
  EXPECT_TRUE(winograd_pays(64, 64, 128, 128));
  EXPECT_TRUE(winograd_pays(256, 256, 10, 10));  // 25 tiles
  EXPECT_TRUE(winograd_pays(256, 256, 9, 9));    // 5 x 5 tiles too (the last ones cropped)
  EXPECT_TRUE(winograd_pays(256, 256, 8, 8));    // 16 tiles
  EXPECT_FALSE(winograd_pays(256, 256, 5, 5));   // 9 tiles: slower than direct (0.43 vs 0.39 ms)
  EXPECT_FALSE(winograd_pays(512, 512, 6, 6));   // 9 tiles
  EXPECT_FALSE(winograd_pays(64, 64, 129, 129)); // a larger map: unmeasured
  EXPECT_FALSE(winograd_pays(3, 64, 14, 14));   // few channels
  EXPECT_FALSE(winograd_pays(256, 256, 2, 2));  // a tiny map: padding to whole tiles wastes
  setenv("LATHE_WINOGRAD", "0", 1);
  EXPECT_FALSE(winograd_pays(256, 256, 14, 14));
  setenv("LATHE_WINOGRAD", "all", 1);
  EXPECT_TRUE(winograd_pays(3, 5, 1, 1));
  if (e) setenv("LATHE_WINOGRAD", saved.c_str(), 1);
  else unsetenv("LATHE_WINOGRAD");
}

TEST(Winograd, RejectsWhatItCannotDo) {
  Tensor x = input("x", {1, 8, 5, 5});
  EXPECT_THROW(conv2d_winograd(x, test::sin_weights({4, 8, 5, 5}, 1, 0.37), std::nullopt, {1, 1, 1, 1}), UserError);
  EXPECT_THROW(conv2d_winograd(x, test::sin_weights({4, 7, 3, 3}, 1, 0.37), std::nullopt, {1, 1, 1, 1}), UserError);
  EXPECT_THROW(conv2d_winograd(input("v", {8, 5, 5}), test::sin_weights({4, 8, 3, 3}, 1, 0.37), std::nullopt, {1, 1, 1, 1}), UserError);
}

}  // namespace
}  // namespace lathe
