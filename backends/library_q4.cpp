// library_q4.cpp — the Extern "gemv_q4" library kernel (library.h): Y[M, N] = X[M, K] · W^T
// with W [N, K] packed two 4-bit values a byte in q4_0-style blocks, dequantized in the
// kernel (unpack the nibbles, subtract 8, multiply by the block's scale, FMA with x).
//
// The AVX2 path (blocks that are a multiple of 16 weights, on a CPU with AVX2 + FMA) widens
// 8 bytes at a time to i32 lanes: their low nibbles are weights j..j+7 of the block, the
// high ones j+B/2..j+B/2+7; each group is converted to f32 and FMA'd with x into a
// per-block sum that is scaled once. The rows of W are split between threads (the
// product is memory-bound: one thread does not saturate the memory bus) in chunks claimed
// as the threads come free; for each row all
// M rows of X are done while the row is in L1 (M > 1: the row dequantized once into an f32
// buffer, then one dot product per row of X). Other blocks run the scalar loop.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
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

// M > 1: row n is dequantized once into an f32 row in L1, then dotted with each row of X
// (the unpacking is not repeated per row of X).
__attribute__((target("avx2,fma"))) void rows_avx2_multi(const Q4Args& a, int64_t n0, int64_t n1) {
  int64_t nb = a.K / a.B, h = a.B / 2;
  const __m256i mask = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
  std::vector<float> buf(static_cast<size_t>(a.K));
  float* wf = buf.data();
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wrow = a.W + n * (a.K / 2);
    const float* srow = a.S + n * nb;
    for (int64_t b = 0; b < nb; ++b) {
      __m256 d = _mm256_broadcast_ss(srow + b);
      for (int64_t j = 0; j < h; j += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wrow + b * h + j)));
        _mm256_storeu_ps(wf + b * a.B + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v, mask), eight)), d));
        _mm256_storeu_ps(wf + b * a.B + h + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight)), d));
      }
    }
    for (int64_t m = 0; m < a.M; ++m) {
      const float* x = a.X + m * a.K;
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 16 <= a.K; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(wf + k), _mm256_loadu_ps(x + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(wf + k + 8), _mm256_loadu_ps(x + k + 8), s1);
      }
      float acc = hsum(_mm256_add_ps(s0, s1));
      for (; k < a.K; ++k) acc += wf[k] * x[k];
      a.Y[m * a.N + n] = acc;
    }
  }
}

// M = 1: the nibbles of each group of 8 bytes are converted and FMA'd with x directly.
// (Taking the offset 8 out per block, d · (Σ v·x − 8 · Σ x), saves a few instructions but
// cancels: outputs near 0 of a 768-long row then differ from the interpreter by ~6e-5.)
// H is the half-block when it is known at compile time (16: blocks of 32), else 0.
template <int H>
__attribute__((target("avx2,fma"))) void rows_avx2_one(const Q4Args& args, int64_t n0, int64_t n1) {
  const int64_t K = args.K, B = args.B, nb = K / B, h = H ? H : B / 2;
  const float* X = args.X;
  const uint8_t* W = args.W;
  const float* S = args.S;
  float* Y = args.Y;
  const __m256i mask = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wrow = W + n * (K / 2);
    const float* srow = S + n * nb;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* w = wrow + b * h;
      const float* x = X + b * 2 * h;
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
      for (int64_t j = 0; j < h; j += 8) {
        // 8 bytes -> 8 i32 lanes: the low nibbles are weights j.., the high ones j + h..
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + j)));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v, mask), eight)), _mm256_loadu_ps(x + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight)), _mm256_loadu_ps(x + h + j), s1);
      }
      acc = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_broadcast_ss(srow + b), acc);
    }
    Y[n] = hsum(acc);
  }
}

void rows_avx2(const Q4Args& a, int64_t n0, int64_t n1) {
  if (a.M > 1) return rows_avx2_multi(a, n0, n1);
  if (a.B == 32) return rows_avx2_one<16>(a, n0, n1);
  rows_avx2_one<0>(a, n0, n1);
}

}  // namespace

void run_gemv_q4(NodeRef n, void* const* bufs) {
  const auto& v = n->attrs.ints;
  Q4Args a{v.at(0), v.at(1), v.at(2), v.at(3), static_cast<const float*>(bufs[1]), static_cast<const uint8_t*>(bufs[2]),
           static_cast<const float*>(bufs[3]), static_cast<float*>(bufs[0])};
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  auto part = avx2 && a.B % 16 == 0 ? rows_avx2 : rows_scalar;
  // threads only when the weight is big enough to pay for starting them (~1 MB packed); the
  // rows are handed out in chunks of 64 that the threads claim as they come free (the
  // machine may be shared: a descheduled thread must not hold the others back)
  int64_t bytes = a.N * a.K / 2;
  int threads = static_cast<int>(std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), bytes >> 20));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(a.N)));
  if (threads == 1) return part(a, 0, a.N);
  constexpr int64_t kChunk = 64;
  int64_t chunks = (a.N + kChunk - 1) / kChunk;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
      part(a, c * kChunk, std::min(a.N, (c + 1) * kChunk));
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace lathe
