// library_rnn_ahead.cpp — the steps of the CPU recurrence kernel on one thread, the input
// projections ahead of them on the others (library_rnn_team.h: run_ahead, ahead_work).
//
// One thread's steps are bound by reading RT, the projections by arithmetic (as many flops as
// the steps at the lstm model's sizes), so the partner threads project chunks of about T / 8
// steps ahead of the caller while it runs the steps: a chunk is a piece (Team::piece) that the
// partners claim in step order and compute privately, committing by compare-and-swap as the
// Team's pieces. The caller takes a chunk it reaches still open (the first, and all the rest
// while no partner has joined), and one a partner has held past twice the caller's own time
// for a chunk (the partner's late commit is dropped), so a partner without a core delays the
// steps by at most that.

#include <immintrin.h>  // _mm_pause

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backends/library_rnn_team.h"

namespace lathe::rnn_cpu {
namespace {

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

}  // namespace

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
  wait_partners_out(tm, threads);  // a partner inside a chunk may still read the call's buffers
}

}  // namespace lathe::rnn_cpu
