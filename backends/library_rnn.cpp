// library_rnn.cpp — the CPU kernel of the fused recurrence, Extern "rnn" (core/ir/rnn_op.h),
// that the c and llvm backends call: the T steps of one direction run in this one call.
//
// A step: the gate pre-activations start as the step's row of XP (the input projections and
// biases, computed for all steps by one GEMM before this kernel), gain h·RT, and the gate
// arithmetic makes the new state. h·RT reads RT [H, G·H] along its rows:
//   * one batch row, and the Team's pieces: RT by blocks of 16 units (pack_blocks, [H, G·16]
//     each, packed once per process when RT is a constant: cached_blocks), a block's G·16
//     accumulators in registers over all H rows (block_acc); an RT known only at run time
//     and one thread: a row reduction over RT in place (gemm_acc; at batch 1 the step is
//     bound by reading RT, which no tiling reduces);
//   * more: register tiles of up to 6 batch rows × 16 columns over a copy of RT made at the
//     start of the call, strip by strip (pack_strips), the 16-column strip staying in L1
//     while every block of batch rows passes over it.
// The activations Sigmoid, Tanh and ScaledTanh are vectorized (exp by Cody–Waite range
// reduction and a degree-5 polynomial, tanh as a rational function below ln 3 / 2 and
// 1 - 2/(e^2x + 1) above, both within a few f32 ulps); the others run the scalar formula.
// The batch rows are independent through the whole recurrence, so a large batch is split
// between threads once, for all T steps (no synchronization per step); a small batch with a
// big RT splits the hidden units instead, while the machine has idle cores (run_rnn), in
// pieces that any of the threads may take, so that one descheduled thread does not stall the
// others (Team) — when that has been faster than one thread for the layer lately: the kernel
// times both ways and keeps the faster (rnn_chooser.h), unless LATHE_RNN_THREADS decides.
// With the projections inside, a third way is timed too: the steps on one thread while the
// partners project chunks of steps ahead of it (run_ahead).
// AVX2 + FMA when the CPU has them, else plain loops with the same structure; the arithmetic
// (row reduction, register tiles, activations) is in library_rnn_math.cpp.

#include <immintrin.h>  // _mm_pause

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "backends/library.h"
#include "backends/library_rnn_math.h"
#include "backends/rnn_pack_cache.h"
#include "backends/rnn_chooser.h"
#include "backends/rnn_crew.h"
#include "core/ir/diag.h"
#include "core/ir/rnn_op.h"

namespace lathe {
namespace {

using namespace rnn_math;

// ---- the recurrence ----

// The input projection of a node with the `proj` flag: X [T·B, I] · WT [I, XW] (+ xb), this
// direction's columns [col0, col0 + G·H).
struct Proj {
  const float *x = nullptr, *wt = nullptr, *xb = nullptr;
  int64_t I = 0, XW = 0, col0 = 0;
  // WT's columns [col0, col0 + G·H) by 16-column strips, [I, 16] each, contiguous (a constant
  // WT: packed once per process, cached_pack), or nullptr
  const float* strips = nullptr;
};

struct Args {
  RnnSpec s;  // with the projection, XW and col0 are those of the projections computed here (G·H, 0)
  const float *xp, *rt, *h0, *c0, *peep, *rbh;
  const int32_t* lens;
  float* out;
  Proj pj;                 // pj.x: the projection is computed here, into xp_w
  float* xp_w = nullptr;   // = xp then
  const float* strips = nullptr;  // RT's 16-column strips, contiguous (pack_strips), or nullptr
  const float* blocks = nullptr;  // RT by blocks of 16 units (pack_blocks), or nullptr
};

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

// gt[r, g·H + j] += in[r] · RT[:, g·H + j] for rows r < m, gates [g0, g1), over the strips
// (6×16 tiles; the last 1..5 rows of a strip in narrower ones) and RT in place for each gate's
// last columns; ldg: gt's row stride
void gates_by_strips(int64_t m, int g0, int g1, const float* in, const Args& a, float* gt, int64_t ldg, bool backward) {
  const int64_t H = a.s.H, GH = a.s.gates() * H, S = strips_per_gate(a.s);
  for (int g = g0; g < g1; ++g) {
    for (int64_t jb = 0; jb < S; ++jb) {
      const int64_t j = backward ? S - 1 - jb : jb;
      const float* w = a.strips + (g * S + j) * H * 16;
      float* c = gt + g * H + j * 16;
      tile_rows_x16(m, H, in, H, w, 16, c, ldg);
    }
    if (S * 16 < H)
      for (int64_t r = 0; r < m; ++r)
        row_reduce_avx2(H - S * 16, H, in + r * H, a.rt + g * H + S * 16, GH, gt + r * ldg + g * H + S * 16, backward);
  }
}

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
      static thread_local std::vector<float> strip;
      strip.resize(static_cast<size_t>(p.I * 16));
      for (int64_t j = 0; j < n16; j += 16) {
        const float* sw = strip.data();
        if (p.strips && c0 % 16 == 0) sw = p.strips + (c0 + j) / 16 * p.I * 16;
        else
          for (int64_t k = 0; k < p.I; ++k) std::memcpy(strip.data() + k * 16, w + k * p.XW + j, sizeof(float) * 16);
        tile_rows_x16(m, p.I, x, p.I, sw, 16, d + j, ldd);
      }
      if (n16 < n) gemm_acc(m, n - n16, p.I, x, p.I, w + n16, p.XW, d + n16, ldd, false);
    } else {
      gemm_acc(m, n, p.I, x, p.I, w, p.XW, d, ldd, false);
    }
  }
}

