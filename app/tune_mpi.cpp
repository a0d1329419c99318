// tune_mpi.cpp — the tuning search over MPI ranks (see tune_mpi.h).
//
// Messages (MPI_COMM_WORLD):
//   HELLO  rank → 0   "ok FINGERPRINT HOST" once the rank can measure, or "error HOST WHY"
//   JOB    0 → rank   "ID KERNEL N THREADS LANES VREGS\n" then per candidate "L\n" + L lines
//   RESULT rank → 0   doubles: ID, then (ms, baseline ms) per candidate
//   STOP   0 → rank   empty: leave
// Both sides poll (MPI_Iprobe and a short sleep), so an idle rank does not spin a core that
// another rank is timing kernels on.
#include "app/tune_mpi.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/ir/diag.h"
#include "core/tune/records.h"
#include "core/tune/space.h"

#ifdef LATHE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (no libmpi_cxx)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace lathe::app {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

// The rank the launcher's environment names: Open MPI, PMIx (srun --mpi=pmix), PMI (MPICH, srun).
int launcher_rank() {
  for (const char* n : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (int r = env_int(n); r >= 0) return r;
  return -1;
}

std::string host_name() {
  char b[256] = {0};
  if (gethostname(b, sizeof b - 1) != 0) return "?";
  return b;
}

}  // namespace

std::string program_fingerprint(const Program& p) {
  std::string all;
  for (int i = 0; i < p.num_kernels(); ++i) all += tune::structural_hash(p.kg, i) + ";";
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the hashes
  for (unsigned char c : all) h = (h ^ c) * 1099511628211ull;
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)h);
  return b;
}

#ifndef LATHE_HAVE_MPI

bool mpi_built() { return false; }
MpiWorld mpi_start(int* lr) {
  *lr = launcher_rank();
  return {};
}
void mpi_finish(const MpiWorld&, int) {}
std::unique_ptr<MeasurePool> make_mpi_pool(const MpiWorld&, const Program&, const std::string&,
                                           std::function<std::unique_ptr<tune::Measurer>()>, const PoolOptions&,
                                           std::vector<std::string>*) {
  throw UserError("lathe was built without MPI");
}
int mpi_worker(const MpiWorld&, const Program&, const Bindings&, const std::string&,
               const std::function<std::unique_ptr<tune::Measurer>()>&, double) {
  throw UserError("lathe was built without MPI");
}

#else

