// library_rnn_math.cpp — the arithmetic of the fused recurrence's CPU kernel (library_rnn.cpp):
// the row reduction and the register tiles of acc += a · w, and the vectorized activations;
// each in AVX-512 (when the CPU has avx512f, unless LATHE_RNN_AVX512=0), AVX2 + FMA, or plain
// loops. With AVX-512 the one-thread lstm step (H 256, h·RT of 1 MiB) stays bound by reading
// RT (7.3 µs a step against 7.6 with AVX2, and ~6.2 µs to only read 1 MiB back and forth on
// the Zen 5 test machine; prefetching rows ahead changed nothing); the projections, bound by
// arithmetic, run at ~255 GFLOP/s on one core against AVX2's 133.
#include "backends/library_rnn_math.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace lathe::rnn_math {

const bool kAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

namespace {

const bool kHasAvx512 = kAvx2 && __builtin_cpu_supports("avx512f");

bool avx512_from_env() {
  const char* e = std::getenv("LATHE_RNN_AVX512");
  return kHasAvx512 && !(e && std::strcmp(e, "0") == 0);
}

}  // namespace

std::atomic<bool> g_avx512{avx512_from_env()};

void select_isa() { g_avx512.store(avx512_from_env(), std::memory_order_relaxed); }

namespace {

// ---- acc[r, 0:n) += a[r, 0:K) · w[0:K, 0:n)   (rows r < m; strides lda, ldw, ldc) ----

void gemm_acc_scalar(int64_t m, int64_t n, int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw, float* acc,
                     int64_t ldc) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const float ak = a[r * lda + k];
      const float* wk = w + k * ldw;
      float* c = acc + r * ldc;
      for (int64_t j = 0; j < n; ++j) c[j] += ak * wk[j];
    }
}

// R rows × 16 columns of acc in registers over all of K (R×2 accumulators, fully unrolled so
// they stay in registers): R = 4 for the recurrence; R = 6 for the input projections, whose
// rows (the steps) are all known at once (2 loads of w and 6 broadcasts per 12 FMAs, against
// 4×16's 2 + 4 per 8)
template <int R>
__attribute__((target("avx2,fma"))) void tile_rx16(int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw,
                                                   float* c, int64_t ldc) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = _mm256_loadu_ps(c + r * ldc), acc[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(w + k * ldw), w1 = _mm256_loadu_ps(w + k * ldw + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]), acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(c + r * ldc, acc[r][0]), _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
}

// ---- activations, in place over n values ----

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);  // x - fx·ln2 in two parts
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

__attribute__((target("avx2,fma"))) inline __m256 sigmoid_avx2(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

__attribute__((target("avx2,fma"))) inline __m256 tanh_avx2(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  const __m256 f = _mm256_andnot_ps(sign, x);
  // |x| > ln 3 / 2: 1 - 2 / (e^{2|x|} + 1)
  __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(exp_avx2(_mm256_add_ps(f, f)), one)));
  // below: f + f·g·P(g)/Q(g), g = f² (Cody and Waite)
  const __m256 g = _mm256_mul_ps(f, f);
  __m256 p = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_set1_ps(-0.3831010665e-2f), g, _mm256_set1_ps(-0.8237728127f)), g);
  __m256 q = _mm256_add_ps(g, _mm256_set1_ps(0.2471319654e1f));
  __m256 small = _mm256_fmadd_ps(f, _mm256_div_ps(p, q), f);
  __m256 r = _mm256_blendv_ps(small, big, _mm256_cmp_ps(f, _mm256_set1_ps(0.5493061443f), _CMP_GT_OQ));
  return _mm256_or_ps(r, _mm256_and_ps(sign, x));
}

__attribute__((target("avx2,fma"))) void sigmoid_n_avx2(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, sigmoid_avx2(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float buf[8] = {0};
    std::memcpy(buf, x + i, sizeof(float) * (n - i));
    _mm256_storeu_ps(buf, sigmoid_avx2(_mm256_loadu_ps(buf)));
    std::memcpy(x + i, buf, sizeof(float) * (n - i));
  }
}

