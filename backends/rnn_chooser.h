// rnn_chooser.h — how the CPU recurrence kernel (library_rnn.cpp) decides between running a
// small-batch layer on one thread, splitting its hidden units between threads (the Team), and
// one thread for the steps while partners project the steps ahead: by timing them, on this
// machine, under its present load.
//
// Which one wins depends on things the kernel cannot see: whether the other core is really
// free (the 1-minute load average lags, and a thread pool of the same process may still be
// polling on it), how much of the recurrent weight each core's cache holds, what a hand-off
// between cores costs. Measured on the shared 2-core machine (lstm model, H 256, under a raised
// scheduling priority): one thread 2.9–3.2 ms a run, the Team 3.5–4.0 ms, though the Team's
// best layer (0.86 ms) beat one thread's (0.96 ms). So the kernel runs each way a few times,
// keeps the last kKeep wall times of each, and uses the one whose median is lowest, trying
// another once every kExplore calls so that a change in load is noticed.
//
// A mode whose last time beat the chosen mode's median is tried again kProbe calls later
// (it may be the faster one again: a burst of load left its median high). The costs
// are lopsided: on the lstm model (H 256, 2 threads, load 5-8) the Team ran a layer in
// 360-400 µs while it had the other core, 600-680 µs while it did not, one thread 560-620;
// after a burst of load had sent the chooser away from the Team, a retry every 32nd call (3
// modes) needed three good ones among the last five, ~100 calls on one thread, and a whole
// run's median went 0.63 -> 1.06 ms (min 0.51). A probe that comes out slow ends the
// probes (until a retry comes out fast): probing while any kept time was fast, a partner
// that had the other core now and then kept the probes going at one call in four.
// LATHE_RNN_PROBE=0 turns the probes off.
//
// The warm-up is one call of each mode (kWarm), not three: a process that runs a model ten
// times (`lathe run --iters 10`, the model bench's timed runs after a first) spent its first
// nine calls of each layer in the warm-up, six of them in modes not chosen, and its median
// was the warm-up's: the lstm model (2 layers x 3 modes), both cores its own (chrt -f 10),
// 4 alternated rounds: --iters 10 median 1.02-1.11 ms -> 0.62-0.64 (150 runs: 0.58 either
// way); `lathe bench --models` 0.98-1.02 -> 0.618-0.619 ms, ORT 0.79-0.81. The process's
// first call of a layer is not timed (it runs one thread): it pays what later calls do not
// (the first touch of its buffers, weights not yet in cache: 0.7-8.8 ms against 0.54-0.56
// for the calls after it, lstm's first layer). After one timed call of each the chooser
// takes the lowest; a mode with fewer than kSettle times is retried at the probes' calls
// whatever its time (one time under load may have sent the chooser away from the fastest;
// LATHE_RNN_PROBE=0 turns these off too), and past that the probes and retries correct the
// choice as before. Before the first call of the Team the kernel wakes its partners
// (library_rnn.cpp), so the Team's first time does not include their start.
// LATHE_RNN_WARM=N: N calls of each mode before choosing (3: the earlier warm-up, for A/B).
//
// What the chooser learnt is kept between processes (save / restore, a record beside the
// kernel cache: library_rnn.cpp): a process whose chooser is restored starts with the kept
// times of each mode, so its first calls run the mode chosen last time, not the warm-up's
// one call of each (and the settling retries); the probes and the exploring calls go on as
// before, so a change of load since is noticed as within a process. A record that does not
// parse, names another number of modes or holds a time that is not a positive finite number
// is refused whole (restore returns false and the chooser starts fresh, choosing).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

namespace lathe {

class RnnModeChooser {
 public:
  static constexpr int kWarm = 1;      // calls of each mode before choosing (LATHE_RNN_WARM)
  static constexpr int kKeep = 5;      // wall times kept per mode
  static constexpr int kExplore = 16;  // every kExplore-th call runs a mode not chosen
  static constexpr int kProbe = 4;     // every kProbe-th call runs a mode that may be faster
  static constexpr int kSettle = 3;    // ... or one with fewer times than this
  static constexpr int kMaxModes = 3;

  // modes: 0 one thread, 1 the Team, 2 (when the kernel offers it) one thread for the steps
  // with the partners projecting ahead
  explicit RnnModeChooser(int modes = 2) : RnnModeChooser(modes, probe_default(), warm_default()) {}
  RnnModeChooser(int modes, bool probe, int warm = kWarm)
      : modes_(std::clamp(modes, 1, kMaxModes)), probe_(probe), warm_(std::clamp(warm, 1, 64)) {}
  static bool probe_default() {
    const char* e = std::getenv("LATHE_RNN_PROBE");
    return !(e && e[0] == '0');
  }
  static int warm_default() {
    const char* e = std::getenv("LATHE_RNN_WARM");
    return e && std::atoi(e) > 0 ? std::atoi(e) : kWarm;
  }
  int warm() const { return warm_; }

