// rnn_crew.h — the persistent partner threads of the CPU recurrence kernel (library_rnn.cpp).
#pragma once
#include <memory>

namespace lathe {

// A call's work for the partners: work(me) runs on partner `me` (1 .. threads - 1).
struct CrewJob {
  virtual ~CrewJob() = default;
  virtual void work(int me) = 0;
  int threads = 1;
};

// Offers `job` to partners 1 .. threads - 1, starting those not yet running (a partner that
// cannot be started leaves its share to the others); nullptr: wakes them without work, so
// that they poll for the next call.
void crew_start(const std::shared_ptr<CrewJob>& job, int threads);
// The call of `job` is over: a partner that has not picked it up yet will not.
void crew_finish(const std::shared_ptr<CrewJob>& job);

// Microseconds of a steady clock.
double now_us();

}  // namespace lathe