__attribute__((target("avx2,fma"))) void tanh_n_avx2(float* x, int64_t n, float in_scale, float out_scale) {
  const __m256 si = _mm256_set1_ps(in_scale), so = _mm256_set1_ps(out_scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(so, tanh_avx2(_mm256_mul_ps(si, _mm256_loadu_ps(x + i)))));
  if (i < n) {
    float buf[8] = {0};
    std::memcpy(buf, x + i, sizeof(float) * (n - i));
    _mm256_storeu_ps(buf, _mm256_mul_ps(so, tanh_avx2(_mm256_mul_ps(si, _mm256_loadu_ps(buf)))));
    std::memcpy(x + i, buf, sizeof(float) * (n - i));
  }
}

// ---- AVX-512: the same kernels 16 lanes wide ----
//
// A 16-column strip (or one gate of a 16-unit block) is one zmm register, so a tile of R rows
// holds R accumulators (R up to 16 of the 32 registers) and a step's partial last strip or
// block runs under a mask instead of falling back to the row reduction.

#define LATHE_AVX512 __attribute__((target("avx512f,avx2,fma")))
// (GCC 12 warns that the _mm512_undefined_ps() inside the intrinsics' headers is used
// uninitialized, wherever they inline)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

LATHE_AVX512 inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// c[r, s·ldcs + j] += a[r, 0:K) · w[0:K, s·lds + j] for R rows, NS strips of 16 columns j,
// all of K in registers (R·NS accumulators); Masked: only the columns j of mk are read (of w
// too) and written. Each row of a strip loaded is used by R FMAs and each broadcast of a by
// NS: at 1 strip the broadcasts (one load each) held an R×16 tile to ~200 GFLOP/s on the Zen
// 5 test machine, 8 rows × 2 strips reached ~255 (its peak, one core: ~264)
template <int R, int NS, bool Masked>
LATHE_AVX512 void tile512(int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw, int64_t lds, float* c,
                          int64_t ldc, int64_t ldcs, __mmask16 mk) {
  __m512 acc[R][NS];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < NS; ++s) {
      const float* cs = c + r * ldc + s * ldcs;
      acc[r][s] = Masked ? _mm512_maskz_loadu_ps(mk, cs) : _mm512_loadu_ps(cs);
    }
  for (int64_t k = 0; k < K; ++k) {
    __m512 wk[NS];
#pragma GCC unroll 4
    for (int s = 0; s < NS; ++s) wk[s] = Masked ? _mm512_maskz_loadu_ps(mk, w + k * ldw + s * lds) : _mm512_loadu_ps(w + k * ldw + s * lds);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + k]);
#pragma GCC unroll 4
      for (int s = 0; s < NS; ++s) acc[r][s] = _mm512_fmadd_ps(x, wk[s], acc[r][s]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < NS; ++s) {
      float* cs = c + r * ldc + s * ldcs;
      if (Masked) _mm512_mask_storeu_ps(cs, mk, acc[r][s]);
      else _mm512_storeu_ps(cs, acc[r][s]);
    }
}

constexpr int kRows512 = 8, kStrips512 = 4;  // the largest tile: rows, strips
using Tile512 = void (*)(int64_t, const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, int64_t, __mmask16);
template <bool Masked, int NS, size_t... R>
constexpr std::array<Tile512, kRows512> tile_row512(std::index_sequence<R...>) {
  return {&tile512<static_cast<int>(R + 1), NS, Masked>...};
}
template <bool Masked>
constexpr std::array<std::array<Tile512, kRows512>, kStrips512> tile_table512() {
  constexpr auto rows = std::make_index_sequence<kRows512>();
  return {tile_row512<Masked, 1>(rows), tile_row512<Masked, 2>(rows), tile_row512<Masked, 3>(rows),
          tile_row512<Masked, 4>(rows)};
}
constexpr auto kTile512 = tile_table512<false>(), kTile512Masked = tile_table512<true>();

// c[r, s·ldcs + j] += a[r, :] · w[:, s·lds + j] for rows r < m, strips s < ns, columns j < nu
// (<= 16) of each: tiles of up to 8 rows × 16 / rows strips (at least 8 accumulators when
// there are strips for them), strip groups outside so that a group stays in L1 while the
// row tiles pass over it; `backward` walks the groups from the last
void tiles512(int64_t m, int64_t ns, int64_t nu, int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw,
              int64_t lds, float* c, int64_t ldc, int64_t ldcs, bool backward = false) {
  if (m <= 0 || ns <= 0) return;
  const auto& t = nu == 16 ? kTile512 : kTile512Masked;
  const __mmask16 mk = lanes(nu);
  const int64_t R = std::min<int64_t>(kRows512, m), per = std::min<int64_t>({ns, kStrips512, std::max<int64_t>(1, 16 / R)});
  const int64_t groups = (ns + per - 1) / per;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const int64_t g = backward ? groups - 1 - gi : gi, s0 = g * per, n = std::min(per, ns - s0);
    for (int64_t r = 0; r < m; r += kRows512) {
      const int64_t rows = std::min<int64_t>(kRows512, m - r);
      t[static_cast<size_t>(n - 1)][static_cast<size_t>(rows - 1)](K, a + r * lda, lda, w + s0 * lds, ldw, lds,
                                                                   c + r * ldc + s0 * ldcs, ldc, ldcs, mk);
    }
  }
}