namespace {

using Clock = std::chrono::steady_clock;
enum Tag { kHello = 101, kJob = 102, kResult = 103, kStop = 104 };

double secs_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void nap() { std::this_thread::sleep_for(std::chrono::microseconds(300)); }

void send_text(const std::string& s, int to, int tag) {
  MPI_Send(s.data(), (int)s.size(), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string recv_text(const MPI_Status& st) {
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string s(std::max(n, 0), '\0');
  MPI_Recv(s.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return s;
}

// ------------------------------------------------------------------ rank 0
class MpiPool : public MeasurePool {
 public:
  MpiPool(const MpiWorld& w, const Program& p, std::string kind, std::function<std::unique_ptr<tune::Measurer>()> local,
          const PoolOptions& o, std::vector<std::string>* notes)
      : p_(p), kind_(std::move(kind)), local_(std::move(local)), o_(o), notes_(notes), ranks_(w.size),
        fingerprint_(program_fingerprint(p)), start_(Clock::now()) {}

  ~MpiPool() override {
    for (auto& r : ranks_)
      for (auto& rq : r.sends) {
        MPI_Cancel(&rq.req);
        MPI_Request_free(&rq.req);
      }
  }

  std::string kind() const override { return kind_; }

  // the ranks rebuild candidates from their schedule lines: the search calls measure_each
  std::vector<double> measure(int, const std::vector<const loop::LoopFunc*>&, double*) override {
    throw UserError("internal error: the MPI measure pool takes candidates with their schedule lines (measure_each)");
  }

  std::vector<tune::Timing> measure_each(int kernel, const std::vector<tune::Candidate>& cands) override {
    std::vector<tune::Timing> out(cands.size());
    if (cands.empty()) return out;
    if (++batches_ == 2 && test_exit_) {  // LATHE_TUNE_TEST_RANK_FAIL=0:exit
      std::fprintf(stderr, "lathe tune (rank 0): LATHE_TUNE_TEST_RANK_FAIL: exit\n");
      std::fflush(stderr);
      std::_Exit(3);
    }
    // the jobs: an even share per rank that can still answer (model estimates: at most 8 a job)
    int live = 0;
    for (int r = 1; r < (int)ranks_.size(); ++r) live += ranks_[r].state == St::Pending || ranks_[r].state == St::Ready;
    size_t per = (cands.size() + std::max(live, 1) - 1) / std::max(live, 1);
    if (kind_ == "model") per = std::min<size_t>(per, 8);
    jobs_.clear();
    for (size_t i = 0; i < cands.size(); i += per) {
      Job j;
      j.id = next_id_++;
      for (size_t c = i; c < std::min(cands.size(), i + per); ++c) j.idx.push_back(c);
      jobs_.push_back(std::move(j));
    }
    auto all_done = [&] {
      for (auto& j : jobs_)
        if (!j.done) return false;
      return true;
    };
    while (!all_done()) {
      bool busy = poll(out);
      busy |= dispatch(kernel, cands);
      busy |= check_timeouts();
      if (!anyone_can_answer()) {
        for (auto& j : jobs_)
          if (!j.done && j.rank < 0) measure_here(kernel, cands, j, out);
        busy = true;
      }
      if (!busy) nap();
    }
    return out;
  }

  std::string summary() const override {
    std::string s;
    for (int r = 1; r < (int)ranks_.size(); ++r) {
      const Rank& k = ranks_[r];
      s += "  rank " + std::to_string(r) + (k.host.empty() ? "" : " (" + k.host + ")") + ": " +
           std::to_string(k.measured) + " candidate" + (k.measured == 1 ? "" : "s");
      if (k.state == St::Lost) s += ", lost";
      if (k.state == St::Failed) s += ", could not measure";
      if (k.state == St::Pending) s += ", never ready";
      s += "\n";
    }
    if (here_ > 0) s += "  rank 0: " + std::to_string(here_) + " candidate" + (here_ == 1 ? "" : "s") + " (no rank left to measure them)\n";
    return s;
  }

  void stop_workers() override {
    for (int r = 1; r < (int)ranks_.size(); ++r) {
      if (ranks_[r].state == St::Lost) continue;  // it may never receive; a live one polls
      MPI_Request rq;
      MPI_Isend(nullptr, 0, MPI_CHAR, r, kStop, MPI_COMM_WORLD, &rq);
      ranks_[r].sends.push_back({std::make_shared<std::string>(), rq});
    }
    // let the stops go out (bounded: a rank that has died never takes its message)
    auto t0 = Clock::now();
    for (bool pending = true; pending && secs_since(t0) < 2;) {
      pending = false;
      for (auto& r : ranks_) pending |= !reap_sends(r);
      if (pending) nap();
    }
  }

 private:
  enum class St { Pending, Ready, Busy, Lost, Failed };
  struct Send {
    std::shared_ptr<std::string> buf;
    MPI_Request req;
  };
  struct Rank {
    St state = St::Pending;
    std::string host;
    int job = -1;  // the job it works on
    int measured = 0;
    std::vector<Send> sends;
  };
  struct Job {
    int id = 0;
    std::vector<size_t> idx;  // candidates
    int rank = -1;            // who works on it (-1: nobody yet)
    Clock::time_point deadline;
    bool done = false;
  };

  void note(const std::string& s) {
    if (notes_) notes_->push_back(s);
  }
  std::string who(int r) const {
    return "rank " + std::to_string(r) + (ranks_[r].host.empty() ? "" : " (" + ranks_[r].host + ")");
  }

  // true when every send of r has completed
  bool reap_sends(Rank& r) {
    for (size_t i = 0; i < r.sends.size();) {
      int done = 0;
      MPI_Test(&r.sends[i].req, &done, MPI_STATUS_IGNORE);
      if (done) r.sends.erase(r.sends.begin() + i);
      else ++i;
    }
    return r.sends.empty();
  }

  bool anyone_can_answer() {
    for (int r = 1; r < (int)ranks_.size(); ++r) {
      St s = ranks_[r].state;
      if (s == St::Ready || s == St::Busy) return true;
      // a rank still starting: waited for a while (it loads and compiles the program first)
      if (s == St::Pending && secs_since(start_) < std::max(30.0, 4 * o_.rank_timeout_s)) return true;
    }
    return false;
  }

  // handles what has arrived; true when something did
  bool poll(std::vector<tune::Timing>& out) {
    bool any = false;
    for (auto& r : ranks_) reap_sends(r);
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (!flag) return any;
      any = true;
      int from = st.MPI_SOURCE;
      Rank& rk = ranks_[from];
      if (st.MPI_TAG == kHello) {
        std::istringstream in(recv_text(st));
        std::string what, fp;
        in >> what;
        if (what == "ok") {
          in >> fp >> rk.host;
          if (fp != fingerprint_) {
            rk.state = St::Failed;
            note(who(from) + " built another program from its FILE (kernel hashes differ): it measures nothing");
          } else if (rk.state == St::Pending) {
            rk.state = St::Ready;
          }
        } else {
          in >> rk.host;
          std::string why;
          std::getline(in, why);
          rk.state = St::Failed;
          note(who(from) + " cannot measure:" + why);
        }
        continue;
      }
      if (st.MPI_TAG == kResult) {
        int n = 0;
        MPI_Get_count(&st, MPI_DOUBLE, &n);
        std::vector<double> v(std::max(n, 1));
        MPI_Recv(v.data(), n, MPI_DOUBLE, from, kResult, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int id = (int)v[0];
        if (rk.state == St::Lost) note(who(from) + " answered again after its timeout");
        rk.state = St::Ready;
        rk.job = -1;
        for (auto& j : jobs_) {
          if (j.id != id || j.done) continue;  // a job of an earlier batch, or done elsewhere
          if ((size_t)n != 1 + 2 * j.idx.size()) break;
          for (size_t c = 0; c < j.idx.size(); ++c) out[j.idx[c]] = {v[1 + 2 * c], v[2 + 2 * c]};
          j.done = true;
          rk.measured += (int)j.idx.size();
        }
        continue;
      }
      recv_text(st);  // unexpected: drop it
    }
  }

  // hands waiting jobs to idle ranks; true when one was sent
  bool dispatch(int kernel, const std::vector<tune::Candidate>& cands) {
    bool any = false;
    for (auto& j : jobs_) {
      if (j.done || j.rank >= 0) continue;
      int r = 1;
      while (r < (int)ranks_.size() && ranks_[r].state != St::Ready) ++r;
      if (r >= (int)ranks_.size()) break;
      std::ostringstream msg;
      msg << j.id << " " << kernel << " " << j.idx.size() << " " << o_.machine.threads << " " << o_.machine.lanes << " "
          << o_.machine.vregs << "\n";
      for (size_t c : j.idx) {
        const auto& lines = *cands[c].schedule;
        msg << lines.size() << "\n";
        for (auto& l : lines) msg << l << "\n";
      }
      auto buf = std::make_shared<std::string>(msg.str());
      MPI_Request rq;
      MPI_Isend(buf->data(), (int)buf->size(), MPI_CHAR, r, kJob, MPI_COMM_WORLD, &rq);
      ranks_[r].sends.push_back({buf, rq});
      ranks_[r].state = St::Busy;
      ranks_[r].job = j.id;
      j.rank = r;
      j.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o_.rank_timeout_s * (double)j.idx.size()));
      any = true;
    }
    return any;
  }

  // a job past its deadline: its rank is lost, the job goes back to the queue
  bool check_timeouts() {
    bool any = false;
    auto now = Clock::now();
    for (auto& j : jobs_) {
      if (j.done || j.rank < 0 || now < j.deadline) continue;
      Rank& rk = ranks_[j.rank];
      if (rk.state == St::Busy && rk.job == j.id) {
        rk.state = St::Lost;
        char b[64];
        std::snprintf(b, sizeof b, "%.3g", o_.rank_timeout_s * (double)j.idx.size());
        note(who(j.rank) + " did not answer within " + b + " s: its candidates went elsewhere");
      }
      j.rank = -1;
      any = true;
    }
    return any;
  }

  void measure_here(int kernel, const std::vector<tune::Candidate>& cands, Job& j, std::vector<tune::Timing>& out) {
    if (!mine_) mine_ = local_();
    std::vector<tune::Candidate> part;
    for (size_t c : j.idx) part.push_back(cands[c]);
    std::vector<tune::Timing> t;
    try {
      t = mine_->measure_each(kernel, part);
    } catch (const UserError&) {
    }
    for (size_t c = 0; c < j.idx.size() && c < t.size(); ++c) out[j.idx[c]] = t[c];
    j.done = true;
    here_ += (int)j.idx.size();
  }

  const Program& p_;
  std::string kind_;
  std::function<std::unique_ptr<tune::Measurer>()> local_;
  std::unique_ptr<tune::Measurer> mine_;
  PoolOptions o_;
  std::vector<std::string>* notes_;
  std::vector<Rank> ranks_;
  std::vector<Job> jobs_;
  int next_id_ = 1;
  int here_ = 0;
  int batches_ = 0;
  bool test_exit_ = [] {
    const char* f = std::getenv("LATHE_TUNE_TEST_RANK_FAIL");
    return f && std::string(f) == "0:exit";
  }();
  std::string fingerprint_;
  Clock::time_point start_;
};

// ------------------------------------------------------------------ the other ranks

// Ends the process when a job runs past its limit (a hung compile or kernel): the rank is
// of no more use, and rank 0 has given its candidates to another rank already.
class Watchdog {
 public:
  explicit Watchdog(int rank) : rank_(rank), t_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(m_);
      quit_ = true;
    }
    cv_.notify_all();
    t_.join();
  }
  void arm(double secs) {
    std::lock_guard<std::mutex> lk(m_);
    limit_ = secs;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lk(m_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(m_);
    while (!quit_) {
      if (!armed_) {
        cv_.wait(lk);
        continue;
      }
      if (cv_.wait_until(lk, deadline_) == std::cv_status::timeout && armed_ && Clock::now() >= deadline_) {
        std::fprintf(stderr, "lathe tune (rank %d): a job ran past %.3g s; this rank ends\n", rank_, limit_);
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }
  int rank_;
  std::mutex m_;
  std::condition_variable cv_;
  bool armed_ = false, quit_ = false;
  double limit_ = 0;
  Clock::time_point deadline_;
  std::thread t_;
};

}  // namespace

bool mpi_built() { return true; }

MpiWorld mpi_start(int* lr) {
  *lr = launcher_rank();
  MpiWorld w;
  if (*lr < 0) return w;  // not started by a launcher: no MPI_Init (a singleton start is slow, and may fail)
  int ok = 0;
  MPI_Initialized(&ok);
  if (!ok) MPI_Init(nullptr, nullptr);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // a dead peer is an error code, not an abort
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  w.active = true;
  return w;
}

void mpi_finish(const MpiWorld& w, int exit_code) {
  if (!w.active) return;
  std::fflush(stdout);
  std::fflush(stderr);
  // MPI_Finalize waits for every rank; one that hangs would keep this one forever
  std::thread([exit_code] {
    std::this_thread::sleep_for(std::chrono::seconds(15));
    std::fprintf(stderr, "lathe tune: MPI_Finalize did not return in 15 s (a rank hangs); leaving\n");
    std::fflush(stderr);
    std::_Exit(exit_code);
  }).detach();
  MPI_Finalize();
}

std::unique_ptr<MeasurePool> make_mpi_pool(const MpiWorld& w, const Program& p, const std::string& kind,
                                           std::function<std::unique_ptr<tune::Measurer>()> local, const PoolOptions& o,
                                           std::vector<std::string>* notes) {
  return std::make_unique<MpiPool>(w, p, kind, std::move(local), o, notes);
}

int mpi_worker(const MpiWorld& w, const Program& p, const Bindings& dims, const std::string& kind,
               const std::function<std::unique_ptr<tune::Measurer>()>& make, double rank_timeout_s) {
  std::string host = host_name();
  std::unique_ptr<tune::Measurer> m;
  try {
    if (kind != "model") m = make();
    send_text("ok " + program_fingerprint(p) + " " + host, 0, kHello);
  } catch (const std::exception& e) {
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');
    send_text("error " + host + " " + why, 0, kHello);
    m.reset();
  }
  // a test hook: "R:exit" / "R:hang" makes rank R leave, or hang, on its second job (rank 0:
  // "0:exit" leaves on its second batch)
  std::string fail;
  if (const char* f = std::getenv("LATHE_TUNE_TEST_RANK_FAIL")) {
    std::string s = f;
    if (s.rfind(std::to_string(w.rank) + ":", 0) == 0) fail = s.substr(s.find(':') + 1);
  }
  Watchdog dog(w.rank);
  int jobs = 0;
  // With mpirun --enable-recovery a rank 0 that died does not end the job: a rank that has
  // heard nothing from it for this long leaves rather than wait forever.
  const bool recovery = std::getenv("OMPI_MCA_orte_enable_recovery") != nullptr;
  const double idle_limit = std::max(10.0, 10 * rank_timeout_s);
  auto last = Clock::now();
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS) return 1;  // rank 0 is gone
    if (!flag) {
      if (recovery && secs_since(last) > idle_limit) {
        std::fprintf(stderr, "lathe tune (rank %d): no word from rank 0 in %.3g s; leaving\n", w.rank, idle_limit);
        std::fflush(stderr);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      continue;
    }
    last = Clock::now();
    std::string msg = recv_text(st);
    if (st.MPI_TAG == kStop) return 0;
    if (st.MPI_TAG != kJob) continue;
    std::istringstream in(msg);
    int id = 0, kernel = 0;
    size_t n = 0;
    tune::Machine mach;
    in >> id >> kernel >> n >> mach.threads >> mach.lanes >> mach.vregs;
    in.ignore(1);
    std::vector<std::vector<std::string>> scheds(n);
    for (auto& lines : scheds) {
      std::string count;
      std::getline(in, count);
      lines.resize(std::strtoul(count.c_str(), nullptr, 10));
      for (auto& l : lines) std::getline(in, l);
    }
    if (++jobs == 2 && !fail.empty()) {
      std::fprintf(stderr, "lathe tune (rank %d): LATHE_TUNE_TEST_RANK_FAIL: %s\n", w.rank, fail.c_str());
      std::fflush(stderr);
      if (fail == "exit") std::_Exit(3);
      dog.arm(2 * rank_timeout_s * (double)n + 1);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    dog.arm(2 * rank_timeout_s * (double)n + 10);
    std::vector<double> res{(double)id};
    std::vector<tune::Timing> t(n);
    if (kernel >= 0 && kernel < p.num_kernels() && (m || kind == "model")) {
      // the candidates rebuilt from their schedule lines; one that does not replay fails alone
      std::vector<loop::LoopFunc> fs;
      std::vector<size_t> ok;
      for (size_t c = 0; c < n; ++c) {
        try {
          loop::LoopFunc f = tune::replay(p.kg, kernel, scheds[c]);
          f.name = p.funcs[kernel].name;
          fs.push_back(std::move(f));
          ok.push_back(c);
        } catch (const UserError&) {
        }
      }
      std::vector<tune::Candidate> cs;
      for (size_t i = 0; i < fs.size(); ++i) cs.push_back({&fs[i], &scheds[ok[i]]});
      try {
        std::vector<tune::Timing> got;
        if (kind == "model") {
          tune::ModelMeasurer mm(p, dims, mach);
          got = mm.measure_each(kernel, cs);
        } else if (!cs.empty()) {
          got = m->measure_each(kernel, cs);
        }
        for (size_t i = 0; i < ok.size() && i < got.size(); ++i) t[ok[i]] = got[i];
      } catch (const UserError&) {
      }
    }
    dog.disarm();
    for (auto& x : t) {
      res.push_back(x.ms);
      res.push_back(x.baseline_ms);
    }
    MPI_Send(res.data(), (int)res.size(), MPI_DOUBLE, 0, kResult, MPI_COMM_WORLD);
  }
}

#endif  // LATHE_HAVE_MPI

}  // namespace lathe::app
