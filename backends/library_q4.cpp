// library_q4.cpp — the Extern "gemv_q4" library kernel (library.h): Y[M, N] = X[M, K] · W^T
// with W [N, K] packed two 4-bit values a byte in q4_0-style blocks, dequantized in the
// kernel. X's rows are first quantized per block to int16 (core/interp/gemv_q4_act.h, the
// interpreter's very function), so a block's sum Σ (w − 8) · q is an integer sum.
//
// The AVX2 path (blocks that are a multiple of 16 weights, at most 2048, on a CPU with AVX2)
// takes 16 bytes of W at a time: vpmovzxbw widens them to 16 i16 lanes, a mask and a shift
// split the nibbles (weights j.. and j + B/2..), and two vpmaddwd against X's int16 values
// give 8 i32 partial sums of w · q with the stored w in [0, 15]; the − 8 of every weight is
// taken out once a block as − 8 · Σ q (X's, computed with its quantization), not per weight.
// Once a block: convert, scale by s·d, FMA into f32 accumulators, two blocks a step into
// two sets of them (one chain bound the loop to the FMA latency). ~7 instructions per 32
// weights plus ~5 a block, where converting each weight to f32 for an FMA took ~20.
// Up to four rows of X share each unpacked block (M > 1: the rows of a short GEMM).
// The rows of W are split between threads (one thread does not saturate the memory bus)
// in chunks claimed as the threads come free. Other blocks run the scalar loop, same sums.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "backends/library.h"
#include "core/interp/gemv_q4_act.h"

namespace lathe {
namespace {

struct Q4Args {
  int64_t M, N, K, B;
  const uint8_t* W;
  const float* S;
  float* Y;
  const int16_t* XQ;  // [M, K]: X quantized per block
  const float* XS;    // [M, K / B]: its scales
  const int32_t* XC;  // [M, K / B, 8]: per block, − 8 · Σ q over the products of each i32 lane (block_sums)
};

void rows_scalar(const Q4Args& a, int64_t n0, int64_t n1) {
  int64_t nb = a.K / a.B, h = a.B / 2;
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < a.M; ++m) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* w = a.W + n * (a.K / 2) + b * h;
        const int16_t* q = a.XQ + m * a.K + b * a.B;
        int64_t s = 0;
        for (int64_t j = 0; j < h; ++j) s += int64_t((w[j] & 15) - 8) * q[j] + int64_t((w[j] >> 4) - 8) * q[j + h];
        acc += static_cast<float>(s) * (a.XS[m * nb + b] * a.S[n * nb + b]);
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

// One block b of W's row `w` (h bytes: weights j and j + h in byte j, + 8) against rows r of
// X: is[r] = Σ_j (w_j − 8) · q_j in i32 lanes. The products take the stored nibble in
// [0, 15]; each lane starts from − 8 · Σ q over its own products (a.XC, computed with X's
// quantization), so its sum is the one the − 8 per weight gave, exactly (a lane sum of
// w · q alone is ~8 · Σ q larger, and the f32 accumulation rounds relative to that).
// H: the half-block when known at compile time (16: blocks of 32), else 0 (any multiple
// of 8, read from h).
template <int MR, int H>
__attribute__((target("avx2,fma"), always_inline)) inline void block_sums(const uint8_t* w, int64_t h, const int16_t* const* x,
                                                                            const int32_t* const* xc, int64_t b, __m256i* is) {
  const __m256i m4 = _mm256_set1_epi16(15);
  if (H) h = H;
  for (int r = 0; r < MR; ++r) is[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc[r] + 8 * b));
  int64_t c = 0;
  for (; c + 16 <= h; c += 16) {
    __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c)));
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_srli_epi16(v, 4);
    for (int r = 0; r < MR; ++r)
      is[r] = _mm256_add_epi32(is[r], _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r] + c))),
                                                       _mm256_madd_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r] + c + h)))));
  }
  if (!H && c < h) {  // 8 bytes left (h a multiple of 8): 128-bit lanes
    const __m128i m4x = _mm_set1_epi16(15);
    __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + c)));
    __m128i lo = _mm_and_si128(v, m4x), hi = _mm_srli_epi16(v, 4);
    for (int r = 0; r < MR; ++r) {
      __m128i p = _mm_add_epi32(_mm_madd_epi16(lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r] + c))),
                                _mm_madd_epi16(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r] + c + h))));
      is[r] = _mm256_add_epi32(is[r], _mm256_zextsi128_si256(p));
    }
  }
}