// c[0:n) += a[0:K) · w[0:K, 0:n), 4 rows of w at a time (as row_reduce_avx2), the last
// columns under a mask
LATHE_AVX512 void row_reduce512(int64_t n, int64_t K, const float* a, const float* w, int64_t ldw, float* c,
                                bool backward) {
  const int64_t K4 = K / 4 * 4;
  for (int64_t kb = 0; kb < K4; kb += 4) {
    const int64_t k = backward ? K4 - 4 - kb : kb;
    const __m512 a0 = _mm512_set1_ps(a[k]), a1 = _mm512_set1_ps(a[k + 1]), a2 = _mm512_set1_ps(a[k + 2]),
                 a3 = _mm512_set1_ps(a[k + 3]);
    const float *w0 = w + k * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mk = lanes(n - j);
      __m512 s = _mm512_maskz_loadu_ps(mk, c + j);
      s = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(mk, w0 + j), s);
      s = _mm512_fmadd_ps(a1, _mm512_maskz_loadu_ps(mk, w1 + j), s);
      s = _mm512_fmadd_ps(a2, _mm512_maskz_loadu_ps(mk, w2 + j), s);
      s = _mm512_fmadd_ps(a3, _mm512_maskz_loadu_ps(mk, w3 + j), s);
      _mm512_mask_storeu_ps(c + j, mk, s);
    }
  }
  for (int64_t k = K4; k < K; ++k) {
    const __m512 ak = _mm512_set1_ps(a[k]);
    const float* wk = w + k * ldw;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mk = lanes(n - j);
      _mm512_mask_storeu_ps(c + j, mk, _mm512_fmadd_ps(ak, _mm512_maskz_loadu_ps(mk, wk + j), _mm512_maskz_loadu_ps(mk, c + j)));
    }
  }
}

// acc[r, 0:n) += a[r, 0:K) · w[0:K, 0:n): 2 rows or more by tiles of up to 16 rows over
// 16-column strips (the last one masked), one row by the row reduction
void gemm_acc512(int64_t m, int64_t n, int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw, float* acc,
                 int64_t ldc, bool backward) {
  if (m == 1) return row_reduce512(n, K, a, w, ldw, acc, backward);
  const int64_t n16 = n / 16 * 16;
  if (backward && n16 < n) tiles512(m, 1, n - n16, K, a, lda, w + n16, ldw, 16, acc + n16, ldc, 16);
  tiles512(m, n16 / 16, 16, K, a, lda, w, ldw, 16, acc, ldc, 16, backward);
  if (!backward && n16 < n) tiles512(m, 1, n - n16, K, a, lda, w + n16, ldw, 16, acc + n16, ldc, 16);
}

// One batch row, NG gates × 16 units of a block (pack_blocks; the units past nu are zero
// there, so w is read whole and only c is masked): S·NG accumulators, row k of the block
// into set k mod S (a gate's FMAs then are S independent chains, not one whose latency
// bounds the step), summed at the end
template <int NG, int S>
LATHE_AVX512 void block_row512(int64_t K, const float* a, const float* w, int64_t ldw, float* c, int64_t ldgate,
                               bool backward, __mmask16 mk) {
  __m512 acc[S][NG];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s)
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) acc[s][g] = s == 0 ? _mm512_maskz_loadu_ps(mk, c + g * ldgate) : _mm512_setzero_ps();
  // rows [k, k + S) into the S sets; the rows past K / S · S (the first walked backward) into set 0
  const int64_t KS = K / S * S;
  for (int64_t i = 0; i < K - KS; ++i) {
    const int64_t k = backward ? K - 1 - i : KS + i;
    const __m512 x = _mm512_set1_ps(a[k]);
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) acc[0][g] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w + k * ldw + g * 16), acc[0][g]);
  }
  for (int64_t i = 0; i < KS; i += S) {
    const int64_t k = backward ? KS - S - i : i;
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const __m512 x = _mm512_set1_ps(a[k + s]);
      const float* wk = w + (k + s) * ldw;
#pragma GCC unroll 4
      for (int g = 0; g < NG; ++g) acc[s][g] = _mm512_fmadd_ps(x, _mm512_loadu_ps(wk + g * 16), acc[s][g]);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < NG; ++g) {
    __m512 v = acc[0][g];
#pragma GCC unroll 8
    for (int s = 1; s < S; ++s) v = _mm512_add_ps(v, acc[s][g]);
    _mm512_mask_storeu_ps(c + g * ldgate, mk, v);
  }
}

