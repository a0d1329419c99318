// library_rnn.cpp — the CPU kernel of the fused recurrence, Extern "rnn" (core/ir/rnn_op.h),
// that the c and llvm backends call: the T steps of one direction run in this one call.
//
// A step: the gate pre-activations start as the step's row of XP (the input projections and
// biases, computed for all steps by one GEMM before this kernel), gain h·RT, and the gate
// arithmetic makes the new state. h·RT reads RT [H, G·H] along its rows:
//   * a few batch rows (< 4): a row reduction per batch row, the G·H accumulators in L1 gaining
//     h[k..k+3] times four contiguous rows of RT at a time (RT streams through once per row;
//     at batch 1 the step is bound by reading RT, which no tiling reduces);
//   * more: register tiles of 4 batch rows × 16 columns, the 16-column strip of RT staying in
//     L1 while every block of batch rows passes over it.
// The activations Sigmoid, Tanh and ScaledTanh are vectorized (exp by Cody–Waite range
// reduction and a degree-5 polynomial, tanh as a rational function below ln 3 / 2 and
// 1 - 2/(e^2x + 1) above, both within a few f32 ulps); the others run the scalar formula.
// The batch rows are independent through the whole recurrence, so a large batch is split
// between threads once, for all T steps (no synchronization per step); a small batch with a
// big RT splits the hidden units instead, while the machine has idle cores (run_rnn).
// AVX2 + FMA when the CPU has them, else plain loops with the same structure.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/library.h"
#include "core/ir/diag.h"
#include "core/ir/rnn_op.h"

namespace lathe {
namespace {

const bool kAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

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

// 4 rows × 16 columns of acc in registers over all of K
__attribute__((target("avx2,fma"))) void tile_4x16(int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw,
                                                   float* c, int64_t ldc) {
  __m256 c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8), c10 = _mm256_loadu_ps(c + ldc),
         c11 = _mm256_loadu_ps(c + ldc + 8), c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8),
         c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(w + k * ldw), w1 = _mm256_loadu_ps(w + k * ldw + 8);
    __m256 x = _mm256_broadcast_ss(a0 + k);
    c00 = _mm256_fmadd_ps(x, w0, c00), c01 = _mm256_fmadd_ps(x, w1, c01);
    x = _mm256_broadcast_ss(a1 + k);
    c10 = _mm256_fmadd_ps(x, w0, c10), c11 = _mm256_fmadd_ps(x, w1, c11);
    x = _mm256_broadcast_ss(a2 + k);
    c20 = _mm256_fmadd_ps(x, w0, c20), c21 = _mm256_fmadd_ps(x, w1, c21);
    x = _mm256_broadcast_ss(a3 + k);
    c30 = _mm256_fmadd_ps(x, w0, c30), c31 = _mm256_fmadd_ps(x, w1, c31);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
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
      for (int64_t r = 0; r < m4; r += 4) tile_4x16(K, a + r * lda, lda, w + j, ldw, acc + r * ldc + j, ldc);
    }
    if (n16 < n)
      for (int64_t r = 0; r < m4; ++r) row_reduce_avx2(n - n16, K, a + r * lda, w + n16, ldw, acc + r * ldc + n16, backward);
  } else {
    for (int64_t r = 0; r < m4; ++r) row_reduce_avx2(n, K, a + r * lda, w, ldw, acc + r * ldc, backward);
  }
  for (int64_t r = m4; r < m; ++r) row_reduce_avx2(n, K, a + r * lda, w, ldw, acc + r * ldc, backward);
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

// ---- the recurrence ----

struct Args {
  RnnSpec s;
  const float *xp, *rt, *h0, *c0, *peep, *rbh;
  const int32_t* lens;
  float* out;
};

// Threads that split one batch's hidden units meet at the end of every step (and GRU without
// linear_before_reset once more, after r ⊙ h): spin briefly, then yield the core (the
// machine may be shared; a descheduled partner must not be waited for by spinning).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    const unsigned gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      return;
    }
    for (int spin = 0; gen_.load(std::memory_order_acquire) == gen; ++spin) {
      if (spin < 4000) _mm_pause();
      else std::this_thread::yield();
    }
  }

 private:
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<unsigned> gen_{0};
};

