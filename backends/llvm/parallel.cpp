// parallel.cpp — a small persistent thread pool with a generation counter. See parallel.h.
#include "backends/llvm/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace lathe::llvmjit {

namespace {

class Pool {
 public:
  Pool() {
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    nthreads_ = static_cast<int>(hw);
    ranges_ = std::vector<Range>(static_cast<size_t>(nthreads_));
    for (int t = 1; t < nthreads_; ++t) workers_.emplace_back([this, t] { worker(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return nthreads_; }

  void run(ChunkFn fn, void* const* b, const int64_t* d, const int64_t* c, int64_t n) {
    if (n <= 0) return;
    int parts = static_cast<int>(std::min<int64_t>(nthreads_, n));
    if (parts == 1) { fn(b, d, c, 0, n); return; }
    std::lock_guard<std::mutex> serial(run_mu_);  // one parallel loop at a time
    {
      // A worker still in the previous loop (it woke late and found nothing left to claim, or
      // it finished the last chunk and takes mu_ to notify done_cv_) leaves it before the
      // shares are handed out again. Wait with mu_ released, so that worker can take it (waiting
      // while holding mu_ deadlocked: the worker's notify blocked on mu_, inside_ never fell);
      // once inside_ is 0 with mu_ held, none can enter (entering takes mu_).
      std::unique_lock<std::mutex> lock(mu_);
      while (inside_.load(std::memory_order_acquire) != 0) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      }
      fn_ = fn; b_ = b; d_ = d; c_ = c; n_ = n; parts_ = parts;
      grain_ = std::max<int64_t>(1, n / (int64_t(parts) * 8));
      for (int p = 0; p < parts; ++p) {
        ranges_[p].next.store(n * p / parts, std::memory_order_relaxed);
        ranges_[p].end = n * (p + 1) / parts;
      }
      done_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    chunk(0);
    // Wait for the iterations, not for the workers: one that has not woken yet (the machine
    // is shared) finds everything claimed and goes back to sleep. Short spin, then block:
    // kernels are often sub-millisecond.
    for (int spin = 0; done_.load(std::memory_order_acquire) != n; ++spin) {
      if (spin > 4000) {
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return done_.load() == n; });
        break;
      }
    }
  }

 private:
  // Thread t first works through its own share of [0, n) (the same iterations on every call
  // with the same n, so a kernel run many times over one weight, an RNN's steps, finds its
  // part in this core's cache), then takes the chunks left in the other shares.
  void chunk(int t) {
    for (int k = 0; k < parts_; ++k) {
      Range& r = ranges_[(t + k) % parts_];
      for (;;) {
        int64_t begin = r.next.fetch_add(grain_, std::memory_order_relaxed);
        if (begin >= r.end) break;
        int64_t end = std::min(r.end, begin + grain_);
        fn_(b_, d_, c_, begin, end);
        if (done_.fetch_add(end - begin, std::memory_order_acq_rel) + (end - begin) == n_ && t != 0) {
          std::lock_guard<std::mutex> lock(mu_);
          done_cv_.notify_all();
        }
      }
    }
  }
  void worker(int t) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_.load() != seen; });
        if (stop_) return;
        // counted inside before the lock is released: run() cannot reset the shares under us
        inside_.fetch_add(1, std::memory_order_acq_rel);
        seen = generation_.load();
      }
      if (t < parts_) chunk(t);
      inside_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  struct Range {
    std::atomic<int64_t> next{0};  // the first iteration of this share not yet claimed
    int64_t end = 0;
  };
  int nthreads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  std::atomic<int> inside_{0};      // workers between waking for a loop and leaving it
  std::atomic<int64_t> done_{0};    // iterations finished in the current loop
  std::vector<Range> ranges_;
  int64_t grain_ = 1;
  ChunkFn fn_ = nullptr;
  void* const* b_ = nullptr;
  const int64_t* d_ = nullptr;
  const int64_t* c_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 1;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

extern "C" void lathe_llvm_parallel_for(ChunkFn fn, void* const* buffers, const int64_t* dims, const int64_t* captures,
                                        int64_t n) {
  pool().run(fn, buffers, dims, captures, n);
}

int pool_threads() { return pool().threads(); }

}  // namespace lathe::llvmjit
