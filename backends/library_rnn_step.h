// library_rnn_step.h — what the three ways of running the CPU recurrence kernel share
// (library_rnn.cpp: one thread, the Team, the projections ahead): the call's arguments, the
// state between steps, one step's piece computed privately and committed, the input
// projections, RT copied by strips. Defined in library_rnn_step.cpp; the arithmetic is in
// library_rnn_math.cpp.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/ir/rnn_op.h"

namespace lathe::rnn_cpu {

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

// RT by 16-column strips (pack_strips) for steps of 2 rows or more: see library_rnn_step.cpp.
int64_t strips_per_gate(const RnnSpec& s);
bool use_strips(const RnnSpec& s, int64_t rows);
// RT's strips, each [H, 16] contiguous, gate by gate (gate g's strip s at (g·S + s)·H·16)
void pack_strips(const float* rt, const RnnSpec& s, float* dst);

// dst[r - r0, c - c0] = xb[col0 + c] + X[r] · WT[:, col0 + c] for rows [r0, r1), columns
// [c0, c1) of this direction's projections (dst's rows ldd apart).
void project(const Proj& p, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* dst, int64_t ldd);

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
inline int phases(const RnnSpec& s) { return s.kind == RnnKind::Gru && !s.lbr ? 2 : 1; }

// One thread's results for a piece: hidden units [u0, u1) of every row of the state.
struct Piece {
  std::vector<float> gates, hc, hn, cn, proj;  // proj: the Team's round 0, the piece's projections [T·B, G·U]
  explicit Piece(const Args& a, int64_t m, int64_t U) {
    const size_t n = static_cast<size_t>(m * U);
    gates.resize(n * a.s.gates()), hc.resize(n), hn.resize(n), cn.resize(n);
  }
};

// Computes round `phase` of step `step` for units [u0, u1) into p (nothing shared is written).
// With a.blocks (RT by 16-unit blocks) u0 is a multiple of 16.
void compute(const Args& a, const State& st, int64_t step, int phase, int64_t u0, int64_t u1, Piece& p);
// The projections of units [u0, u1) of every gate, all T·B rows, into p.proj ([T·B, G·U]):
// computed privately, as a piece of a step is, since a stalled piece may be computed twice.
void project_piece(const Args& a, int64_t u0, int64_t u1, Piece& p);
// ... and into XP, by the thread whose commit won.
void commit_projection(const Args& a, int64_t u0, int64_t u1, const Piece& p);
// Writes a computed piece into the state and the output.
void commit(const Args& a, State& st, int64_t step, int phase, int64_t u0, int64_t u1, const Piece& p);
// The last state into the result's rows T (h) and T + 1 (LSTM's c).
void write_last(const Args& a, const State& st);
// All T steps of the rows of `st`, on this thread alone.
void run_alone(const Args& a, State& st);

}  // namespace lathe::rnn_cpu