// Rows m0 .. m0 + MR of X against rows n0 .. n1 of W, two blocks a step into two sets of
// f32 accumulators (one FMA chain each: a single chain bound the old loop to the FMA's
// latency, ~4 cycles a block). i32 range: a 16-byte chunk adds at most 2 · 2 · 15 · 32767
// < 2^21 to a lane, the offset 8 · B · 32767 < 2^29 for B ≤ 2048 (run_gemv_q4 sends longer
// blocks to the scalar loop), so a block's lanes stay below 2^30.
template <int MR, int H>
__attribute__((target("avx2,fma"))) void rows_avx2(const Q4Args& a, int64_t m0, int64_t n0, int64_t n1) {
  const int64_t K = a.K, B = H ? 2 * H : a.B, h = B / 2, nb = K / B;
  const int16_t* xq[MR];
  const float* xs[MR];
  const int32_t* xc[MR];
  for (int r = 0; r < MR; ++r) xq[r] = a.XQ + (m0 + r) * K, xs[r] = a.XS + (m0 + r) * nb, xc[r] = a.XC + (m0 + r) * nb * 8;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wrow = a.W + n * (K / 2);
    const float* srow = a.S + n * nb;
    __m256 acc0[MR], acc1[MR];
    for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    const int16_t* x[MR];
    __m256i is[MR];
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      for (int r = 0; r < MR; ++r) x[r] = xq[r] + b * B;
      block_sums<MR, H>(wrow + b * h, h, x, xc, b, is);
      __m256 d = _mm256_broadcast_ss(srow + b);
      for (int r = 0; r < MR; ++r) acc0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), _mm256_mul_ps(d, _mm256_broadcast_ss(xs[r] + b)), acc0[r]);
      for (int r = 0; r < MR; ++r) x[r] = xq[r] + (b + 1) * B;
      block_sums<MR, H>(wrow + (b + 1) * h, h, x, xc, b + 1, is);
      d = _mm256_broadcast_ss(srow + b + 1);
      for (int r = 0; r < MR; ++r)
        acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), _mm256_mul_ps(d, _mm256_broadcast_ss(xs[r] + b + 1)), acc1[r]);
    }
    if (b < nb) {  // an odd number of blocks
      for (int r = 0; r < MR; ++r) x[r] = xq[r] + b * B;
      block_sums<MR, H>(wrow + b * h, h, x, xc, b, is);
      __m256 d = _mm256_broadcast_ss(srow + b);
      for (int r = 0; r < MR; ++r) acc0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), _mm256_mul_ps(d, _mm256_broadcast_ss(xs[r] + b)), acc0[r]);
    }
    for (int r = 0; r < MR; ++r) a.Y[(m0 + r) * a.N + n] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
  }
}

template <int H>
void rows_avx2_all(const Q4Args& a, int64_t n0, int64_t n1) {
  // W's rows n0..n1 (a chunk: in L1/L2) once per group of up to 4 rows of X
  int64_t m = 0;
  for (; m + 4 <= a.M; m += 4) rows_avx2<4, H>(a, m, n0, n1);
  switch (a.M - m) {
    case 3: rows_avx2<3, H>(a, m, n0, n1); break;
    case 2: rows_avx2<2, H>(a, m, n0, n1); break;
    case 1: rows_avx2<1, H>(a, m, n0, n1); break;
    default: break;
  }
}

}  // namespace

void run_gemv_q4(NodeRef n, void* const* bufs) {
  const auto& v = n->attrs.ints;
  const int64_t M = v.at(0), N = v.at(1), K = v.at(2), B = v.at(3), nb = K / B;
  const float* X = static_cast<const float*>(bufs[1]);
  std::vector<int16_t> xq(static_cast<size_t>(M * K));
  std::vector<float> xs(static_cast<size_t>(M * nb));
  // per block and i32 lane of block_sums, − 8 · Σ q over that lane's products: byte j of a
  // half-block (weights j and j + B/2) lands in lane (j % 16) / 2, in 16-byte chunks and the
  // 8-byte tail alike
  std::vector<int32_t> xc(static_cast<size_t>(M * nb * 8));
  for (int64_t m = 0; m < M; ++m) {
    gemv_q4_quantize_row(X + m * K, K, B, xq.data() + m * K, xs.data() + m * nb);
    for (int64_t b = 0; b < nb; ++b) {
      const int16_t* q = xq.data() + m * K + b * B;
      int32_t* c = xc.data() + (m * nb + b) * 8;
      for (int64_t j = 0; j < B / 2; ++j) c[(j % 16) / 2] -= 8 * (q[j] + q[j + B / 2]);
    }
  }
  Q4Args a{M, N, K, B, static_cast<const uint8_t*>(bufs[2]), static_cast<const float*>(bufs[3]), static_cast<float*>(bufs[0]),
           xq.data(), xs.data(), xc.data()};
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  auto part = !avx2 || B % 16 != 0 || B > 2048 ? rows_scalar : B == 32 ? rows_avx2_all<16> : rows_avx2_all<0>;
  // threads only when the weight is big enough to pay for starting them (~1 MB packed); the
  // rows are handed out in chunks of 64 that the threads claim as they come free (the
  // machine may be shared: a descheduled thread must not hold the others back)
  int64_t bytes = N * K / 2;
  int threads = static_cast<int>(std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), bytes >> 20));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(N)));
  if (threads == 1) return part(a, 0, N);
  constexpr int64_t kChunk = 64;
  int64_t chunks = (N + kChunk - 1) / kChunk;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
      part(a, c * kChunk, std::min(N, (c + 1) * kChunk));
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace lathe
