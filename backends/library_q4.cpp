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
// With AVX-512 VNNI (blocks of 32 or a multiple of 64) the kernel takes 64 weights a step
// into two vpdpwssd and, for one or two rows of X and K <= 1024, four rows of W at a time
// (rows_avx512; LATHE_Q4_AVX512=0 keeps the AVX2 code).
// The rows of W are split between threads (one thread does not saturate the memory bus)
// in chunks of 64: on the llvm backend's pool where it is linked in (library.h), else on
// persistent partner threads (Q4Job), at most LATHE_POOL_THREADS of them where that is set.
// Other blocks run the scalar loop, same sums.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/library.h"
#include "backends/rnn_crew.h"
#include "core/interp/gemv_q4_act.h"

namespace lathe {
namespace {

bool env_off(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) == "0";
}

bool env_is_one(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) == "1";
}

struct Q4Args {
  int64_t M, N, K, B;
  const uint8_t* W;
  const float* S;
  float* Y;           // Y[m * ldy + n - n0y]: the output, or a chunk's own rows (Q4Job)
  int64_t ldy, n0y;
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
      a.Y[m * a.ldy + n - a.n0y] = acc;
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
    for (int r = 0; r < MR; ++r) a.Y[(m0 + r) * a.ldy + n - a.n0y] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
  }
}

// The AVX-512 VNNI path: 32 bytes of W (64 weights) a step, widened to 32 i16 lanes, and two
// vpdpwssd (i16 pairs summed into 16 i32 lanes, no separate add) against X in a layout made
// for it per call (Q4Wide): a unit u is W's bytes 32u .. 32u + 31 of a row, its low nibbles
// against X's 32 values xp[64u ..] and its high ones against xp[64u + 32 ..]. Blocks of 32:
// a unit is two blocks (lanes 0-7 of the sums block 2u, 8-15 block 2u + 1: the scales go in
// per half, d's pair broadcast and permuted), an odd last block runs block_sums' 256-bit code
// on X's plain layout; blocks of 64k: a unit is 32 bytes of one block, its k units summed in
// i32 and converted once. ~10 vector instructions per 64 weights (AVX2: ~13 per 32). Each
// i32 lane starts from −8 · Σ q over its own products (xc), as in block_sums.
// (GCC 12 warns that the _mm512_undefined_ps() inside the intrinsics' headers is used
// uninitialized, wherever they inline)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

struct Q4Wide {
  const int16_t* XP;  // [M, K]: X quantized, in units of 64: 32 values for the low nibbles, 32 for the high
  const int32_t* XC;  // [M, groups, 16]: per group (a unit pair of blocks of 32, or a block of 64k) and lane, − 8 · Σ q
  const float* XS2;   // blocks of 32: [M, K / 64, 16]: X's block scale per lane of a unit (8 lanes a block)
};

// One group g of a row of W (a unit pair of blocks of 32, or the `per` units of a block of
// 64k) against rows r of X, into the f32 accumulators acc[r].
template <int MR, bool PAIR>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma"), always_inline)) inline void group_sums(
    const uint8_t* wrow, const float* srow, const int16_t* const* xp, const int32_t* const* xc,
    const float* const* xs, const float* const* xs2, int64_t g, int64_t per, __m512* acc) {
  const __m512i m4 = _mm512_set1_epi16(15);
  __m512i is[MR];
  for (int r = 0; r < MR; ++r) is[r] = _mm512_loadu_si512(xc[r] + 16 * g);
  for (int64_t u = g * per; u < (g + 1) * per; ++u) {
    __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wrow + 32 * u)));
    __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_srli_epi16(v, 4);
    for (int r = 0; r < MR; ++r) {
      is[r] = _mm512_dpwssd_epi32(is[r], lo, _mm512_loadu_si512(xp[r] + 64 * u));
      is[r] = _mm512_dpwssd_epi32(is[r], hi, _mm512_loadu_si512(xp[r] + 64 * u + 32));
    }
  }
  if (PAIR) {  // lanes 0-7: block 2g, 8-15: block 2g + 1
    const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    double dd;
    __builtin_memcpy(&dd, srow + 2 * g, sizeof dd);
    __m512 d = _mm512_permutexvar_ps(halves, _mm512_castpd_ps(_mm512_set1_pd(dd)));
    for (int r = 0; r < MR; ++r) acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]), _mm512_mul_ps(d, _mm512_loadu_ps(xs2[r] + 16 * g)), acc[r]);
  } else {
    __m512 d = _mm512_set1_ps(srow[g]);
    for (int r = 0; r < MR; ++r) acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]), _mm512_mul_ps(d, _mm512_set1_ps(xs[r][g])), acc[r]);
  }
}

