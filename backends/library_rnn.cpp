// library_rnn.cpp — the CPU kernel of the fused recurrence, Extern "rnn" (core/ir/rnn_op.h),
// that the c and llvm backends call: the T steps of one direction run in this one call. Here:
// the call's setup (its arguments, the projections' scratch, the packed copies of constant
// weights) and the choice of how the steps run:
//   * one thread (library_rnn_step.cpp: the step itself, its gate arithmetic and how it reads
//     RT);
//   * a large batch: its rows are independent through the whole recurrence, so it is split
//     between threads once, for all T steps (no synchronization per step), each running its
//     rows as one thread would;
//   * a small batch with a big RT: the hidden units split between threads while the machine
//     has idle cores, in pieces that any of the threads may take, so that one descheduled
//     thread does not stall the others (the Team, library_rnn_team.cpp) — when that has been
//     faster than one thread for the layer lately: the kernel times both ways and keeps the
//     faster (rnn_chooser.h), unless LATHE_RNN_THREADS decides;
//   * with the projections inside, a third way is timed too: the steps on one thread while
//     the partners project chunks of steps ahead of it (library_rnn_ahead.cpp).
// The activations Sigmoid, Tanh and ScaledTanh are vectorized (exp by Cody–Waite range
// reduction and a degree-5 polynomial, tanh as a rational function below ln 3 / 2 and
// 1 - 2/(e^2x + 1) above, both within a few f32 ulps); the others run the scalar formula.
// AVX2 + FMA when the CPU has them, else plain loops with the same structure; the arithmetic
// (row reduction, register tiles, activations) is in library_rnn_math.cpp.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/library.h"
#include "backends/library_rnn_math.h"
#include "backends/library_rnn_step.h"
#include "backends/library_rnn_team.h"
#include "backends/rnn_chooser.h"
#include "backends/rnn_crew.h"
#include "backends/rnn_pack_cache.h"
#include "core/ir/diag.h"
#include "core/ir/rnn_op.h"
#include "core/runtime/kernel_cache.h"

