// library_rnn_team.h — the threads of the CPU recurrence kernel (library_rnn.cpp) that share
// one call: the Team, which splits the hidden units of a small batch between threads
// (library_rnn_team.cpp), and the steps on one thread with the partners projecting chunks of
// steps ahead of it (library_rnn_ahead.cpp), which claims its chunks as the Team's pieces.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backends/library_rnn_step.h"
#include "backends/rnn_crew.h"
#include "backends/rnn_pack_cache.h"

namespace lathe::rnn_cpu {

constexpr int kMaxThreads = 4;
// A round's pieces per thread: each costs its claim and commit (compare-and-swaps, a fence, the
// copies into the shared state) and a call of the step's arithmetic on a few units. The lstm
// model (H 256, 16 blocks, 2 threads), SCHED_FIFO, 3 rounds: 4 a thread 0.84-0.86 ms a run,
// 2 0.74-0.77, 1 0.72 (but 1 a thread, under load 14, took 3.4-4.6 ms median for the second
// layer against 0.69-0.74 at 4 or 2)
constexpr int kPiecesPerThread = 2;

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
  PoolBuffer packed;  // RT by blocks (pack_blocks) when a.blocks was not given (taken: 64-byte aligned)
  int stall_us = 0;  // LATHE_RNN_STALL_US=N (tests): a claimed piece sleeps N µs now and then
  // ahead > 0: the caller runs the steps alone while the partners project chunks of `ahead`
  // steps each (run_ahead); the pieces are the chunks
  int64_t ahead = 0, npieces = 0;
  std::atomic<int> arrived{0};  // a partner has joined (ahead)
  // with ahead == 0 and no a.blocks: RT packed by blocks in round 0 (into `packed`)
  Team(const Args& args, int n, int64_t pieces, int64_t ahead_steps = 0);
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

// A piece's (chunk's) state word: see Team::piece.
inline int64_t enc(int64_t round, int th, int status) { return (round + 1) << 8 | th << 2 | status; }

// Thread `me` works through the Team's rounds; returns when the last has committed.
void team_work(Team& tm, int me);
// A partner of run_ahead: claims the open chunks in the order of the steps, computes and commits them.
void ahead_work(Team& tm, int me);

// A small batch's hidden units split between `threads` threads, `pieces` pieces a round.
void run_team(const Args& a, int threads, int64_t pieces);
// The steps on this thread while partner threads project the steps ahead (a.pj.x given).
void run_ahead(const Args& a, int threads);
// Wakes (or starts) the Team's partner threads without work, so that they poll for the next
// call (see Crew).
void warm_team(int threads);
// Waits until no partner 1 .. threads - 1 is inside a piece (reading the call's buffers).
void wait_partners_out(const Team& tm, int threads);

}  // namespace lathe::rnn_cpu