// The state of batch rows [b0, b0 + m) between steps: h and c double buffered (step s reads
// buffer (s + 1) % 2, writes buffer s % 2), and the two-phase GRU's z gate and r ⊙ h. A piece
// of a step (some hidden units of every row) is a pure function of the last step's state
// written only when it commits, so any thread may compute it, or compute it again.
struct State {
  int64_t b0 = 0, m = 0;
  std::vector<float> h[2], c[2], z, rh;
  State(const Args& a, int64_t lo, int64_t hi) : b0(lo), m(hi - lo) {
    const size_t n = static_cast<size_t>(m * a.s.H);
    for (int i = 0; i < 2; ++i) h[i].assign(n, 0.f), c[i].assign(n, 0.f);
    if (a.h0) std::memcpy(h[1].data(), a.h0 + lo * a.s.H, sizeof(float) * n);  // step 0 reads buffer 1
    if (a.c0) std::memcpy(c[1].data(), a.c0 + lo * a.s.H, sizeof(float) * n);
    if (a.s.kind == RnnKind::Gru && !a.s.lbr) z.assign(n, 0.f), rh.assign(n, 0.f);
  }
};

// Rounds: a step is one round, or two for GRU without linear_before_reset (the candidate gate
// reads (r ⊙ h)·RT_h, which needs every unit's r first).
int phases(const RnnSpec& s) { return s.kind == RnnKind::Gru && !s.lbr ? 2 : 1; }

// One thread's results for a piece: hidden units [u0, u1) of every row of the state.
struct Piece {
  std::vector<float> gates, hc, hn, cn, proj;  // proj: the Team's round 0, the piece's projections [T·B, G·U]
  explicit Piece(const Args& a, int64_t m, int64_t U) {
    const size_t n = static_cast<size_t>(m * U);
    gates.resize(n * a.s.gates()), hc.resize(n), hn.resize(n), cn.resize(n);
  }
};

int64_t len_of(const Args& a, int64_t b) { return a.lens ? std::clamp<int64_t>(a.lens[b], 0, a.s.T) : a.s.T; }

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

