// library_q4.cpp — the Extern "gemv_q4" library kernel (library.h): Y[M, N] = X[M, K] · W^T
// with W [N, K] packed two 4-bit values a byte in q4_0-style blocks, dequantized in the
// kernel (unpack the nibbles, subtract 8, multiply by the block's scale, FMA with x).
//
// The AVX2 path (blocks that are a multiple of 32 weights, on a CPU with AVX2 + FMA) reads
// 16 bytes at a time: the low nibbles are weights j..j+15 of the half-block, the high ones
// j+B/2..j+B/2+15; each group of 8 is widened to i32, converted to f32 and FMA'd with x
// into a per-block sum that is scaled once. The rows of W are split between threads (the
// product is memory-bound: one thread does not saturate the memory bus); for each row all
// M rows of X are done while the row is in L1. Other blocks run the scalar loop.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "backends/library.h"

namespace lathe {
namespace {

struct Q4Args {
  int64_t M, N, K, B;
  const float* X;
  const uint8_t* W;
  const float* S;
  float* Y;
};

void rows_scalar(const Q4Args& a, int64_t n0, int64_t n1) {
  int64_t nb = a.K / a.B, h = a.B / 2;
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < a.M; ++m) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* w = a.W + n * (a.K / 2) + b * h;
        const float* x = a.X + m * a.K + b * a.B;
        float s = 0;
        for (int64_t j = 0; j < h; ++j) s += float((w[j] & 15) - 8) * x[j] + float((w[j] >> 4) - 8) * x[j + h];
        acc += s * a.S[n * nb + b];
      }
      a.Y[m * a.N + n] = acc;
    }
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 signed bytes -> two groups of 8 floats
__attribute__((target("avx2,fma"))) inline void widen(__m128i q, __m256& lo, __m256& hi) {
  lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q, q)));
}

__attribute__((target("avx2,fma"))) void rows_avx2(const Q4Args& a, int64_t n0, int64_t n1) {
  int64_t nb = a.K / a.B, h = a.B / 2;
  const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wrow = a.W + n * (a.K / 2);
    const float* srow = a.S + n * nb;
    if (n + 1 < n1) _mm_prefetch(reinterpret_cast<const char*>(wrow + a.K / 2), _MM_HINT_T0);
    for (int64_t m = 0; m < a.M; ++m) {
      const float* xrow = a.X + m * a.K;
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* w = wrow + b * h;
        const float* x = xrow + b * a.B;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        for (int64_t j = 0; j < h; j += 16) {
          __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j));
          __m128i lo = _mm_sub_epi8(_mm_and_si128(v, mask), eight);
          __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), mask), eight);
          __m256 l0, l1, h0, h1;
          widen(lo, l0, l1);
          widen(hi, h0, h1);
          s0 = _mm256_fmadd_ps(l0, _mm256_loadu_ps(x + j), s0);
          s1 = _mm256_fmadd_ps(l1, _mm256_loadu_ps(x + j + 8), s1);
          s0 = _mm256_fmadd_ps(h0, _mm256_loadu_ps(x + h + j), s0);
          s1 = _mm256_fmadd_ps(h1, _mm256_loadu_ps(x + h + j + 8), s1);
        }
        __m256 d = _mm256_broadcast_ss(srow + b);
        if (b & 1) acc1 = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), d, acc1);
        else acc0 = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), d, acc0);
      }
      a.Y[m * a.N + n] = hsum(_mm256_add_ps(acc0, acc1));
    }
  }
}

}  // namespace

void run_gemv_q4(NodeRef n, void* const* bufs) {
  const auto& v = n->attrs.ints;
  Q4Args a{v.at(0), v.at(1), v.at(2), v.at(3), static_cast<const float*>(bufs[1]), static_cast<const uint8_t*>(bufs[2]),
           static_cast<const float*>(bufs[3]), static_cast<float*>(bufs[0])};
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  auto part = avx2 && a.B % 32 == 0 ? rows_avx2 : rows_scalar;
  // threads only when the weight is big enough to pay for starting them (~1 MB packed)
  int64_t bytes = a.N * a.K / 2;
  int threads = static_cast<int>(std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), bytes >> 20));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(a.N)));
  if (threads == 1) return part(a, 0, a.N);
  std::vector<std::thread> pool;
  int64_t per = (a.N + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    int64_t n0 = t * per, n1 = std::min(a.N, n0 + per);
    if (n0 < n1) pool.emplace_back(part, std::cref(a), n0, n1);
  }
  part(a, 0, std::min(a.N, per));
  for (auto& t : pool) t.join();
}

}  // namespace lathe
