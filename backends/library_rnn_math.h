// library_rnn_math.h — the arithmetic of the fused recurrence's CPU kernel (library_rnn.cpp),
// in library_rnn_math.cpp: acc += a · w by rows or by register tiles, and the activations.
#pragma once
#include <atomic>
#include <cstdint>

#include "core/ir/rnn_op.h"

namespace lathe::rnn_math {

// the CPU has AVX2 and FMA (else every function here runs plain loops of the same structure)
extern const bool kAvx2;

// AVX-512 (avx512f) in place of AVX2 in tile_rows_x16, gemm_acc, block_acc and activate: 16
// lanes, a 16-column strip or a gate of a 16-unit block one zmm register, the last partial
// strip or block under a mask. On when the CPU has it, unless LATHE_RNN_AVX512=0; select_isa
// reads the variable again (the kernel calls it once a call, so a test may switch paths).
extern std::atomic<bool> g_avx512;
inline bool avx512() { return g_avx512.load(std::memory_order_relaxed); }
void select_isa();

// c[0:n) += a[0:K) · w[0:K, 0:n) (w's rows ldw apart), 4 rows of w at a time; `backward` walks the blocks
// of 4 rows from the last (see gemm_acc). AVX2 + FMA only.
__attribute__((target("avx2,fma"))) void row_reduce_avx2(int64_t n, int64_t K, const float* a, const float* w, int64_t ldw,
                                                         float* c, bool backward);
// c[r, 0:16) += a[r, 0:K) · w[0:K, 0:16) for rows r < m, in register tiles of 6 rows (the last 1..5 rows in
// one narrower tile). AVX2 + FMA only.
__attribute__((target("avx2,fma"))) void tile_rows_x16(int64_t m, int64_t K, const float* a, int64_t lda, const float* w,
                                                       int64_t ldw, float* c, int64_t ldc);
// c[r, 16·s + j] += a[r, 0:K) · w_s[0:K, j] for rows r < m, strips s < ns of 16 columns j, each
// contiguous ([K, 16]) and lds floats after the last (tiles over several strips at once with
// AVX-512, else tile_rows_x16 strip by strip); `backward` walks the strips from the last.
void strips_acc(int64_t m, int64_t ns, int64_t K, const float* a, int64_t lda, const float* w, int64_t lds, float* c,
                int64_t ldc, bool backward);
// acc[r, 0:n) += a[r, 0:K) · w[0:K, 0:n) for rows r < m (strips of 16 columns in 4×16 tiles, the rest
// by rows); `backward` reverses the order w is walked in.
void gemm_acc(int64_t m, int64_t n, int64_t K, const float* a, int64_t lda, const float* w, int64_t ldw, float* acc,
              int64_t ldc, bool backward);
// RT [H, G·H] by blocks of 16 hidden units: block b (units 16b.., the last one zero-padded)
// is [H, G·16] at dst + b·H·G·16, its row k gate 0's 16 columns of RT's row k, then gate
// 1's, … (a piece of whole blocks then streams one contiguous range, and a row of a block is
// G·64 bytes: no alignment of its rows to one L1 set). Blocks [b0, b1).
void pack_blocks(const float* rt, int64_t H, int G, int64_t b0, int64_t b1, float* dst);
// c[r, (g - g0)·ldgate + j] += a[r, 0:K) · blk[:, g·16 + j] for gates g in [g0, g1), units
// j < nu (<= 16) of a block of pack_blocks (G gates), rows r < m (c's rows ldc apart);
// `backward` walks K from the end (one batch row: all accumulators in registers).
void block_acc(int64_t m, int64_t K, const float* a, int64_t lda, const float* blk, int G, int g0, int g1, int64_t nu,
               float* c, int64_t ldgate, int64_t ldc, bool backward);
// x[0:n) = act(x[0:n)) in place (Sigmoid, Tanh, ScaledTanh vectorized), and the clip to [-lim, lim]
void activate(const RnnAct& a, float* x, int64_t n);
void clamp_n(float* x, int64_t n, float lim);

}  // namespace lathe::rnn_math