// ---- threads that split the hidden units of a small batch ----
//
// Each round (a step, or a phase of one) is cut into pieces of 16·k units, and each thread
// owns a contiguous share of them, whose columns of RT then stay in its core's cache from
// step to step. RT is read by blocks of 16 units (pack_blocks: a piece is a contiguous range
// of them), packed once per process for a constant RT (cached_blocks), else by round 0, each
// piece its own blocks; round 0 also computes the projections. A thread claims a piece (compare-and-swap on the piece's
// state), computes it into its own buffers and commits it; a round ends when all its pieces
// have committed. The machine is shared, so a thread may be descheduled at any moment, and
// no thread ever waits for another's turn to come:
//   * a thread done with its share takes the others' open pieces, from the far ends of
//     their shares (where their owners, working from the near ends, come last), so a thread
//     that gets no core costs the others nothing but its share's cache locality;
//   * a piece claimed by a thread that has not committed it 20 µs after the others ran out
//     of work is claimed again and computed by a waiting thread; the late owner's commit then
//     fails (commit is a compare-and-swap too), and what it computed is dropped. (A late
//     packer writes the bytes the other one did.)
// The partner threads are persistent (Crew) and may come late: the caller returns once every
// piece has committed and no partner is inside a piece (reading the call's buffers); the
// state they may still look at is shared-owned.

constexpr int kMaxThreads = 4;

// An atomic on a cache line of its own: the pieces' states and the threads' counters are
// written by one thread and read (or taken over) by the others, and on one shared line every
// claim and commit of either thread moved the line between the cores (about 24 transfers a
// step at 8 pieces, against a step of ~10 µs)
struct alignas(64) Padded {
  std::atomic<int64_t> v{0};
};

struct Team : CrewJob {
  Args a;
  State st;
  int rounds = 0, per_step = 1;
  std::vector<std::pair<int64_t, int64_t>> units;  // of each piece
  std::vector<int> owner;                          // of each piece
  // a piece's state: (round + 1) << 8 | thread << 2 | status (1 claimed, 2 committing, 3 committed);
  // 3 before round 0 (committed in round -1)
  std::unique_ptr<Padded[]> piece;
  std::unique_ptr<Padded[]> done_by{new Padded[kMaxThreads]};  // pieces each thread committed, all rounds so far
  std::unique_ptr<Padded[]> inside{new Padded[kMaxThreads]};   // a thread between a claim attempt and its commit
  float* packed = nullptr;  // RT by blocks (pack_blocks) when a.blocks was not given: 64-byte aligned (PackPool)
  size_t packed_bytes = 0;
  int stall_us = 0;  // LATHE_RNN_STALL_US=N (tests): a claimed piece sleeps N µs now and then
  // ahead > 0: the caller runs the steps alone while the partners project chunks of `ahead`
  // steps each (run_ahead); the pieces are the chunks
  int64_t ahead = 0, npieces = 0;
  std::atomic<int> arrived{0};  // a partner has joined (ahead)
  Team(const Args& args, int n, int64_t pieces, int64_t ahead_steps = 0)
      : a(args), st(args, 0, args.s.B), ahead(ahead_steps), npieces(pieces) {
    threads = n;
    per_step = phases(a.s);
    rounds = ahead ? 1 : 1 + static_cast<int>(a.s.T) * per_step;  // packing, then the steps
    if (!a.blocks && !ahead) {  // packed in round 0, each piece its own blocks
      packed_bytes = (sizeof(float) * static_cast<size_t>((a.s.H + 15) / 16 * 16 * a.s.gates() * a.s.H) + 63) / 64 * 64;
      packed = PackPool::get().take(packed_bytes);
      LATHE_CHECK(packed != nullptr, "rnn: out of memory for the packed recurrent weight");
      a.blocks = packed;
    }
    const int64_t blocks = (a.s.H + 15) / 16;
    for (int64_t i = 0; i < pieces && !ahead; ++i) {
      units.push_back({std::min(a.s.H, blocks * i / pieces * 16), std::min(a.s.H, blocks * (i + 1) / pieces * 16)});
      owner.push_back(static_cast<int>(i * n / pieces));
    }
    if (const char* e = std::getenv("LATHE_RNN_STALL_US")) stall_us = std::max(0, std::atoi(e));
    piece.reset(new Padded[static_cast<size_t>(pieces)]);
    for (int64_t i = 0; i < pieces; ++i) piece[i].v.store(3);
  }
  ~Team() {
    if (packed) PackPool::get().give(packed, packed_bytes);
  }
  void work(int me) override;  // team_work
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  int64_t pieces() const { return npieces; }
  // pieces committed in all rounds so far (each count only grows: a sum of reads that reaches
  // a round's target means every piece of it has committed)
  int64_t committed() const {
    int64_t n = 0;
    for (int t = 0; t < threads; ++t) n += done_by[t].v.load(std::memory_order_acquire);
    return n;
  }
};