LATHE_AVX512 inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);  // x - fx·ln2 in two parts
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

LATHE_AVX512 inline __m512 sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

LATHE_AVX512 inline __m512 tanh512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512 f = _mm512_abs_ps(x);
  // |x| > ln 3 / 2: 1 - 2 / (e^{2|x|} + 1)
  __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(exp512(_mm512_add_ps(f, f)), one)));
  // below: f + f·g·P(g)/Q(g), g = f² (Cody and Waite)
  const __m512 g = _mm512_mul_ps(f, f);
  __m512 p = _mm512_mul_ps(_mm512_fmadd_ps(_mm512_set1_ps(-0.3831010665e-2f), g, _mm512_set1_ps(-0.8237728127f)), g);
  __m512 q = _mm512_add_ps(g, _mm512_set1_ps(0.2471319654e1f));
  __m512 small = _mm512_fmadd_ps(f, _mm512_div_ps(p, q), f);
  __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5493061443f), _CMP_GT_OQ), small, big);
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(r), _mm512_and_si512(sign, _mm512_castps_si512(x))));
}

LATHE_AVX512 void sigmoid_n512(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = lanes(n - i);
    _mm512_mask_storeu_ps(x + i, mk, sigmoid512(_mm512_maskz_loadu_ps(mk, x + i)));
  }
}

LATHE_AVX512 void tanh_n512(float* x, int64_t n, float in_scale, float out_scale) {
  const __m512 si = _mm512_set1_ps(in_scale), so = _mm512_set1_ps(out_scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mk = lanes(n - i);
    _mm512_mask_storeu_ps(x + i, mk, _mm512_mul_ps(so, tanh512(_mm512_mul_ps(si, _mm512_maskz_loadu_ps(mk, x + i)))));
  }
}

#pragma GCC diagnostic pop

}  // namespace

// backward: the blocks of 4 rows of w from the last (see gemm_acc)
__attribute__((target("avx2,fma"))) void row_reduce_avx2(int64_t n, int64_t K, const float* a, const float* w, int64_t ldw,
                                                         float* c, bool backward) {
  const int64_t K4 = K / 4 * 4;
  for (int64_t kb = 0; kb < K4; kb += 4) {
    const int64_t k = backward ? K4 - 4 - kb : kb;
    const __m256 a0 = _mm256_set1_ps(a[k]), a1 = _mm256_set1_ps(a[k + 1]), a2 = _mm256_set1_ps(a[k + 2]),
                 a3 = _mm256_set1_ps(a[k + 3]);
    const float *w0 = w + k * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256 s = _mm256_loadu_ps(c + j);
      s = _mm256_fmadd_ps(a0, _mm256_loadu_ps(w0 + j), s);
      s = _mm256_fmadd_ps(a1, _mm256_loadu_ps(w1 + j), s);
      s = _mm256_fmadd_ps(a2, _mm256_loadu_ps(w2 + j), s);
      s = _mm256_fmadd_ps(a3, _mm256_loadu_ps(w3 + j), s);
      _mm256_storeu_ps(c + j, s);
    }
    for (; j < n; ++j) c[j] += a[k] * w0[j] + a[k + 1] * w1[j] + a[k + 2] * w2[j] + a[k + 3] * w3[j];
  }
  for (int64_t k = K4; k < K; ++k) {
    const __m256 ak = _mm256_set1_ps(a[k]);
    const float* wk = w + k * ldw;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(c + j, _mm256_fmadd_ps(ak, _mm256_loadu_ps(wk + j), _mm256_loadu_ps(c + j)));
    for (; j < n; ++j) c[j] += a[k] * wk[j];
  }
}

