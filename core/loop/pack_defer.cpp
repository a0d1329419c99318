// pack_defer.cpp — the filler thread for deferred weight packing. See pack_defer.h.
#include "core/loop/pack_defer.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace lathe::loop {

namespace {
thread_local PackFiller* current = nullptr;
}

struct PackFiller::State {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  int pushed = 0, done = 0;
  double busy_ms = 0;
  std::exception_ptr failed;  // the first fill that threw: wait() throws it
  bool closing = false;
  std::thread thread;
};

PackFiller::PackFiller() : s_(std::make_shared<State>()) {
  State* s = s_.get();
  s->thread = std::thread([s] {
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      s->cv.wait(lock, [&] { return s->closing || !s->queue.empty(); });
      if (s->queue.empty()) return;  // closing, and nothing left
      std::function<void()> fill = std::move(s->queue.front());
      s->queue.pop_front();
      lock.unlock();
      auto t0 = std::chrono::steady_clock::now();
      std::exception_ptr failed;
      try {
        fill();
      } catch (...) {  // (not expected: a copy allocates nothing)
        failed = std::current_exception();
      }
      fill = nullptr;  // what it captured (a model's mapping) goes now
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      lock.lock();
      s->busy_ms += ms;
      if (failed && !s->failed) s->failed = failed;
      ++s->done;
      s->cv.notify_all();
    }
  });
}

PackFiller::~PackFiller() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->closing = true;
  }
  s_->cv.notify_all();
  s_->thread.join();  // after the queue is empty: every copy handed out is filled
}

void PackFiller::push(std::function<void()> fill) {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->queue.push_back(std::move(fill));
    ++s_->pushed;
  }
  s_->cv.notify_all();
}

void PackFiller::wait() {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->cv.wait(lock, [&] { return s_->done >= s_->pushed; });
  if (s_->failed) std::rethrow_exception(s_->failed);  // a weight left unfilled: no run
}

int PackFiller::pushed() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->pushed;
}

double PackFiller::busy_ms() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->busy_ms;
}

DeferPacks::DeferPacks(PackFiller* filler) : saved_(current) { current = filler; }
DeferPacks::~DeferPacks() { current = saved_; }

PackFiller* current_pack_filler() { return current; }

}  // namespace lathe::loop