int64_t enc(int64_t round, int th, int status) { return (round + 1) << 8 | th << 2 | status; }


void ahead_work(Team& tm, int me);

// Thread `me` works through the rounds; returns when the last has committed.
void team_work(Team& tm, int me) {
  if (tm.ahead) return ahead_work(tm, me);
  const Args& a = tm.a;
  const int64_t np = tm.pieces();
  int64_t max_u = 0;
  for (auto& u : tm.units) max_u = std::max(max_u, u.second - u.first);
  Piece p(a, tm.st.m, max_u);
  // claims piece i for round r (0: packing, r > 0: round r - 1 of the steps) when it is open
  // (or, with `steal`, claimed by another thread that has not committed it), computes and
  // commits it
  auto attempt = [&](int64_t i, int r, bool steal) {
    tm.inside[me].v.store(1, std::memory_order_seq_cst);
    int64_t v = tm.piece[i].v.load(std::memory_order_acquire);
    const bool open = (v >> 8) == r && (v & 3) == 3;  // committed in round r - 1
    const bool stale = steal && (v >> 8) == r + 1 && (v & 3) == 1 && (v >> 2 & 63) != me;
    bool ok = (open || stale) && tm.piece[i].v.compare_exchange_strong(v, enc(r, me, 1), std::memory_order_acq_rel);
    if (ok) {
      const auto [u0, u1] = tm.units[static_cast<size_t>(i)];
      const int64_t step = (r - 1) / tm.per_step;
      const int ph = (r - 1) % tm.per_step;
      if (tm.stall_us > 0 && (r + i + me) % 3 == 0)  // LATHE_RNN_STALL_US (tests): as if descheduled here
        std::this_thread::sleep_for(std::chrono::microseconds(tm.stall_us));
      if (r == 0) {  // round 0: the piece's blocks of RT packed (unless cached), and the projections of its units
        if (tm.packed) pack_blocks(a.rt, a.s.H, a.s.gates(), u0 / 16, (u1 + 15) / 16, tm.packed);
        if (a.pj.x) project_piece(a, u0, u1, p);
      } else {
        compute(a, tm.st, step, ph, u0, u1, p);
      }
      int64_t mine = enc(r, me, 1);
      if (tm.piece[i].v.compare_exchange_strong(mine, enc(r, me, 2), std::memory_order_acq_rel)) {
        if (r > 0) commit(a, tm.st, step, ph, u0, u1, p);
        else if (a.pj.x) commit_projection(a, u0, u1, p);
        tm.piece[i].v.store(enc(r, me, 3), std::memory_order_release);
        tm.done_by[me].v.fetch_add(1, std::memory_order_acq_rel);
      }
    }
    tm.inside[me].v.store(0, std::memory_order_release);
    return ok;
  };
  int64_t done = 0;  // pieces this thread took in the last round
  for (int r = 0; r < tm.rounds; ++r) {
    const int64_t target = (r + 1) * np;
    if (tm.committed() >= target) continue;  // a late thread catching up
    // RT is read back and forth (as by one thread alone, gemm_acc): this thread's pieces in
    // the order opposite to the last step's; after a round it ran alone, all pieces so
    const bool fwd = r == 0 || (r - 1) / tm.per_step % 2 == 0, solo = done == np;  // as compute()'s rows
    done = 0;
    const double own_start = now_us();
    for (int64_t k = 0; k < np; ++k) {
      const int64_t i = fwd ? k : np - 1 - k;
      if (solo || tm.owner[static_cast<size_t>(i)] == me) done += attempt(i, r, false);
    }
    const double start = now_us();
    // others' open pieces are taken once a partner is a piece's time late (this thread's own
    // pieces this round): a partner that is just a little behind keeps its pieces, whose
    // columns of RT are in its core's cache, not this one's
    const double piece_us = done ? (start - own_start) / static_cast<double>(done) : 0;
    double patience = 20;  // µs: a piece takes a few
    for (int spin = 0; tm.committed() < target; ++spin) {
      if (spin % 32 == 0) {
        const double waited = now_us() - start;
        for (int64_t i = np; i-- > 0 && waited >= piece_us;)  // others' open pieces, from the far end of their shares
          if (tm.owner[static_cast<size_t>(i)] != me) done += attempt(i, r, waited >= patience);
        if (waited >= patience) patience += 20;
        // still waiting long after the last piece was claimed (a round takes ~10 µs): a
        // partner was descheduled inside a piece; let whatever else wants this core run
        if (tm.committed() < target && now_us() - start > 50) std::this_thread::yield();
      }
      _mm_pause();
    }
  }
}