// a vector's two 256-bit halves added
__attribute__((target("avx512f,avx2,fma"), always_inline)) inline __m256 half_sum(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// the sums of four vectors, as the four lanes of one
__attribute__((target("avx512f,avx2,fma"), always_inline)) inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(half_sum(a), half_sum(b)), _mm256_hadd_ps(half_sum(c), half_sum(d)));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Rows m0 .. m0 + MR of X against NR rows of W at a time, from n0 to n1 (then one at a time):
// with K = 768 a row of W is 12 units, so a row's horizontal sum, its odd block and the FMA
// chains' latency weighed as much as its units; four rows of W give four independent chains
// and one 4-way horizontal sum (NR = 1: two chains, alternating groups).
template <int MR, int NR, bool PAIR>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma"))) void rows_avx512(const Q4Args& a, const Q4Wide& w, int64_t m0, int64_t n0,
                                                                                int64_t n1) {
  const int64_t K = a.K, B = PAIR ? 32 : a.B, nb = K / B, units = K / 64;
  const int64_t groups = PAIR ? units : nb, per = PAIR ? 1 : B / 64;  // units a group
  const int16_t* xp[MR];
  const int32_t* xc[MR];
  const float* xs2[MR];
  const float* xs[MR];
  for (int r = 0; r < MR; ++r) {
    xp[r] = w.XP + (m0 + r) * K, xc[r] = w.XC + (m0 + r) * groups * 16, xs[r] = a.XS + (m0 + r) * nb;
    xs2[r] = PAIR ? w.XS2 + (m0 + r) * units * 16 : nullptr;
  }
  int64_t n = n0;
  if (NR > 1)
    for (; n + NR <= n1; n += NR) {
      const uint8_t* wrow[NR];
      const float* srow[NR];
      __m512 acc[NR][MR];
#pragma GCC unroll 4
      for (int i = 0; i < NR; ++i) {
        wrow[i] = a.W + (n + i) * (K / 2), srow[i] = a.S + (n + i) * nb;
        for (int r = 0; r < MR; ++r) acc[i][r] = _mm512_setzero_ps();
      }
      for (int64_t g = 0; g < groups; ++g)
#pragma GCC unroll 4
        for (int i = 0; i < NR; ++i) group_sums<MR, PAIR>(wrow[i], srow[i], xp, xc, xs, xs2, g, per, acc[i]);
      for (int r = 0; r < MR; ++r) {
        __m128 y = hsum4(acc[0][r], acc[1][r], acc[2][r], acc[3][r]);
        if (PAIR && nb % 2) {  // blocks of 32, an odd count: the last one on X's plain layout, 256 bits
          const int64_t b = nb - 1;
          const int16_t* x = a.XQ + (m0 + r) * K + b * 32;
          const int32_t* xc8 = a.XC + (m0 + r) * nb * 8;
          __m256 t[4];
          for (int i = 0; i < 4; ++i) {
            __m256i is;
            block_sums<1, 16>(wrow[i] + b * 16, 16, &x, &xc8, b, &is);
            t[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(srow[i][b] * xs[r][b]));
          }
          __m256 ts = _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
          y = _mm_add_ps(y, _mm_add_ps(_mm256_castps256_ps128(ts), _mm256_extractf128_ps(ts, 1)));
        }
        _mm_storeu_ps(a.Y + (m0 + r) * a.ldy + n - a.n0y, y);
      }
    }
  for (; n < n1; ++n) {
    const uint8_t* wrow = a.W + n * (K / 2);
    const float* srow = a.S + n * nb;
    __m512 acc[2][MR];
    for (int r = 0; r < MR; ++r) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
    int64_t g = 0;
    for (; g + 2 <= groups; g += 2) {
      group_sums<MR, PAIR>(wrow, srow, xp, xc, xs, xs2, g, per, acc[0]);
      group_sums<MR, PAIR>(wrow, srow, xp, xc, xs, xs2, g + 1, per, acc[1]);
    }
    if (g < groups) group_sums<MR, PAIR>(wrow, srow, xp, xc, xs, xs2, g, per, acc[0]);
    float tail[MR] = {};
    if (PAIR && nb % 2) {  // blocks of 32, an odd count: the last one on X's plain layout
      const int64_t b = nb - 1;
      const int16_t* x[MR];
      __m256i is[MR];
      for (int r = 0; r < MR; ++r) x[r] = a.XQ + (m0 + r) * K + b * 32;
      const int32_t* xc8[MR];
      for (int r = 0; r < MR; ++r) xc8[r] = a.XC + (m0 + r) * nb * 8;
      block_sums<MR, 16>(wrow + b * 16, 16, x, xc8, b, is);
      for (int r = 0; r < MR; ++r) tail[r] = hsum(_mm256_mul_ps(_mm256_cvtepi32_ps(is[r]), _mm256_set1_ps(srow[b] * xs[r][b])));
    }
    for (int r = 0; r < MR; ++r) a.Y[(m0 + r) * a.ldy + n - a.n0y] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r], acc[1][r])) + tail[r];
  }
}

