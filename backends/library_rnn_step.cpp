// library_rnn_step.cpp — the steps of the CPU recurrence kernel (library_rnn_step.h): RT by
// strips, the input projections, a piece of a step computed and committed, and all T steps on
// one thread.
//
// A step: the gate pre-activations start as the step's row of XP (the input projections and
// biases, computed for all steps by one GEMM before the steps), gain h·RT, and the gate
// arithmetic makes the new state. h·RT reads RT [H, G·H] along its rows:
//   * one batch row, and the Team's pieces: RT by blocks of 16 units (pack_blocks, [H, G·16]
//     each, packed once per process when RT is a constant: cached_blocks), a block's G·16
//     accumulators in registers over all H rows (block_acc); an RT known only at run time
//     and one thread: a row reduction over RT in place (gemm_acc; at batch 1 the step is
//     bound by reading RT, which no tiling reduces);
//   * more: register tiles of up to 6 batch rows × 16 columns over a copy of RT made at the
//     start of the call, strip by strip (pack_strips), the 16-column strip staying in L1
//     while every block of batch rows passes over it.

#include "backends/library_rnn_step.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/library_rnn_math.h"

namespace lathe::rnn_cpu {

using namespace rnn_math;

// A step of 2 rows or more reads RT in register tiles of up to 6 rows × 16 columns (RT read
// once a step, not once a row), every tile walking a 16-column strip down all H rows. In
// place the strip's rows are G·H floats apart, and at G·H a multiple of 1024 they all fall in
// one L1 set: the strip never stayed in L1 while the row tiles passed over it. So such a call
// first copies RT strip by strip, each [H, 16] contiguous, gate by gate (gate g's strip s at
// (g·S + s)·H·16, S = H / 16 strips a gate; each gate's last H mod 16 columns are read in
// place). Measured on one thread (T 16, I 128, H 256, load 14, min of 30): batch 4 1.63 ->
// 0.76 ms, 8 2.71 -> 1.59 ms, 64 20.6 -> 12.4 ms CPU; batch 2 (T 64) 2.8-3.3 -> 2.3-2.7 ms.
// Batch 1 keeps the row reduction (gemm_acc), which is bound by reading RT, not by its
// arithmetic, and the copy then only costs (1.6 vs 1.8-2.0 ms).
int64_t strips_per_gate(const RnnSpec& s) { return s.H / 16; }
bool use_strips(const RnnSpec& s, int64_t rows) { return kAvx2 && rows >= 2 && s.T >= 2 && strips_per_gate(s) > 0; }

void pack_strips(const float* rt, const RnnSpec& s, float* dst) {
  const int64_t H = s.H, GH = s.gates() * H, S = strips_per_gate(s);
  for (int64_t g = 0; g < s.gates(); ++g)
    for (int64_t j = 0; j < S; ++j) {
      float* d = dst + (g * S + j) * H * 16;
      const float* w = rt + g * H + j * 16;
      for (int64_t k = 0; k < H; ++k) std::memcpy(d + k * 16, w + k * GH, sizeof(float) * 16);
    }
}

namespace {

// gt[r, g·H + j] += in[r] · RT[:, g·H + j] for rows r < m, gates [g0, g1), over the strips
// (6×16 tiles; the last 1..5 rows of a strip in narrower ones) and RT in place for each gate's
// last columns; ldg: gt's row stride
void gates_by_strips(int64_t m, int g0, int g1, const float* in, const Args& a, float* gt, int64_t ldg, bool backward) {
  const int64_t H = a.s.H, GH = a.s.gates() * H, S = strips_per_gate(a.s);
  for (int g = g0; g < g1; ++g) {
    strips_acc(m, S, H, in, H, a.strips + g * S * H * 16, H * 16, gt + g * H, ldg, backward);
    if (S * 16 < H)
      for (int64_t r = 0; r < m; ++r)
        row_reduce_avx2(H - S * 16, H, in + r * H, a.rt + g * H + S * 16, GH, gt + r * ldg + g * H + S * 16, backward);
  }
}

int64_t len_of(const Args& a, int64_t b) { return a.lens ? std::clamp<int64_t>(a.lens[b], 0, a.s.T) : a.s.T; }

}  // namespace

// dst[r - r0, c - c0] = xb[col0 + c] + X[r] · WT[:, col0 + c] for rows [r0, r1), columns
// [c0, c1) of this direction's projections; blocks of 72 rows, so the block of X stays in L2
// while the 16-column strips of WT pass over it in 6×16 register tiles (the last rows of a
// block in 1..5×16 tiles, the last columns in gemm_acc).
void project(const Proj& p, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* dst, int64_t ldd) {
  const int64_t n = c1 - c0, n16 = n / 16 * 16;
  for (int64_t rb = r0; rb < r1; rb += 72) {
    const int64_t re = std::min(r1, rb + 72), m = re - rb, m6 = kAvx2 ? m / 6 * 6 : 0;
    for (int64_t r = rb; r < re; ++r) {
      float* d = dst + (r - r0) * ldd;
      if (p.xb) std::memcpy(d, p.xb + p.col0 + c0, sizeof(float) * static_cast<size_t>(n));
      else std::fill(d, d + n, 0.f);
    }
    const float *x = p.x + rb * p.I, *w = p.wt + p.col0 + c0;
    float* d = dst + (rb - r0) * ldd;
    if (m6 && n16) {
      // 6×16 tiles over a contiguous copy of the 16-column strip of WT, which then stays in
      // L1 over the row tiles. Read in place, the strip's rows are XW floats apart, and at XW
      // a multiple of 1024 (lstm: 4·256) all of them fall in one L1 set of 8 ways: every tile
      // read the strip from L2 again (the copy: the lstm model's projections 0.32 -> 0.23 ms
      // at I 128, 0.62 -> 0.43 ms at I 256, one thread)
      // (WT packed once: all strips in one call, whose AVX-512 tiles span 2 strips)
      if (p.strips && c0 % 16 == 0) {
        strips_acc(m, n16 / 16, p.I, x, p.I, p.strips + c0 / 16 * p.I * 16, p.I * 16, d, ldd, false);
      } else {
        static thread_local std::vector<float> strip;
        strip.resize(static_cast<size_t>(p.I * 16));
        for (int64_t j = 0; j < n16; j += 16) {
          for (int64_t k = 0; k < p.I; ++k) std::memcpy(strip.data() + k * 16, w + k * p.XW + j, sizeof(float) * 16);
          tile_rows_x16(m, p.I, x, p.I, strip.data(), 16, d + j, ldd);
        }
      }
      if (n16 < n) gemm_acc(m, n - n16, p.I, x, p.I, w + n16, p.XW, d + n16, ldd, false);
    } else {
      gemm_acc(m, n, p.I, x, p.I, w, p.XW, d, ldd, false);
    }
  }
}

// Computes round `phase` of step `step` for units [u0, u1) into p (nothing shared is written).
// With a.blocks (RT by 16-unit blocks) u0 is a multiple of 16.
void compute(const Args& a, const State& st, int64_t step, int phase, int64_t u0, int64_t u1, Piece& p) {
  const RnnSpec& s = a.s;
  const int64_t T = s.T, B = s.B, H = s.H, G = s.gates(), GH = G * H, m = st.m, U = u1 - u0, GU = G * U;
  const int64_t t = s.reverse ? T - 1 - step : step;
  const float* hp = st.h[(step + 1) % 2].data();
  const float* cp = st.c[(step + 1) % 2].data();
  float* gt = p.gates.data();
  const bool backward = step % 2 == 1;  // RT walked back and forth (gemm_acc)
  auto clip = [&](float* x, int64_t n) {
    if (s.has_clip) clamp_n(x, n, s.clip);
  };
  // gt[:, gate g's units] (= XP's, or rbh) += in · RT[:, gate g's units], gates [g0, g1)
  auto gates = [&](const float* in, int g0, int g1) {
    for (int64_t r = 0; r < m; ++r) {
      const float* x = a.xp + (t * B + st.b0 + r) * s.XW + s.col0;
      for (int g = g0; g < g1; ++g) {
        float* dst = gt + r * GU + g * U;
        if (s.kind == RnnKind::Gru && s.lbr && g == 2) {  // the recurrent part kept apart from x until r scales it
          if (a.rbh) std::memcpy(dst, a.rbh + u0, sizeof(float) * U);
          else std::fill(dst, dst + U, 0.f);
        } else {
          std::memcpy(dst, x + g * H + u0, sizeof(float) * U);
        }
      }
    }
    if (a.blocks && (m == 1 || U < H)) {  // the blocks of units [u0, u1), walked back and forth
      const int64_t b0 = u0 / 16, b1 = (u1 + 15) / 16;
      for (int64_t i = 0; i < b1 - b0; ++i) {
        const int64_t b = backward ? b1 - 1 - i : b0 + i;
        block_acc(m, H, in, H, a.blocks + b * H * G * 16, static_cast<int>(G), g0, g1, std::min<int64_t>(16, u1 - b * 16),
                  gt + g0 * U + (b * 16 - u0), U, GU, backward);
      }
      return;
    }
    if (U == H && a.strips && use_strips(s, m)) return gates_by_strips(m, g0, g1, in, a, gt, GU, backward);
    if (U == H) return gemm_acc(m, (g1 - g0) * H, H, in, H, a.rt + g0 * H, GH, gt + g0 * H, GU, backward);
    for (int g = g0; g < g1; ++g) gemm_acc(m, U, H, in, H, a.rt + g * H + u0, GH, gt + g * U, GU, backward);
  };
  if (s.kind == RnnKind::Gru && !s.lbr && phase == 0) {  // z, r and r ⊙ h
    gates(hp, 0, 2);
    for (int64_t r = 0; r < m; ++r) {
      float* g = gt + r * GU;
      clip(g, 2 * U);
      activate(s.act[0], g, 2 * U);
      for (int64_t j = 0; j < U; ++j) p.hn[r * U + j] = g[U + j] * hp[r * H + u0 + j];  // r ⊙ h
    }
    return;
  }
  if (s.kind == RnnKind::Gru && !s.lbr) gates(st.rh.data(), 2, 3);
  else gates(hp, 0, static_cast<int>(G));
  for (int64_t r = 0; r < m; ++r) {
    const int64_t b = st.b0 + r;
    const float *hpr = hp + r * H + u0, *cpr = cp + r * H + u0;
    float *hr = p.hn.data() + r * U, *cr = p.cn.data() + r * U;
    if (t >= len_of(a, b)) {  // past this entry's length: its state stays (its output is zero, commit)
      std::memcpy(hr, hpr, sizeof(float) * U);
      std::memcpy(cr, cpr, sizeof(float) * U);
      continue;
    }
    float* g = gt + r * GU;
    if (s.kind == RnnKind::Rnn) {
      clip(g, U);
      activate(s.act[0], g, U);
      std::memcpy(hr, g, sizeof(float) * U);
    } else if (s.kind == RnnKind::Gru) {
      float *hh = g + 2 * U;
      const float* z = s.lbr ? g : st.z.data() + r * H + u0;
      if (s.lbr) {
        float *zg = g, *rg = g + U;
        clip(zg, 2 * U);
        activate(s.act[0], zg, 2 * U);
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
        for (int64_t j = 0; j < U; ++j) ai[j] += P[j] * cpr[j], af[j] += P[2 * H + j] * cpr[j];
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
      for (int64_t j = 0; j < U; ++j) cr[j] = af[j] * cpr[j] + ai[j] * ac[j];
      if (P)
        for (int64_t j = 0; j < U; ++j) ao[j] += P[H + j] * cr[j];
      clip(ao, U);
      activate(s.act[0], ao, U);
      float* hc = p.hc.data() + r * U;  // h(c')
      std::memcpy(hc, cr, sizeof(float) * U);
      activate(s.act[2], hc, U);
      for (int64_t j = 0; j < U; ++j) hr[j] = ao[j] * hc[j];
    }
  }
}

// The projections of units [u0, u1) of every gate, all T·B rows, into p.proj ([T·B, G·U]):
// computed privately, as a piece of a step is, since a stalled piece may be computed twice.
void project_piece(const Args& a, int64_t u0, int64_t u1, Piece& p) {
  const int64_t H = a.s.H, G = a.s.gates(), U = u1 - u0, rows = a.s.T * a.s.B;
  p.proj.resize(static_cast<size_t>(rows * G * U));
  for (int64_t g = 0; g < G; ++g) project(a.pj, 0, rows, g * H + u0, g * H + u1, p.proj.data() + g * U, G * U);
}

// ... and into XP, by the thread whose commit won.
void commit_projection(const Args& a, int64_t u0, int64_t u1, const Piece& p) {
  const int64_t H = a.s.H, G = a.s.gates(), U = u1 - u0, rows = a.s.T * a.s.B;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < G; ++g)
      std::memcpy(a.xp_w + r * G * H + g * H + u0, p.proj.data() + (r * G + g) * U, sizeof(float) * static_cast<size_t>(U));
}

// Writes a computed piece into the state and the output.
void commit(const Args& a, State& st, int64_t step, int phase, int64_t u0, int64_t u1, const Piece& p) {
  const RnnSpec& s = a.s;
  const int64_t T = s.T, B = s.B, H = s.H, U = u1 - u0, t = s.reverse ? T - 1 - step : step;
  const size_t bytes = sizeof(float) * static_cast<size_t>(U);
  for (int64_t r = 0; r < st.m; ++r) {
    if (s.kind == RnnKind::Gru && !s.lbr && phase == 0) {
      std::memcpy(st.z.data() + r * H + u0, p.gates.data() + r * 3 * U, bytes);
      std::memcpy(st.rh.data() + r * H + u0, p.hn.data() + r * U, bytes);
      continue;
    }
    const float* hn = p.hn.data() + r * U;
    std::memcpy(st.h[step % 2].data() + r * H + u0, hn, bytes);
    if (s.kind == RnnKind::Lstm) std::memcpy(st.c[step % 2].data() + r * H + u0, p.cn.data() + r * U, bytes);
    float* y = a.out + (t * B + st.b0 + r) * H + u0;
    if (t < len_of(a, st.b0 + r)) std::memcpy(y, hn, bytes);
    else std::fill(y, y + U, 0.f);
  }
}

// The last state into the result's rows T (h) and T + 1 (LSTM's c).
void write_last(const Args& a, const State& st) {
  const int64_t T = a.s.T, B = a.s.B, H = a.s.H;
  const size_t bytes = sizeof(float) * static_cast<size_t>(st.m * H);
  std::memcpy(a.out + (T * B + st.b0) * H, st.h[(T + 1) % 2].data(), bytes);  // the last step wrote buffer (T - 1) % 2
  if (a.s.kind == RnnKind::Lstm) std::memcpy(a.out + ((T + 1) * B + st.b0) * H, st.c[(T + 1) % 2].data(), bytes);
}

// All T steps of the rows of `st`, on this thread alone.
void run_alone(const Args& a, State& st) {
  Piece p(a, st.m, a.s.H);
  const int P = phases(a.s);
  for (int64_t step = 0; step < a.s.T; ++step)
    for (int ph = 0; ph < P; ++ph) {
      compute(a, st, step, ph, 0, a.s.H, p);
      commit(a, st, step, ph, 0, a.s.H, p);
    }
  write_last(a, st);
}

}  // namespace lathe::rnn_cpu