void Team::work(int me) { team_work(*this, me); }

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// LATHE_RNN_THREADS=N: at most N threads (1: none); 0 / unset / "auto": the hardware's, a
// small batch choosing between one thread and the Team by timing them (rnn_chooser.h),
// whatever the load. (Until the Team read RT by cached blocks from persistent threads it ran
// only while the load average left a core idle: with a partner descheduled for a time slice
// it lost to one thread. The chooser sees that by itself, and the benchmarks' load of
// 1.2–1.7 on 2 cores kept the Team off in about half the runs.)
int thread_limit() {
  const char* e = std::getenv("LATHE_RNN_THREADS");
  return e && std::atoi(e) > 0 ? std::atoi(e) : 0;
}

// A small batch's hidden units split between `threads` threads, `pieces` pieces a round.
void run_team(const Args& a, int threads, int64_t pieces);
// The steps on this thread while partner threads project the steps ahead (a.pj.x given).
void run_ahead(const Args& a, int threads);
// Wakes (or starts) the Team's partner threads without work, so that they poll for the next
// call (see Crew).
void warm_team(int threads);

// RT by blocks (pack_blocks), for a constant RT
const float* cached_blocks(NodeRef rt_node, const float* rt, const RnnSpec& s) {
  const int G = s.gates();
  const int64_t nb = (s.H + 15) / 16;
  return cached_pack(rt_node, rt, {0, s.H, G}, static_cast<size_t>(nb * 16 * G * s.H),
                     [&](float* dst) { pack_blocks(rt, s.H, G, 0, nb, dst); });
}

// WT's columns of this direction by 16-column strips (Proj::strips), for a constant WT
const float* cached_strips(NodeRef wt_node, const Proj& p, int64_t GH) {
  const int64_t S = GH / 16;
  if (S == 0) return nullptr;
  return cached_pack(wt_node, p.wt, {1, p.I, p.XW, p.col0, GH}, static_cast<size_t>(S * p.I * 16), [&](float* dst) {
    for (int64_t j = 0; j < S; ++j)
      for (int64_t k = 0; k < p.I; ++k)
        std::memcpy(dst + (j * p.I + k) * 16, p.wt + k * p.XW + p.col0 + j * 16, sizeof(float) * 16);
  });
}

