// winograd_weights_test.cpp — winograd_weight_transform (core/frontend/winograd.cpp): U for
// f32 weights, computed by rows of c and split among threads, equals the scalar per-(k, c)
// form it replaced bit for bit, on prime and one-sized channel counts, with and without G's
// row 3 negated, for any number of threads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/frontend/nn.h"

namespace lathe {
namespace {

// the form winograd.cpp had before (one 3 x 3 block per (k, c), in double, rounded once)
std::vector<float> scalar_u(const std::vector<float>& w, int64_t K, int64_t C, bool negate3) {
  constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const double sgn[4] = {1, 1, 1, negate3 ? -1.0 : 1.0};
  std::vector<float> u(16 * K * C);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      double g[3][3], gg[4][3];
      for (int r = 0; r < 9; ++r) g[r / 3][r % 3] = w[(k * C + c) * 9 + r];
      for (int i = 0; i < 4; ++i)
        for (int s = 0; s < 3; ++s) gg[i][s] = kG[i][0] * g[0][s] + kG[i][1] * g[1][s] + kG[i][2] * g[2][s];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          u[((i * 4 + j) * K + k) * C + c] =
              static_cast<float>(sgn[i] * sgn[j] * (gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2]));
    }
  return u;
}

TEST(WinogradWeights, RowsAndThreadsMatchTheScalarFormBitForBit) {
  std::mt19937 rng(19);
  std::normal_distribution<float> nd(0.f, 1.f);
  struct S { int64_t k, c; };
  // prime counts, a single channel, and one large enough (K·C >= 2 · 16K) to use two threads
  for (S s : {S{1, 1}, S{3, 1}, S{1, 7}, S{67, 71}, S{131, 13}, S{257, 131}}) {
    std::vector<float> w(s.k * s.c * 9);
    for (float& v : w) v = nd(rng) * (rng() % 7 == 0 ? 1e-30f : 1.f);  // tiny values too
    for (bool neg : {false, true}) {
      const std::vector<float> want = scalar_u(w, s.k, s.c, neg);
      for (int threads : {1, 2, 3, 0}) {
        std::vector<float> got(want.size(), -1.f);
        winograd_weight_transform(w.data(), s.k, s.c, neg, got.data(), threads);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << "K " << s.k << " C " << s.c << (neg ? " row 3 negated" : "") << " threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace lathe