// Four rows of W at a time for one or two rows of X when a row is short (K <= 1024: at most 16
// units, where a row's own work weighed); longer rows one at a time, as four streams 2 KB
// apart ran the 4096-wide weight from memory 1.3-1.5x slower than one (gemv-int4-big at one
// thread 6.6-7.2 vs 4.7-4.9 ms; prefetching 512 B ahead 6.0). LATHE_Q4_ROWS=1: always one
// (A/B runs).
template <bool PAIR>
void rows_avx512_all(const Q4Args& a, const Q4Wide& w, int64_t n0, int64_t n1) {
  static const bool rows1 = env_is_one("LATHE_Q4_ROWS");
  const bool four = !rows1 && a.K <= 1024;
  int64_t m = 0;
  for (; m + 4 <= a.M; m += 4) rows_avx512<4, 1, PAIR>(a, w, m, n0, n1);
  switch (a.M - m) {
    case 3: rows_avx512<3, 1, PAIR>(a, w, m, n0, n1); break;
    case 2: four ? rows_avx512<2, 4, PAIR>(a, w, m, n0, n1) : rows_avx512<2, 1, PAIR>(a, w, m, n0, n1); break;
    case 1: four ? rows_avx512<1, 4, PAIR>(a, w, m, n0, n1) : rows_avx512<1, 1, PAIR>(a, w, m, n0, n1); break;
    default: break;
  }
}

#pragma GCC diagnostic pop

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