__attribute__((target("avx2,fma"))) void tile_rows_x16(int64_t m, int64_t K, const float* a, int64_t lda, const float* w,
                                                       int64_t ldw, float* c, int64_t ldc) {
  if (avx512()) return tiles512(m, 1, 16, K, a, lda, w, ldw, 16, c, ldc, 16);
  const int64_t m6 = m / 6 * 6;
  for (int64_t r = 0; r < m6; r += 6) tile_rx16<6>(K, a + r * lda, lda, w, ldw, c + r * ldc, ldc);
  const float* ar = a + m6 * lda;
  float* cr = c + m6 * ldc;
  switch (m - m6) {  // the last rows, fewer than 6
    case 1: tile_rx16<1>(K, ar, lda, w, ldw, cr, ldc); break;
    case 2: tile_rx16<2>(K, ar, lda, w, ldw, cr, ldc); break;
    case 3: tile_rx16<3>(K, ar, lda, w, ldw, cr, ldc); break;
    case 4: tile_rx16<4>(K, ar, lda, w, ldw, cr, ldc); break;
    case 5: tile_rx16<5>(K, ar, lda, w, ldw, cr, ldc); break;
    default: break;
  }
}

// `backward` reverses the order w is walked in. The steps alternate it: w (RT) is read whole
// every step, and at H = 256 (1 MiB) it is a little more than a 1 MiB L2 holds with the rest
// of the step's data; walked the same way each time, least-recently-used replacement evicts
// each line just before it is needed again, while walked back and forth each step starts on
// the lines the last one used most recently. (On the shared 2-core test machine the two
// orders measured within noise of each other, 1.0–1.3 vs 1.1–1.5 ms min per 64-step layer.)
void gemm_acc(int64_t m, int64_t n, int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw, float* acc,
              int64_t ldc, bool backward) {
  if (!kAvx2) return gemm_acc_scalar(m, n, K, a, lda, w, ldw, acc, ldc);
  if (avx512()) return gemm_acc512(m, n, K, a, lda, w, ldw, acc, ldc, backward);
  const int64_t m4 = m >= 4 ? m / 4 * 4 : 0, n16 = n / 16 * 16;
  if (m4 && n16) {
    for (int64_t jb = 0; jb < n16; jb += 16) {  // the strip w[:, j:j+16] stays in L1 over the row blocks
      const int64_t j = backward ? n16 - 16 - jb : jb;
      for (int64_t r = 0; r < m4; r += 4) tile_rx16<4>(K, a + r * lda, lda, w + j, ldw, acc + r * ldc + j, ldc);
    }
    if (n16 < n)
      for (int64_t r = 0; r < m4; ++r) row_reduce_avx2(n - n16, K, a + r * lda, w + n16, ldw, acc + r * ldc + n16, backward);
  } else {
    for (int64_t r = 0; r < m4; ++r) row_reduce_avx2(n, K, a + r * lda, w, ldw, acc + r * ldc, backward);
  }
  for (int64_t r = m4; r < m; ++r) row_reduce_avx2(n, K, a + r * lda, w, ldw, acc + r * ldc, backward);
}

void strips_acc(int64_t m, int64_t ns, int64_t K, const float* a, int64_t lda, const float* w, int64_t lds, float* c,
                int64_t ldc, bool backward) {
  if (avx512()) return tiles512(m, ns, 16, K, a, lda, w, 16, lds, c, ldc, 16, backward);
  for (int64_t jb = 0; jb < ns; ++jb) {
    const int64_t j = backward ? ns - 1 - jb : jb;
    if (kAvx2) tile_rows_x16(m, K, a, lda, w + j * lds, 16, c + j * 16, ldc);
    else gemm_acc_scalar(m, 16, K, a, lda, w + j * lds, 16, c + j * 16, ldc);
  }
}

void pack_blocks(const float* rt, int64_t H, int G, int64_t b0, int64_t b1, float* dst) {
  const int64_t GH = G * H;
  for (int64_t b = b0; b < b1; ++b) {
    float* d = dst + b * H * G * 16;
    const int64_t u0 = b * 16, nu = std::min<int64_t>(16, H - u0);
    for (int64_t k = 0; k < H; ++k)
      for (int g = 0; g < G; ++g) {
        float* row = d + (k * G + g) * 16;
        std::memcpy(row, rt + k * GH + g * H + u0, sizeof(float) * static_cast<size_t>(nu));
        if (nu < 16) std::fill(row + nu, row + 16, 0.f);
      }
  }
}

