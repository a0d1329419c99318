// library_rnn_math.cpp — the arithmetic of the fused recurrence's CPU kernel (library_rnn.cpp):
// the row reduction and the register tiles of acc += a · w, and the vectorized activations.
#include "backends/library_rnn_math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace lathe::rnn_math {

const bool kAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

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
      if (kAvx2) return sigmoid_n_avx2(x, n);
      for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
    case RnnActKind::Tanh:
      if (kAvx2) return tanh_n_avx2(x, n, 1.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      return;
    case RnnActKind::ScaledTanh:
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
