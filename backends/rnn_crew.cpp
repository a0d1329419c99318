// rnn_crew.cpp — see rnn_crew.h.
#include "backends/rnn_crew.h"

#include <immintrin.h>  // _mm_pause

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>

namespace lathe {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// The Team's partner threads, started once and kept: a thread started for each call first
// has to be scheduled (on the shared machine it joined 0.1–2 ms into a ~1 ms call, the
// caller meanwhile working alone), and its core's cache holds nothing of the call. A
// worker polls for the next call's Team for kSpinUs after each (a model's recurrent layers
// run back to back, and a run's kernels follow each other within microseconds), then
// sleeps on a condition variable until the next.
class Crew {
 public:
  static Crew& get() {
    static Crew* c = new Crew;  // never destroyed: its workers outlive static teardown
    return *c;
  }
  // Offers `team` to workers 1 .. threads - 1, starting those not yet running (a worker
  // that cannot be started leaves its share to the others).
  void start(const std::shared_ptr<CrewJob>& team, int threads) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = team;
      const uint64_t before = gen_.fetch_add(1, std::memory_order_acq_rel);
      for (; started_ < threads - 1; ++started_) {
        try {
          std::thread([this, me = started_ + 1, before] { loop(me, before); }).detach();
        } catch (const std::system_error&) {
          break;
        }
      }
      wake = sleeping_ > 0;
    }
    if (wake) cv_.notify_all();
  }
  // The call of `team` is over: a worker that has not picked it up yet will not.
  void finish(const std::shared_ptr<CrewJob>& team) {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_ == team) job_.reset();
  }

 private:
  static constexpr double kSpinUs = 300;
  void loop(int me, uint64_t seen) {
    for (;;) {
      for (const double t0 = now_us(); gen_.load(std::memory_order_acquire) == seen && now_us() - t0 < kSpinUs;)
        for (int i = 0; i < 16; ++i) _mm_pause();
      std::shared_ptr<CrewJob> team;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (gen_.load(std::memory_order_acquire) == seen) {
          ++sleeping_;
          cv_.wait(lock, [&] { return gen_.load(std::memory_order_acquire) != seen; });
          --sleeping_;
        }
        seen = gen_.load(std::memory_order_acquire);
        team = job_;
      }
      if (team && me < team->threads) team->work(me);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<CrewJob> job_;  // the present call's (mu_)
  std::atomic<uint64_t> gen_{0};
  int started_ = 0, sleeping_ = 0;  // workers (mu_)
};

}  // namespace

void crew_start(const std::shared_ptr<CrewJob>& job, int threads) { Crew::get().start(job, threads); }
void crew_finish(const std::shared_ptr<CrewJob>& job) { Crew::get().finish(job); }

}  // namespace lathe