  // The mode for the next call.
  int pick() { return choose(++calls_); }
  // The mode pick() would return now, without counting a call.
  int peek() const { return choose(calls_ + 1); }
  // The wall time of a call run in `mode` (the first call's is not kept: see above).
  void record(int mode, double us) {
    if (!cold_done_) {
      cold_done_ = true;
      return;
    }
    times_[mode][static_cast<size_t>(n_[mode] % kKeep)] = us;
    ++n_[mode];
  }
  // The median of the kept times of `mode` (0 before any).
  double median(int mode) const {
    const int n = static_cast<int>(std::min<int64_t>(n_[mode], kKeep));
    if (n == 0) return 0;
    std::array<double, kKeep> v = times_[mode];
    std::nth_element(v.begin(), v.begin() + n / 2, v.begin() + n);
    return v[static_cast<size_t>(n / 2)];
  }
  // The last time of `mode` (0 before any).
  double last(int mode) const { return n_[mode] == 0 ? 0 : times_[mode][static_cast<size_t>((n_[mode] - 1) % kKeep)]; }
  int64_t calls(int mode) const { return n_[mode]; }
  int modes() const { return modes_; }
  // Every mode has a kept time (what a record needs: a restored chooser skips its warm-up).
  bool decided() const {
    for (int m = 0; m < modes_; ++m)
      if (n_[m] == 0) return false;
    return true;
  }

  // The kept times as text: "lathe-rnn-chooser 1 <modes>", then a line per mode: the count
  // of its kept times and the times in µs, oldest first.
  std::string save() const {
    std::ostringstream o;
    o.precision(17);
    o << kMagic << ' ' << kVersion << ' ' << modes_ << '\n';
    for (int m = 0; m < modes_; ++m) {
      const int64_t k = std::min<int64_t>(n_[m], kKeep);
      o << k;
      for (int64_t i = n_[m] - k; i < n_[m]; ++i) o << ' ' << times_[m][static_cast<size_t>(i % kKeep)];
      o << '\n';
    }
    return o.str();
  }
  // The kept times of a record save() wrote, replacing this chooser's (its warm-up skipped
  // when every mode has one); false, and the chooser unchanged, for a record that is not
  // such (see above).
  bool restore(const std::string& text) {
    std::istringstream in(text);
    std::string magic;
    int version = 0, modes = 0;
    if (!(in >> magic >> version >> modes) || magic != kMagic || version != kVersion || modes != modes_) return false;
    int64_t n[kMaxModes] = {0, 0, 0};
    std::array<double, kKeep> t[kMaxModes] = {};
    for (int m = 0; m < modes_; ++m) {
      if (!(in >> n[m]) || n[m] < 1 || n[m] > kKeep) return false;
      for (int64_t i = 0; i < n[m]; ++i) {
        double v = 0;
        if (!(in >> v) || !std::isfinite(v) || v <= 0 || v > 1e9) return false;
        t[m][static_cast<size_t>(i)] = v;
      }
    }
    std::string rest;
    if (in >> rest) return false;  // more than a record
    for (int m = 0; m < modes_; ++m) n_[m] = n[m], times_[m] = t[m];
    return true;
  }

 private:
  static constexpr const char* kMagic = "lathe-rnn-chooser";
  static constexpr int kVersion = 1;

  // the mode of call number `call` (counted from 1)
  int choose(int64_t call) const {
    int least = 0;  // warm-up: the mode with the fewest calls (ties: the lowest)
    for (int m = 1; m < modes_; ++m)
      if (n_[m] < n_[least]) least = m;
    if (n_[least] < warm_) return least;
    int best = 0;
    for (int m = 1; m < modes_; ++m)
      if (median(m) < median(best)) best = m;
    if (modes_ > 1 && call % kExplore == 0) {  // the others in turn
      const int k = static_cast<int>(call / kExplore % (modes_ - 1));
      return (best + 1 + k) % modes_;
    }
    if (probe_ && modes_ > 1 && call % kProbe == 0)  // those that may be faster, in turn
      for (int k = 0; k < modes_ - 1; ++k) {
        const int m = (best + 1 + static_cast<int>((call / kProbe + k) % (modes_ - 1))) % modes_;
        if (last(m) < median(best) || n_[m] < kSettle) return m;
      }
    return best;
  }
  int modes_ = 2;
  bool probe_ = true;
  int warm_ = kWarm;
  bool cold_done_ = false;  // the first call has been recorded (and dropped)
  int64_t calls_ = 0;
  int64_t n_[kMaxModes] = {0, 0, 0};
  std::array<double, kKeep> times_[kMaxModes] = {};
};

}  // namespace lathe