// State shared by the threads that split the hidden units of batch rows [b0, b1): h double
// buffered (a step reads one buffer whole and writes its units of the other), the cell (each
// thread its own units), r ⊙ h for GRU's candidate gate.
struct Shared {
  int64_t b0 = 0, b1 = 0;
  std::vector<float> h[2], c, rh;
  Barrier* barrier = nullptr;
  Shared(const Args& a, int64_t lo, int64_t hi, Barrier* bar) : b0(lo), b1(hi), barrier(bar) {
    const size_t n = static_cast<size_t>((hi - lo) * a.s.H);
    h[0].assign(n, 0.f), h[1].assign(n, 0.f), c.assign(n, 0.f), rh.assign(n, 0.f);
    if (a.h0) std::memcpy(h[1].data(), a.h0 + lo * a.s.H, sizeof(float) * n);  // step 0 reads buffer 1
    if (a.c0) std::memcpy(c.data(), a.c0 + lo * a.s.H, sizeof(float) * n);
  }
  void sync() {
    if (barrier) barrier->wait();
  }
};

// The T steps for the batch rows of `sh` and hidden units [u0, u1).
void run_part(const Args& a, Shared& sh, int64_t u0, int64_t u1) {
  const RnnSpec& s = a.s;
  const int64_t T = s.T, B = s.B, H = s.H, G = s.gates(), GH = G * H, b0 = sh.b0, m = sh.b1 - sh.b0, U = u1 - u0,
                GU = G * U;
  const bool gru_two = s.kind == RnnKind::Gru && !s.lbr;  // the candidate gate reads (r ⊙ h)·RT_h
  const bool whole = U == H;  // one product over the contiguous gate columns
  std::vector<float> gates(static_cast<size_t>(m * GU)), tmp(static_cast<size_t>(m * U));
  float *gt = gates.data(), *tm = tmp.data(), *c = sh.c.data();
  auto clip = [&](float* x, int64_t n) {
    if (s.has_clip) clamp_n(x, n, s.clip);
  };
  // acc[:, gate g's units] += in · RT[:, gate g's units] for the gates [g0, g1)
  auto product = [&](const float* in, int g0, int g1, bool backward) {
    if (whole) return gemm_acc(m, (g1 - g0) * H, H, in, H, a.rt + g0 * H, GH, gt + g0 * H, GU, backward);
    for (int g = g0; g < g1; ++g) gemm_acc(m, U, H, in, H, a.rt + g * H + u0, GH, gt + g * U, GU, backward);
  };
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = s.reverse ? T - 1 - step : step;
    const float* hp = sh.h[(step + 1) % 2].data();
    float* hn = sh.h[step % 2].data();
    // gate pre-activations: XP's rows (GRU with linear_before_reset: its candidate columns
    // start at rbh instead, the recurrent part kept apart from x until r scales it)
    for (int64_t r = 0; r < m; ++r) {
      const float* x = a.xp + (t * B + b0 + r) * s.XW + s.col0;
      for (int g = 0; g < G; ++g) {
        float* dst = gt + r * GU + g * U;
        if (s.kind == RnnKind::Gru && s.lbr && g == 2) {
          if (a.rbh) std::memcpy(dst, a.rbh + u0, sizeof(float) * U);
          else std::fill(dst, dst + U, 0.f);
        } else {
          std::memcpy(dst, x + g * H + u0, sizeof(float) * U);
        }
      }
    }
    const bool backward = step % 2 == 1;  // RT walked back and forth (gemm_acc)
    product(hp, 0, gru_two ? 2 : G, backward);
    if (s.kind == RnnKind::Gru) {
      for (int64_t r = 0; r < m; ++r) {  // z, r
        float* g = gt + r * GU;
        clip(g, 2 * U);
        activate(s.act[0], g, 2 * U);
        if (gru_two)
          for (int64_t j = 0; j < U; ++j) sh.rh[r * H + u0 + j] = g[U + j] * hp[r * H + u0 + j];
      }
      if (gru_two) {
        sh.sync();  // every unit's r ⊙ h is written
        product(sh.rh.data(), 2, 3, backward);
      }
    }
    for (int64_t r = 0; r < m; ++r) {
      const int64_t b = b0 + r;
      float* y = a.out + (t * B + b) * H + u0;
      const float* hpr = hp + r * H + u0;
      float* hr = hn + r * H + u0;
      const int64_t len = a.lens ? std::clamp<int64_t>(a.lens[b], 0, T) : T;
      if (t >= len) {  // past this entry's length: its state stays, its output is zero
        std::memcpy(hr, hpr, sizeof(float) * U);
        std::fill(y, y + U, 0.f);
        continue;
      }
      float *g = gt + r * GU, *cr = c + r * H + u0;
      if (s.kind == RnnKind::Rnn) {
        clip(g, U);
        activate(s.act[0], g, U);
        std::memcpy(hr, g, sizeof(float) * U);
      } else if (s.kind == RnnKind::Gru) {
        float *z = g, *rg = g + U, *hh = g + 2 * U;
        if (s.lbr) {
          const float* x = a.xp + (t * B + b) * s.XW + s.col0 + 2 * H + u0;
          for (int64_t j = 0; j < U; ++j) hh[j] = x[j] + rg[j] * hh[j];
        }
        clip(hh, U);
        activate(s.act[1], hh, U);
        for (int64_t j = 0; j < U; ++j) hr[j] = (1.0f - z[j]) * hh[j] + z[j] * hpr[j];
      } else {
        float *ai = g, *ao = g + U, *af = g + 2 * U, *ac = g + 3 * U;
        const float* P = a.peep ? a.peep + u0 : nullptr;
        if (P)
          for (int64_t j = 0; j < U; ++j) ai[j] += P[j] * cr[j], af[j] += P[2 * H + j] * cr[j];
        clip(ai, U);
        activate(s.act[0], ai, U);
        if (s.input_forget) {
          for (int64_t j = 0; j < U; ++j) af[j] = 1.0f - ai[j];
        } else {
          clip(af, U);
          activate(s.act[0], af, U);
        }
        clip(ac, U);
        activate(s.act[1], ac, U);
        for (int64_t j = 0; j < U; ++j) cr[j] = af[j] * cr[j] + ai[j] * ac[j];
        if (P)
          for (int64_t j = 0; j < U; ++j) ao[j] += P[H + j] * cr[j];
        clip(ao, U);
        activate(s.act[0], ao, U);
        float* hc = tm + r * U;  // h(c')
        std::memcpy(hc, cr, sizeof(float) * U);
        activate(s.act[2], hc, U);
        for (int64_t j = 0; j < U; ++j) hr[j] = ao[j] * hc[j];
      }
      std::memcpy(y, hr, sizeof(float) * U);
    }
    sh.sync();  // the step's h is whole before the next reads it
  }
  const float* hl = sh.h[(T + 1) % 2].data();  // the last step wrote buffer (T - 1) % 2
  for (int64_t r = 0; r < m; ++r) {
    std::memcpy(a.out + (T * B + b0 + r) * H + u0, hl + r * H + u0, sizeof(float) * U);
    if (s.kind == RnnKind::Lstm) std::memcpy(a.out + ((T + 1) * B + b0 + r) * H + u0, c + r * H + u0, sizeof(float) * U);
  }
}

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// LATHE_RNN_THREADS=N: at most N threads (1: none); 0 / unset: the hardware's
int thread_limit() {
  const char* e = std::getenv("LATHE_RNN_THREADS");
  return e && std::atoi(e) > 0 ? std::atoi(e) : 0;
}