// One chooser per layer shape (its Extern's ints), kept for the process.
std::mutex& chooser_mu() {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::map<std::vector<int64_t>, RnnModeChooser>& choosers() {
  static auto* m = new std::map<std::vector<int64_t>, RnnModeChooser>;
  return *m;
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
  if (B < 8) a.blocks = cached_blocks(n->inputs[1], a.rt, *sp);  // (batch 8+: strips or a split of rows)
  const int hw = thread_limit() > 0 ? thread_limit() : hardware_threads();
  // With the projection: XP of this direction's columns, [T·B, G·H], in a buffer of the pool
  // (computed below by whichever way the recurrence runs)
  struct Scratch {
    float* p = nullptr;
    size_t bytes = 0;
    ~Scratch() {
      if (p) PackPool::get().give(p, bytes);
    }
  } xp;
  if (sp->has_proj) {
    a.pj = {a.xp, static_cast<const float*>(in(sp->in_wt())), static_cast<const float*>(in(sp->in_xb())), sp->I, sp->XW,
            sp->col0};
    a.pj.strips = cached_strips(n->inputs[static_cast<size_t>(sp->in_wt())], a.pj, GH);
    xp.bytes = (sizeof(float) * static_cast<size_t>(T * B * GH) + 63) / 64 * 64;
    xp.p = PackPool::get().take(xp.bytes);
    LATHE_CHECK(xp.p != nullptr, "rnn: out of memory for the input projections");
    a.xp = a.xp_w = xp.p;
    a.s.XW = GH, a.s.col0 = 0;
  }
  // RT by strips (pack_strips) when whole steps run on 2 rows or more (one thread, or blocks
  // of rows), in a buffer of the pool; the Team packs RT its own way
  struct Strips {
    float* p = nullptr;
    size_t bytes = 0;
    ~Strips() {
      if (p) PackPool::get().give(p, bytes);
    }
  } strips;
  auto pack_rt = [&] {
    if (!use_strips(*sp, B)) return;
    strips.bytes = (sizeof(float) * static_cast<size_t>(sp->gates() * strips_per_gate(*sp) * 16 * H) + 63) / 64 * 64;
    strips.p = PackPool::get().take(strips.bytes);
    LATHE_CHECK(strips.p != nullptr, "rnn: out of memory for the packed recurrent weight");
    pack_strips(a.rt, *sp, strips.p);
    a.strips = strips.p;
  };
  // the projections on this thread (one thread runs the recurrence too)
  auto project_all = [&] {  // and RT by strips
    if (a.pj.x) project(a.pj, 0, T * B, 0, GH, a.xp_w, GH);
    pack_rt();
  };
  // A large batch: its rows are independent through the whole recurrence, so threads take
  // blocks of rows (multiples of 4, the register tile) for all T steps, never meeting.
  if (B >= 8 && hw > 1 && T * H * GH * B >= (int64_t(1) << 24)) {
    const int threads = static_cast<int>(std::min<int64_t>(hw, B / 4));
    const int64_t per = (B / 4 + threads - 1) / threads * 4;
    if (a.pj.x) {  // the projections first, threads taking strips of 16 columns
      const int64_t col_strips = (GH + 15) / 16;
      const int pt = static_cast<int>(std::min<int64_t>(hw, col_strips));
      auto cols = [&](int i) { return std::min(GH, col_strips * i / pt * 16); };
      std::vector<std::thread> pool;
      for (int i = 1; i < pt; ++i)
        pool.emplace_back([&a, &cols, i, T, B, GH] { project(a.pj, 0, T * B, cols(i), cols(i + 1), a.xp_w + cols(i), GH); });
      project(a.pj, 0, T * B, 0, cols(1), a.xp_w, GH);
      for (auto& t : pool) t.join();
    }
    pack_rt();
    std::vector<std::unique_ptr<State>> parts;
    for (int i = 0; i < threads; ++i) {
      const int64_t lo = i * per, hi = i == threads - 1 ? B : std::min(B, (i + 1) * per);
      if (lo < hi) parts.push_back(std::make_unique<State>(a, lo, hi));
    }
    std::vector<std::thread> pool;
    for (size_t i = 1; i < parts.size(); ++i) pool.emplace_back([&a, &parts, i] { run_alone(a, *parts[i]); });
    run_alone(a, *parts[0]);
    for (auto& t : pool) t.join();
    return;
  }
  // A small batch with a big recurrent weight: threads split the hidden units, pieces of 16·k
  // (Team), when that has timed faster. RT under 256 KiB: one core's cache holds it, one thread.
  const int64_t blocks = (H + 15) / 16;
  int threads = static_cast<int>(std::min<int64_t>({hw, kMaxThreads, blocks / 4}));
  if (T < 4 || H * GH * 4 < (int64_t(256) << 10)) threads = 1;
  if (threads > 1 && thread_limit() == 0) {
    // not asked for by LATHE_RNN_THREADS: one thread or the Team, whichever has been faster
    // for this layer lately (rnn_chooser.h)
    RnnModeChooser* ch = nullptr;
    int mode = 0;
    {
      std::lock_guard<std::mutex> lock(chooser_mu());
      auto it = choosers().try_emplace(rnn_ints(*sp), a.pj.x ? 3 : 2).first;
      ch = &it->second;
      mode = ch->pick();
    }
    const double t0 = now_us();
    if (mode == 0) {
      project_all();
      State st(a, 0, B);
      run_alone(a, st);
    } else if (mode == 2) {
      pack_rt();
      run_ahead(a, threads);
    } else {
      run_team(a, threads, std::min<int64_t>(blocks, 4 * threads));
    }
    {
      std::lock_guard<std::mutex> lock(chooser_mu());
      ch->record(mode, now_us() - t0);
    }
    // After a call on one thread the partners have stopped polling: a Team call next (the
    // chooser's) would pay their wake-up, which a Team chosen for every call does not, and
    // the chooser kept one thread under SCHED_FIFO at 3.3-3.9 ms against the Team's 2.1-2.3
    if (mode != 1) warm_team(threads);
    return;
  }
  if (threads <= 1) {
    project_all();
    State st(a, 0, B);
    return run_alone(a, st);
  }
  run_team(a, threads, std::min<int64_t>(blocks, 4 * threads));
}

namespace {


void warm_team(int threads) { crew_start(nullptr, threads); }

// ---- the steps on one thread, the projections ahead of them on the others ----
//
// One thread's steps are bound by reading RT, the projections by arithmetic (as many flops as
// the steps at the lstm model's sizes), so the partner threads project chunks of about T / 8
// steps ahead of the caller while it runs the steps: a chunk is a piece (Team::piece) that the
// partners claim in step order and compute privately, committing by compare-and-swap as the
// Team's pieces. The caller takes a chunk it reaches still open (the first, and all the rest
// while no partner has joined), and one a partner has held past twice the caller's own time
// for a chunk (the partner's late commit is dropped), so a partner without a core delays the
// steps by at most that.

// The chunk of projections of steps (times) [c·A, c·A + A) into dst ([rows, G·H]).
void project_chunk(const Team& tm, int64_t c0, int64_t c1, float* dst) {
  const Args& a = tm.a;
  const int64_t T = a.s.T, B = a.s.B, GH = a.s.gates() * a.s.H;
  const int64_t t0 = c0 * tm.ahead, t1 = std::min(T, c1 * tm.ahead);
  project(a.pj, t0 * B, t1 * B, 0, GH, dst, GH);
}

bool chunk_done(const Team& tm, int64_t c) {
  const int64_t v = tm.piece[c].v.load(std::memory_order_acquire);
  return (v >> 8) == 1 && (v & 3) == 3;
}

// A partner: claims the open chunks in the order of the steps, computes and commits them.
void ahead_work(Team& tm, int me) {
  const Args& a = tm.a;
  const int64_t nc = tm.pieces(), B = a.s.B, GH = a.s.gates() * a.s.H;
  tm.arrived.store(1, std::memory_order_release);
  std::vector<float> buf;
  for (int64_t i = 1; i < nc; ++i) {  // (the caller takes the first)
    const int64_t c = a.s.reverse ? nc - 1 - i : i;
    tm.inside[me].v.store(1, std::memory_order_seq_cst);
    int64_t v = tm.piece[c].v.load(std::memory_order_acquire);
    if (v == 3 && tm.piece[c].v.compare_exchange_strong(v, enc(0, me, 1), std::memory_order_acq_rel)) {
      if (tm.stall_us > 0 && (c + me) % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(tm.stall_us));
      const int64_t r0 = c * tm.ahead * B, r1 = std::min(a.s.T, (c + 1) * tm.ahead) * B;
      buf.resize(static_cast<size_t>((r1 - r0) * GH));
      project_chunk(tm, c, c + 1, buf.data());
      int64_t mine = enc(0, me, 1);
      if (tm.piece[c].v.compare_exchange_strong(mine, enc(0, me, 2), std::memory_order_acq_rel)) {
        std::memcpy(a.xp_w + r0 * GH, buf.data(), sizeof(float) * buf.size());
        tm.piece[c].v.store(enc(0, me, 3), std::memory_order_release);
      }
    }
    tm.inside[me].v.store(0, std::memory_order_release);
  }
}

void run_ahead(const Args& a, int threads) {
  const int64_t T = a.s.T, B = a.s.B, GH = a.s.gates() * a.s.H, A = std::max<int64_t>(1, (T + 7) / 8);
  const int64_t nc = (T + A - 1) / A;
  auto team = std::make_shared<Team>(a, threads, nc, A);
  Team& tm = *team;
  crew_start(team, threads);
  double chunk_us = 0;  // the caller's time for a chunk
  // takes chunk c (open, or held by a partner: `from`) and, with `rest`, the open chunks after
  // it in step order, and projects them straight into XP
  auto take = [&](int64_t c, int64_t from, bool rest) {
    if (!tm.piece[c].v.compare_exchange_strong(from, enc(0, 0, 2), std::memory_order_acq_rel)) return false;
    int64_t lo = c, hi = c + 1;  // taken: [lo, hi)
    for (int64_t n = a.s.reverse ? lo - 1 : hi; rest && n >= 0 && n < nc; n = a.s.reverse ? lo - 1 : hi) {
      int64_t v = 3;
      if (!tm.piece[n].v.compare_exchange_strong(v, enc(0, 0, 2), std::memory_order_acq_rel)) break;
      (a.s.reverse ? lo : hi) = a.s.reverse ? n : n + 1;
    }
    const double t0 = now_us();
    project_chunk(tm, lo, hi, a.xp_w + std::min(T, lo * A) * B * GH);
    if (chunk_us == 0) chunk_us = (now_us() - t0) / static_cast<double>(hi - lo);
    for (int64_t i = lo; i < hi; ++i) tm.piece[i].v.store(enc(0, 0, 3), std::memory_order_release);
    return true;
  };
  State& st = tm.st;
  Piece p(a, st.m, a.s.H);
  const int P = phases(a.s);
  for (int64_t step = 0; step < T; ++step) {
    const int64_t c = (a.s.reverse ? T - 1 - step : step) / A;
    for (const double w0 = now_us(); !chunk_done(tm, c);) {
      const int64_t v = tm.piece[c].v.load(std::memory_order_acquire);
      const double waited = now_us() - w0;
      if (v == 3 && take(c, 3, step > 0 && tm.arrived.load(std::memory_order_acquire) == 0)) break;
      if ((v & 3) == 1 && waited > std::max(30.0, 2 * chunk_us) && take(c, v, false)) break;  // a partner held it too long
      // (only a partner's commit, a copy, is waited for long enough to let others run)
      if ((v & 3) == 2 && waited > 50) std::this_thread::yield();
      else _mm_pause();
    }
    for (int ph = 0; ph < P; ++ph) {
      compute(a, st, step, ph, 0, a.s.H, p);
      commit(a, st, step, ph, 0, a.s.H, p);
    }
  }
  write_last(a, st);
  crew_finish(team);
  for (int i = 1; i < threads; ++i)  // a partner inside a chunk may still read the call's buffers
    for (int spin = 0; tm.inside[i].v.load(std::memory_order_acquire); ++spin)
      if (spin > 1000) std::this_thread::yield();
      else _mm_pause();
}

void run_team(const Args& a, int threads, int64_t pieces) {
  auto team = std::make_shared<Team>(a, threads, pieces);
  crew_start(team, threads);
  team_work(*team, 0);
  crew_finish(team);
  for (int i = 1; i < threads; ++i)  // a partner inside a piece may still read the call's buffers
    for (int spin = 0; team->inside[i].v.load(std::memory_order_acquire); ++spin)
      if (spin > 1000) std::this_thread::yield();
      else _mm_pause();
  write_last(team->a, team->st);
}

}  // namespace
}  // namespace lathe
