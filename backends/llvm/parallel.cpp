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
    for (int t = 1; t < nthreads_; ++t) workers_.emplace_back([this, t] { worker(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      ++generation_;
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
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = fn; b_ = b; d_ = d; c_ = c; n_ = n; parts_ = parts;
      grain_ = std::max<int64_t>(1, n / (int64_t(parts) * 8));
      next_.store(0, std::memory_order_relaxed);
      pending_.store(parts - 1);
      ++generation_;
    }
    cv_.notify_all();
    chunk(0);
    // short spin, then block: kernels are often sub-millisecond
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
      if (spin > 4000) {
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return pending_.load() == 0; });
        break;
      }
    }
  }

 private:
  // claims chunks of grain_ iterations until none is left
  void chunk(int) {
    for (;;) {
      int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
      if (begin >= n_) return;
      fn_(b_, d_, c_, begin, std::min(n_, begin + grain_));
    }
  }
  void worker(int t) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
      }
      if (t < parts_) {
        chunk(t);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          std::lock_guard<std::mutex> lock(mu_);
          done_cv_.notify_all();
        }
      }
    }
  }

  int nthreads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::atomic<int> pending_{0};
  std::atomic<int64_t> next_{0};  // the first iteration not yet claimed
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
