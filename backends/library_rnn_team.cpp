// library_rnn_team.cpp — threads that split the hidden units of a small batch, for all T
// steps of the CPU recurrence kernel (library_rnn_team.h).
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

#include "backends/library_rnn_team.h"

#include <immintrin.h>  // _mm_pause

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "backends/library_rnn_math.h"

namespace lathe::rnn_cpu {

using namespace rnn_math;

Team::Team(const Args& args, int n, int64_t pieces, int64_t ahead_steps)
    : a(args), st(args, 0, args.s.B), ahead(ahead_steps), npieces(pieces) {
  threads = n;
  per_step = phases(a.s);
  rounds = ahead ? 1 : 1 + static_cast<int>(a.s.T) * per_step;  // packing, then the steps
  if (!a.blocks && !ahead) {  // packed in round 0, each piece its own blocks
    a.blocks = packed.take(static_cast<size_t>((a.s.H + 15) / 16 * 16 * a.s.gates() * a.s.H), "the packed recurrent weight");
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
        if (tm.packed.get()) pack_blocks(a.rt, a.s.H, a.s.gates(), u0 / 16, (u1 + 15) / 16, tm.packed.get());
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

void run_team(const Args& a, int threads, int64_t pieces) {
  auto team = std::make_shared<Team>(a, threads, pieces);
  crew_start(team, threads);
  team_work(*team, 0);
  crew_finish(team);
  wait_partners_out(*team, threads);
  write_last(team->a, team->st);
}

void warm_team(int threads) { crew_start(nullptr, threads); }

void wait_partners_out(const Team& tm, int threads) {
  for (int i = 1; i < threads; ++i)
    for (int spin = 0; tm.inside[i].v.load(std::memory_order_acquire); ++spin)
      if (spin > 1000) std::this_thread::yield();
      else _mm_pause();
}

}  // namespace lathe::rnn_cpu