// Threads that meet every step are only worth it with idle cores: on a busy machine a
// partner descheduled for a time slice stalls every step (measured on 2 cores at load 6–12:
// 8–18 ms for a 64-step layer that one thread runs in 1 ms). Unless LATHE_RNN_THREADS asks
// for them, the hidden units are split only while the 1-minute load average leaves at least
// core idle besides this thread.
bool cores_idle(int threads) {
  if (thread_limit() > 0) return true;
  double load[1];
  return getloadavg(load, 1) == 1 && load[0] + (threads - 1) <= hardware_threads() + 0.5;  // the load counts this thread
}

}  // namespace

void run_rnn(NodeRef n, void* const* bufs) {
  auto sp = rnn_spec(n);
  LATHE_CHECK(sp.has_value() && static_cast<int>(n->inputs.size()) == sp->num_inputs(), "run_rnn: not an rnn node");
  Args a{*sp, static_cast<const float*>(bufs[1]), static_cast<const float*>(bufs[2]), nullptr, nullptr, nullptr, nullptr,
         nullptr, static_cast<float*>(bufs[0])};
  auto in = [&](int i) { return i < 0 ? nullptr : bufs[1 + i]; };
  a.h0 = static_cast<const float*>(in(sp->in_h0()));
  a.c0 = static_cast<const float*>(in(sp->in_c0()));
  a.peep = static_cast<const float*>(in(sp->in_peep()));
  a.lens = static_cast<const int32_t*>(in(sp->in_lens()));
  a.rbh = static_cast<const float*>(in(sp->in_rbh()));
  const int64_t B = sp->B, H = sp->H, T = sp->T, GH = sp->gates() * H;
  const int hw = thread_limit() > 0 ? thread_limit() : hardware_threads();
  std::vector<std::thread> pool;
  // A large batch: its rows are independent through the whole recurrence, so threads take
  // blocks of rows (multiples of 4, the register tile) for all T steps, never meeting.
  if (B >= 8 && hw > 1 && T * H * GH * B >= (int64_t(1) << 24)) {
    const int threads = static_cast<int>(std::min<int64_t>(hw, B / 4));
    const int64_t per = (B / 4 + threads - 1) / threads * 4;
    std::vector<std::unique_ptr<Shared>> parts;
    for (int i = 0; i < threads; ++i) {
      const int64_t lo = i * per, hi = i == threads - 1 ? B : std::min(B, (i + 1) * per);
      if (lo < hi) parts.push_back(std::make_unique<Shared>(a, lo, hi, nullptr));
    }
    for (size_t i = 1; i < parts.size(); ++i) pool.emplace_back([&a, &parts, i, H] { run_part(a, *parts[i], 0, H); });
    run_part(a, *parts[0], 0, H);
    for (auto& t : pool) t.join();
    return;
  }
  // A small batch with a big recurrent weight: threads split the hidden units (blocks of 16),
  // each reading only its units' columns of RT, which then stay in its core's cache from step
  // to step; they meet once a step.
  const int64_t blocks = (H + 15) / 16;
  int threads = static_cast<int>(std::min<int64_t>({hw, 4, blocks / 4}));
  if (T < 4 || H * GH * 4 < (int64_t(256) << 10)) threads = 1;  // RT under 256 KiB: one core's cache holds it
  if (threads > 1 && !cores_idle(threads)) threads = 1;
  if (threads <= 1) {
    Shared sh(a, 0, B, nullptr);
    return run_part(a, sh, 0, H);
  }
  Barrier bar(threads);
  Shared sh(a, 0, B, &bar);
  auto range = [&](int i) {
    return std::pair<int64_t, int64_t>{std::min(H, blocks * i / threads * 16), std::min(H, blocks * (i + 1) / threads * 16)};
  };
  for (int i = 1; i < threads; ++i) pool.emplace_back([&a, &sh, r = range(i)] { run_part(a, sh, r.first, r.second); });
  auto r0 = range(0);
  run_part(a, sh, r0.first, r0.second);
  for (auto& t : pool) t.join();
}

}  // namespace lathe
