// gemv_q4_act.h — how the Extern "gemv_q4" kernel (backends/library.h) reads its activation
// X: each row's blocks of B values (the weight's blocks) are quantized to int16 with one f32
// scale a block, s = max|x| / 32767 (a zero block: s = 0, every value 0), q = round-half-even
// (x / s). A block's sum Σ (w − 8) · q is then exact in integers (the AVX2 kernel's
// vpmaddwd), and y = Σ_b d_b · s_b · that sum. The int16 step is at most 2^-16 of the block's
// largest |x| — three orders of magnitude below the int4 weights' own rounding.
// The interpreter (the oracle) and the CPU kernel share this function, so both quantize X
// bit for bit alike; the CUDA rendering spells out the same arithmetic.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lathe {

// x: one row of K values, K a multiple of B; writes K int16 values to xq and K / B scales to s.
inline void gemv_q4_quantize_row(const float* x, int64_t K, int64_t B, int16_t* xq, float* s) {
  for (int64_t b = 0; b < K / B; ++b) {
    float m = 0;
    for (int64_t j = 0; j < B; ++j) m = std::max(m, std::fabs(x[b * B + j]));
    float d = m / 32767.0f;
    s[b] = d;
    for (int64_t j = 0; j < B; ++j) {
      float q = d > 0 ? std::nearbyint(x[b * B + j] / d) : 0.0f;
      xq[b * B + j] = static_cast<int16_t>(std::fmax(-32767.0f, std::fmin(32767.0f, q)));
    }
  }
}

}  // namespace lathe