// the threads the pool of the llvm backend's parallel loops would have: LATHE_POOL_THREADS=N
// caps this kernel's threads too (1: one-thread A/B runs), else one per core
int pool_threads() {
  if (const char* e = std::getenv("LATHE_POOL_THREADS"); e && std::atoi(e) > 0) return std::atoi(e);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// One call's chunks for the crew: claimed one at a time as the threads come free. A chunk is
// open, claimed by a partner (computing into its own rows), committing (the partner copies
// them to Y) or done; the caller, out of chunks, takes back the open and claimed ones (a
// partner finds its chunk gone and writes nothing): no call waits on a descheduled partner
// but for the copy of 64 rows, and no partner writes Y after the call.
struct Q4Job : CrewJob {
  enum : int { kOpen, kClaimed, kCommitting, kDone, kTaken };
  std::function<void(int64_t, float*)> compute, copy;  // chunk c into a partner's own rows; those to Y (the caller's buffers: only while claimed)
  int64_t chunks, own_rows = 0;
  std::unique_ptr<std::atomic<int>[]> state;
  std::atomic<int64_t> next{0};
  int stall_us = 0;  // LATHE_Q4_STALL_US=N (tests): a partner sleeps N µs inside every third chunk, as if descheduled
  explicit Q4Job(int64_t n) : chunks(n), state(new std::atomic<int>[static_cast<size_t>(n)]) {
    if (const char* e = std::getenv("LATHE_Q4_STALL_US")) stall_us = std::max(0, std::atoi(e));
    for (int64_t c = 0; c < n; ++c) state[c].store(kOpen, std::memory_order_relaxed);
  }
  bool take(int64_t c, int from) { return state[c].compare_exchange_strong(from, kTaken, std::memory_order_acq_rel); }
  void work(int) override {
    std::vector<float> own(static_cast<size_t>(own_rows));
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      int s = kOpen;
      if (!state[c].compare_exchange_strong(s, kClaimed, std::memory_order_acq_rel)) continue;
      compute(c, own.data());
      if (stall_us > 0 && c % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(stall_us));
      s = kClaimed;
      if (!state[c].compare_exchange_strong(s, kCommitting, std::memory_order_acq_rel)) continue;  // taken back
      copy(c, own.data());
      state[c].store(kDone, std::memory_order_release);
    }
  }
};

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
  Q4Args a{M, N, K, B, static_cast<const uint8_t*>(bufs[2]), static_cast<const float*>(bufs[3]), static_cast<float*>(bufs[0]), N, 0,
           xq.data(), xs.data(), xc.data()};
  // LATHE_Q4_AVX512=0: the AVX2 code on an AVX-512 VNNI host too (A/B runs)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vnni") && !env_off("LATHE_Q4_AVX512");
  const bool wide = avx512 && B <= 2048 && (B == 32 || B % 64 == 0);
  void (*part)(const Q4Args&, const Q4Wide&, int64_t, int64_t) = nullptr;
  std::vector<int16_t> xp;
  std::vector<int32_t> xcw;
  std::vector<float> xs2;
  Q4Wide wv{};
  if (wide) {  // X in the AVX-512 kernel's units (Q4Wide)
    const int64_t units = K / 64, groups = B == 32 ? units : nb;
    xp.resize(static_cast<size_t>(M * K));
    xcw.assign(static_cast<size_t>(M * groups * 16), 0);
    if (B == 32) xs2.resize(static_cast<size_t>(M * units * 16));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t u = 0; u < units; ++u) {
        int16_t* p = xp.data() + m * K + 64 * u;
        const int16_t* q = xq.data() + m * K;
        for (int64_t l = 0; l < 32; ++l) {  // i16 lane l: byte 32u + l of a row
          int64_t lo, hi;                    // the weights of its low and high nibble
          if (B == 32) {
            int64_t b = 2 * u + l / 16, j = l % 16;
            lo = b * 32 + j, hi = b * 32 + 16 + j;
          } else {
            int64_t b = 64 * u / B, j = 32 * u - b * (B / 2) + l;  // byte j of block b
            lo = b * B + j, hi = b * B + B / 2 + j;
          }
          p[l] = q[lo], p[32 + l] = q[hi];
          xcw[static_cast<size_t>((m * groups + (B == 32 ? u : 64 * u / B)) * 16 + l / 2)] -= 8 * (q[lo] + q[hi]);
        }
        if (B == 32)
          for (int64_t l = 0; l < 16; ++l) xs2[static_cast<size_t>((m * units + u) * 16 + l)] = xs[static_cast<size_t>(m * nb + 2 * u + l / 8)];
      }
    wv = Q4Wide{xp.data(), xcw.data(), xs2.data()};
    part = B == 32 ? rows_avx512_all<true> : rows_avx512_all<false>;
  }
  auto run_rows = [&](const Q4Args& args, int64_t n0, int64_t n1) {
    if (part) return part(args, wv, n0, n1);
    (!avx2 || B % 16 != 0 || B > 2048 ? rows_scalar : B == 32 ? rows_avx2_all<16> : rows_avx2_all<0>)(args, n0, n1);
  };
  auto run_part = [&](int64_t n0, int64_t n1) { run_rows(a, n0, n1); };
  // threads only when the weight is big enough to pay for starting them (~1 MB packed); the
  // rows are handed out in chunks of 64 that the threads claim as they come free (the
  // machine may be shared: a descheduled thread must not hold the others back)
  int64_t bytes = N * K / 2;
  int threads = static_cast<int>(std::min<int64_t>(pool_threads(), bytes >> 20));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(N)));
  if (threads == 1) return run_part(0, N);
  constexpr int64_t kChunk = 64;
  int64_t chunks = (N + kChunk - 1) / kChunk;
  // the llvm backend's pool where it is linked in (library.h): its workers are the ones that
  // poll between a model's kernels (LATHE_Q4_POOL=0: the crew below, for A/B runs)
  static const bool use_pool = !env_off("LATHE_Q4_POOL");
  if (LibraryParallelFor pf = library_parallel_for(); pf && use_pool) {
    struct Ctx {
      const decltype(run_part)* run;
      int64_t N;
    } ctx{&run_part, N};
    pf([](void* p, int64_t c0, int64_t c1) {
      auto* x = static_cast<Ctx*>(p);
      (*x->run)(c0 * kChunk, std::min(x->N, c1 * kChunk));
    }, &ctx, chunks);
    return;
  }
  // the partners: the persistent crew of the rnn kernel (rnn_crew.h: started once, polling
  // between calls), not threads started for each call, which on a loaded machine joined late
  // (LATHE_Q4_CREW=0: those, for A/B runs)
  static const bool crew = !env_off("LATHE_Q4_CREW");
  if (!crew) {
    std::atomic<int64_t> next{0};
    auto work = [&] {
      for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
        run_part(c * kChunk, std::min(N, (c + 1) * kChunk));
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    return;
  }
  auto job = std::make_shared<Q4Job>(chunks);
  job->threads = threads;
  // a partner's chunk goes to its own rows first (M x 64 floats), copied out once committed
  job->compute = [&](int64_t c, float* own) {
    Q4Args p = a;
    p.Y = own, p.ldy = kChunk, p.n0y = c * kChunk;
    run_rows(p, c * kChunk, std::min(N, (c + 1) * kChunk));
  };
  job->copy = [&](int64_t c, const float* own) {
    for (int64_t m = 0; m < M; ++m)
      std::copy(own + m * kChunk, own + m * kChunk + std::min(N, (c + 1) * kChunk) - c * kChunk, a.Y + m * N + c * kChunk);
  };
  job->own_rows = M * kChunk;
  crew_start(job, threads);
  for (int64_t c; (c = job->next.fetch_add(1, std::memory_order_relaxed)) < chunks;)  // the caller's claims: straight to Y
    if (job->take(c, Q4Job::kOpen)) run_part(c * kChunk, std::min(N, (c + 1) * kChunk)), job->state[c].store(Q4Job::kDone);
  crew_finish(job);
  // chunks a partner claimed and has not committed: taken back and computed here (a partner
  // descheduled inside one must not hold the call; it finds the chunk gone and discards its
  // rows); one being copied out (committed) is waited for
  for (int64_t c = 0; c < chunks; ++c)
    for (int spin = 0;; ++spin) {
      int s = job->state[c].load(std::memory_order_acquire);
      if (s == Q4Job::kDone) break;
      if ((s == Q4Job::kOpen || s == Q4Job::kClaimed) && job->take(c, s)) {
        run_part(c * kChunk, std::min(N, (c + 1) * kChunk));
        job->state[c].store(Q4Job::kDone, std::memory_order_release);
        break;
      }
      if (spin > 1000) std::this_thread::yield();  // committing: the copy
      else _mm_pause();
    }
}

}  // namespace lathe