namespace lathe {
namespace {

using namespace rnn_cpu;
using rnn_math::pack_blocks;

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

// One chooser per layer shape (its Extern's ints) and thread count, kept for the process, and
// its record kept with the kernel cache for the next process (rnn_chooser.h; LATHE_RNN_RECORD=0
// neither reads nor writes records): <cache>/rnn/<key>.txt, the key a hash of the layer's ints,
// the modes, the thread counts, the rnn arithmetic (AVX-512 or AVX2) and the host (cpu_model).
// A process that runs a model a few times (`lathe run --iters 10`) would otherwise spend its
// first calls of each layer in the warm-up, one of each way. Read when the chooser is made
// (a record that cannot be read or is refused: the chooser chooses afresh), written when the
// process exits (atexit; temp file + rename, so a concurrent reader sees a whole record or none).
struct ChooserEntry {
  RnnModeChooser ch;
  std::string record;     // its path ("": no record)
  bool restored = false;  // started from the record
  int64_t calls = 0;      // calls made in this process
};
std::mutex& chooser_mu() {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::map<std::vector<int64_t>, ChooserEntry>& choosers() {
  static auto* m = new std::map<std::vector<int64_t>, ChooserEntry>;
  return *m;
}

bool records_on() {
  const char* e = std::getenv("LATHE_RNN_RECORD");
  return !(e && e[0] == '0');
}
bool rnn_trace() {
  static const bool trace = std::getenv("LATHE_RNN_TRACE") && std::getenv("LATHE_RNN_TRACE")[0] == '1';
  return trace;
}

std::string record_path(const std::vector<int64_t>& ints, int modes, int threads) {
  std::string k = "rnn-chooser 1|";
  for (int64_t v : ints) k += std::to_string(v) + ",";
  k += "|modes " + std::to_string(modes) + "|threads " + std::to_string(threads) + " of " +
       std::to_string(hardware_threads()) + (rnn_math::avx512() ? "|avx512" : "|avx2") + "|" + cpu_model();
  return cache_path("rnn", cache_key({k}) + ".txt");
}

// the records of this process's choosers that have run since they were made (chooser_mu held)
void save_records_locked() {
  for (auto& [ints, e] : choosers()) {
    if (e.record.empty() || e.calls == 0 || !e.ch.decided()) continue;
    const bool ok = atomic_write(e.record, e.ch.save());
    if (rnn_trace()) std::fprintf(stderr, "rnn: chooser record %s %s\n", ok ? "written to" : "not written:", e.record.c_str());
  }
}

void save_records_at_exit() {
  std::unique_lock<std::mutex> lock(chooser_mu(), std::try_to_lock);  // (a call still running: skip)
  if (lock.owns_lock()) save_records_locked();
}

// The chooser of a layer (chooser_mu held): made on its first call, from its record if any
ChooserEntry& chooser_for(const RnnSpec& s, int modes, int threads) {
  std::vector<int64_t> key = rnn_ints(s);
  key.push_back(threads);
  auto [it, made] = choosers().try_emplace(key);
  ChooserEntry& e = it->second;
  if (!made) return e;
  e.ch = RnnModeChooser(modes);
  if (!records_on()) return e;
  static const bool registered = [] {
    cache_dir();  // (its statics before the handler: they outlive it)
    cpu_model();
    return std::atexit(save_records_at_exit) == 0;
  }();
  if (!registered) return e;
  e.record = record_path(rnn_ints(s), modes, threads);
  std::ifstream f(e.record, std::ios::binary);
  if (!f) return e;
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.size() < 4096) e.restored = e.ch.restore(text);
  if (rnn_trace())
    std::fprintf(stderr, "rnn: chooser record %s %s\n", e.restored ? "restored from" : "refused (starting afresh):",
                 e.record.c_str());
  return e;
}

}  // namespace

void save_rnn_chooser_records() {
  std::lock_guard<std::mutex> lock(chooser_mu());
  save_records_locked();
}

std::vector<RnnChooserState> rnn_choosers() {
  std::lock_guard<std::mutex> lock(chooser_mu());
  std::vector<RnnChooserState> v;
  for (auto& [ints, e] : choosers()) {
    RnnChooserState st{e.record, e.restored, e.calls, {}};
    for (int m = 0; m < e.ch.modes(); ++m) st.mode_calls.push_back(e.ch.calls(m));
    v.push_back(st);
  }
  return v;
}

void forget_rnn_choosers() {
  std::lock_guard<std::mutex> lock(chooser_mu());
  choosers().clear();
}

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
  PoolBuffer xp;
  if (sp->has_proj) {
    a.pj = {a.xp, static_cast<const float*>(in(sp->in_wt())), static_cast<const float*>(in(sp->in_xb())), sp->I, sp->XW,
            sp->col0};
    a.pj.strips = cached_strips(n->inputs[static_cast<size_t>(sp->in_wt())], a.pj, GH);
    a.xp = a.xp_w = xp.take(static_cast<size_t>(T * B * GH), "the input projections");
    a.s.XW = GH, a.s.col0 = 0;
  }
  // RT by strips (pack_strips) when whole steps run on 2 rows or more (one thread, or blocks
  // of rows), in a buffer of the pool; the Team packs RT its own way
  PoolBuffer strips;
  auto pack_rt = [&] {
    if (!use_strips(*sp, B)) return;
    strips.take(static_cast<size_t>(sp->gates() * strips_per_gate(*sp) * 16 * H), "the packed recurrent weight");
    pack_strips(a.rt, *sp, strips.get());
    a.strips = strips.get();
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
      ChooserEntry& e = chooser_for(*sp, a.pj.x ? 3 : 2, threads);
      ++e.calls;
      ch = &e.ch;
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
      run_team(a, threads, std::min<int64_t>(blocks, kPiecesPerThread * threads));
    }
    int next = 0;
    {
      std::lock_guard<std::mutex> lock(chooser_mu());
      ch->record(mode, now_us() - t0);
      next = ch->peek();
      if (rnn_trace())  // each call's mode and wall time, per layer shape: the chooser's warm-up and picks
        std::fprintf(stderr, "rnn T=%lld B=%lld I=%lld H=%lld: mode %d %.0f us\n", static_cast<long long>(T),
                     static_cast<long long>(B), static_cast<long long>(sp->I), static_cast<long long>(H), mode, now_us() - t0);
    }
    // After a call on one thread the partners have stopped polling: a Team call next (the
    // chooser's) would pay their wake-up, which a Team chosen for every call does not, and
    // the chooser kept one thread under SCHED_FIFO at 3.3-3.9 ms against the Team's 2.1-2.3.
    // So they are woken when the next call is to use them. (Woken after every call on one
    // thread, under load a partner took the caller's core as it woke and polled there: the
    // wake-up took 310 µs median, 5.3 ms at the 90th percentile, the lstm model 4-5 ms a run
    // against 1.2 on one thread.)
    if (mode == 0 && next != 0) warm_team(threads);
    return;
  }
  if (threads <= 1) {
    project_all();
    State st(a, 0, B);
    return run_alone(a, st);
  }
  run_team(a, threads, std::min<int64_t>(blocks, kPiecesPerThread * threads));
}

}  // namespace lathe