namespace {

// One batch row, NG gates × 16 units of a block: 2·NG accumulators in registers over all K
// (each row of the block: one broadcast of a[k], 2·NG loads and FMAs; no accumulator
// traffic through L1)
template <int NG>
__attribute__((target("avx2,fma"))) void block_row(int64_t K, const float* a, const float* w, int64_t ldw, float* c,
                                                   int64_t ldgate, bool backward) {
  __m256 acc[NG][2];
#pragma GCC unroll 4
  for (int g = 0; g < NG; ++g) acc[g][0] = _mm256_loadu_ps(c + g * ldgate), acc[g][1] = _mm256_loadu_ps(c + g * ldgate + 8);
  const int64_t k0 = backward ? K - 1 : 0, dk = backward ? -1 : 1;
  for (int64_t i = 0, k = k0; i < K; ++i, k += dk) {
    const __m256 x = _mm256_broadcast_ss(a + k);
    const float* wk = w + k * ldw;
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) {
      acc[g][0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wk + g * 16), acc[g][0]);
      acc[g][1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wk + g * 16 + 8), acc[g][1]);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < NG; ++g) _mm256_storeu_ps(c + g * ldgate, acc[g][0]), _mm256_storeu_ps(c + g * ldgate + 8, acc[g][1]);
}

}  // namespace

void block_acc(int64_t m, int64_t K, const float* a, int64_t lda, const float* blk, int G, int g0, int g1, int64_t nu,
               float* c, int64_t ldgate, int64_t ldc, bool backward) {
  const float* w = blk + g0 * 16;
  const int64_t ldw = G * 16;
  if (avx512()) {
    const __mmask16 mk = lanes(nu);
    if (m == 1) {
      switch (g1 - g0) {  // S·NG >= 8 accumulators: FMA latency 4 × 2 pipes
        case 1: return block_row512<1, 8>(K, a, w, ldw, c, ldgate, backward, mk);
        case 2: return block_row512<2, 4>(K, a, w, ldw, c, ldgate, backward, mk);
        case 3: return block_row512<3, 3>(K, a, w, ldw, c, ldgate, backward, mk);
        case 4: return block_row512<4, 2>(K, a, w, ldw, c, ldgate, backward, mk);
        default: break;
      }
    }
    return tiles512(m, g1 - g0, nu, K, a, lda, w, ldw, 16, c, ldc, ldgate);
  }
  if (kAvx2 && nu == 16 && m == 1) {
    switch (g1 - g0) {
      case 1: return block_row<1>(K, a, w, ldw, c, ldgate, backward);
      case 2: return block_row<2>(K, a, w, ldw, c, ldgate, backward);
      case 3: return block_row<3>(K, a, w, ldw, c, ldgate, backward);
      case 4: return block_row<4>(K, a, w, ldw, c, ldgate, backward);
      default: break;
    }
  }
  for (int g = 0; g < g1 - g0; ++g) {
    if (kAvx2 && nu == 16) tile_rows_x16(m, K, a, lda, w + g * 16, ldw, c + g * ldgate, ldc);
    else gemm_acc(m, nu, K, a, lda, w + g * 16, ldw, c + g * ldgate, ldc, backward);
  }
}

void activate(const RnnAct& a, float* x, int64_t n) {
  const float al = a.alpha, be = a.beta;
  switch (a.kind) {
    case RnnActKind::Sigmoid:
      if (avx512()) return sigmoid_n512(x, n);
      if (kAvx2) return sigmoid_n_avx2(x, n);
      for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
    case RnnActKind::Tanh:
      if (avx512()) return tanh_n512(x, n, 1.0f, 1.0f);
      if (kAvx2) return tanh_n_avx2(x, n, 1.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      return;
    case RnnActKind::ScaledTanh:
      if (avx512()) return tanh_n512(x, n, be, al);
      if (kAvx2) return tanh_n_avx2(x, n, be, al);
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * be) * al;
      return;
    case RnnActKind::Relu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0 ? 0.0f : x[i];
      return;
    case RnnActKind::Affine:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] * al + be;
      return;
    default:
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(rnn_activate(a, x[i]));
  }
}

void clamp_n(float* x, int64_t n, float lim) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(lim, std::max(-lim, x[i]));
}


}  // namespace lathe::rnn_math
