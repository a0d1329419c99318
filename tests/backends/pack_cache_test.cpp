// pack_cache_test.cpp — the build's packed weights kept on disk (core/loop/prepack.h,
// core/runtime/tensor_cache.h): a second build maps them instead of packing again, and its
// program matches the interpreter; a truncated or corrupted file is ignored and packed anew;
// a weight changed in one element (where a sampled hash would not look) does not reuse the
// old packing; LATHE_PACK_CACHE=0 packs every time. Both sides (B: a transformer's projection
// at few rows, batch 1 and 2; A: a late convolution's weights, 1x1, and Winograd's computed U
// per tile position), prime and odd sizes.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/prepack.h"
#include "core/runtime/tensor_cache.h"
#include "core/schedule/kernel_graph.h"
#include "diff_util.h"
#include "temp_pack_dir.h"
#include "test_env.h"

namespace lathe {
namespace {

using test::sin_weights;
using test::TempPackDir;

// The graphs: a transformer block's two projections at few rows (prepacked B, 1.1-1.6 MB);
// a late 1x1 convolution to many channels (prepacked A or B, 276 KB); a Winograd 3x3 from
// them (U, computed, 2.4 MB, packed per entry).
Graph projections(int64_t batch, int64_t t, int64_t k, int64_t n, const HostTensor& w1) {
  Tensor x = input("x", {batch, t, k});
  Tensor h = gelu(matmul(x, from_host(w1)) + from_host(sin_weights({n}, 2)), "tanh");
  Graph g = Graph::from_outputs({{"y", (matmul(h, from_host(sin_weights({n, k}, 7))) + x).node()}});
  return g;
}
Graph convs(int64_t n, const HostTensor& w1x1, const HostTensor& w3x3) {
  Tensor x = input("x", {n, w1x1.shape()[1], 7, 7});
  Tensor y = relu(conv2d(x, from_host(w1x1), from_host(sin_weights({w1x1.shape()[0]}, 5)), Conv2dOptions{}));
  y = conv2d_winograd(y, w3x3, std::nullopt, {1, 1, 1, 1});
  return Graph::from_outputs({{"y", relu(y).node()}});
}

std::vector<Graph> graphs(const HostTensor& w1, const HostTensor& w1x1, const HostTensor& w3x3) {
  return {projections(1, 77, 769, 389, w1), projections(2, 131, 769, 389, w1), convs(1, w1x1, w3x3), convs(2, w1x1, w3x3)};
}

// Builds and runs every graph against the interpreter; returns the pack cache's counts since.
// oracle: the interpreter's outputs of graphs with these same values (filled when empty; the
// interpreter's Winograd and projections are most of the test's time).
TensorCacheStats build_and_check(const std::vector<Graph>& gs, const std::string& what, std::vector<TensorMap>* oracle = nullptr) {
  const TensorCacheStats before = tensor_cache_stats();
  std::vector<TensorMap> own;
  if (!oracle) oracle = &own;
  for (size_t i = 0; i < gs.size(); ++i) {
    TensorMap in = random_inputs(gs[i], 7);
    Executable e = compile_graph(gs[i], test::test_backend());
    if (oracle->size() <= i) oracle->push_back(interpret(gs[i], in));
    EXPECT_EQ(test::compare_outputs(e.run(in), (*oracle)[i], 50), "") << what << " graph " << i;
    tensor_cache_flush();  // (stored in the background: the next graph's build finds them)
  }
  TensorCacheStats s = tensor_cache_stats();
  s.hits -= before.hits;
  s.misses -= before.misses;
  s.rejected -= before.rejected;
  s.stored -= before.stored;
  return s;
}

// The cache's own logic (damaged files, changed weights, the switch) does not depend on the
// backend: tested on the CPU ones (cuda on the fake driver compiles for minutes); the round
// trip runs everywhere.
#define SKIP_ON_CUDA()                                                         \
  if (test::test_backend() == "cuda") GTEST_SKIP() << "backend-independent: c, llvm"

struct Weights {
  HostTensor w1 = sin_weights({769, 389}, 5), w1x1 = sin_weights({1031, 67, 1, 1}, 3), w3x3 = sin_weights({37, 1031, 3, 3}, 1);
};

TEST(PackCache, SecondBuildMapsThePackedWeights) {
  TempPackDir tmp;
  Weights w;
  const std::vector<Graph> gs = graphs(w.w1, w.w1x1, w.w3x3);
  std::vector<TensorMap> oracle;
  const TensorCacheStats cold = build_and_check(gs, "cold", &oracle);
  // (graphs 0 and 1 share their weights: a layout both pack is stored once, then found)
  EXPECT_GE(cold.stored, 4);
  EXPECT_EQ(cold.misses, cold.stored);
  EXPECT_EQ(cold.rejected, 0);
  const size_t files = tmp.files().size();
  EXPECT_EQ(files, static_cast<size_t>(cold.stored));
  // the same weights again, in graphs built anew (other nodes, other addresses)
  Weights again;
  const TensorCacheStats warm = build_and_check(graphs(again.w1, again.w1x1, again.w3x3), "warm", &oracle);
  EXPECT_EQ(warm.hits, cold.stored + cold.hits);  // every lookup
  EXPECT_EQ(warm.misses + warm.stored + warm.rejected, 0);
  EXPECT_EQ(tmp.files().size(), files);
}

TEST(PackCache, TruncatedOrCorruptFilesAreIgnoredAndRewritten) {
  SKIP_ON_CUDA();
  TempPackDir tmp;
  Weights w;
  const std::vector<Graph> gs = graphs(w.w1, w.w1x1, w.w3x3);
  std::vector<TensorMap> oracle;
  const TensorCacheStats cold = build_and_check(gs, "cold", &oracle);
  ASSERT_GT(cold.stored, 1);
  // every file damaged: cut short, or a byte of its payload changed in place
  int i = 0;
  for (const std::string& f : tmp.files()) {
    const std::string path = tmp.dir + "/" + f;
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    if (i++ % 2 == 0) {
      ASSERT_EQ(truncate(path.c_str(), st.st_size / 2), 0);
    } else {
      std::fstream s(path, std::ios::in | std::ios::out | std::ios::binary);
      s.seekp(st.st_size - 3);
      s.put('\x7f');
    }
  }
  const TensorCacheStats bad = build_and_check(gs, "damaged", &oracle);
  EXPECT_EQ(bad.rejected, cold.stored);  // each file once: packed anew, written again,
  EXPECT_EQ(bad.stored, cold.stored);    // and then found by the lookups after
  EXPECT_EQ(bad.hits, cold.hits);
  const TensorCacheStats warm = build_and_check(gs, "rewritten", &oracle);
  EXPECT_EQ(warm.hits, cold.stored + cold.hits);
  EXPECT_EQ(warm.rejected + warm.stored, 0);
}

TEST(PackCache, AChangedWeightIsPackedAnew) {
  SKIP_ON_CUDA();
  TempPackDir tmp;
  Weights w;
  std::vector<TensorMap> oracle;
  build_and_check(graphs(w.w1, w.w1x1, w.w3x3), "cold", &oracle);
  // one element of each weight changed, in the middle (no sampled position of content_hash)
  Weights changed;
  for (HostTensor* t : {&changed.w1, &changed.w1x1, &changed.w3x3}) {
    const int64_t at = t->numel() / 2 + 3;
    t->set_f64(at, t->get_f64(at) + 0.5);
  }
  const TensorCacheStats s = build_and_check(graphs(changed.w1, changed.w1x1, changed.w3x3), "changed");
  EXPECT_GE(s.stored, 3);  // w1, w1x1 and U (the second projection's weight did not change: found)
  EXPECT_EQ(s.rejected, 0);
  Weights old;  // and the old weights still find theirs
  const TensorCacheStats o = build_and_check(graphs(old.w1, old.w1x1, old.w3x3), "old", &oracle);
  EXPECT_EQ(o.misses + o.stored, 0);
}

TEST(PackCache, OffBySwitch) {
  SKIP_ON_CUDA();
  TempPackDir tmp;
  setenv("LATHE_PACK_CACHE", "0", 1);
  Weights w;
  const TensorCacheStats s = build_and_check(graphs(w.w1, w.w1x1, w.w3x3), "off");
  EXPECT_EQ(s.stored + s.hits + s.misses, 0);
  EXPECT_TRUE(tmp.files().empty());
  unsetenv("LATHE_PACK_CACHE");  // the default: off too
  const TensorCacheStats d = build_and_check(graphs(w.w1, w.w1x1, w.w3x3), "default");
  EXPECT_EQ(d.stored + d.hits + d.misses, 0);
  EXPECT_TRUE(tmp.files().empty());
}

}  // namespace
}  // namespace lathe
