// tune_measure.cpp — BackendMeasurer and compile_tuned (see tune_measure.h).
#include "backends/tune_measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ir/diag.h"
#include "core/loop/repack.h"
#include "core/tune/sampler.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;

// Runs every kernel through the heuristic's launcher except `target`, where it times the
// candidates (from `cand`, kernel j = candidate j) and the heuristic's kernel.
class TimingLauncher : public KernelLauncher {
 public:
  // cand[j]: where candidate j runs (a launcher and its kernel index there)
  TimingLauncher(KernelLauncher& base, std::vector<std::pair<KernelLauncher*, int>> cand, int target, const loop::LoopFunc& base_f,
                 const std::vector<const loop::LoopFunc*>& cands, const KernelGraph& kg, int repeats,
                 double sample_ms = 1.0)
      : base_(base), cand_(std::move(cand)), target_(target), base_f_(base_f), cands_(cands), kg_(kg), repeats_(repeats),
        sample_ms_(sample_ms) {}
  bool runs_program_loops() const override { return base_.runs_program_loops(); }

  std::vector<std::vector<double>> samples;  // per candidate, then the heuristic last
  std::vector<bool> wrong;                   // per candidate: output differs from the heuristic's
  std::vector<bool> cut;                     // per candidate: sampling stopped early (clearly slower)
  int inner = 0;                             // launches per sample
  bool cut_slow = true;                      // stop sampling a candidate clearly slower than the best
  // the best candidate's time over the heuristic's the search has found so far (<= 0: none):
  // the bar a candidate is cut against is the faster of that and the heuristic, this batch
  double best_ratio = 0;
  tune::ScriptedClock* scripted = nullptr;   // tests: scripted times instead of the clock

  void launch(int k, void* const* bufs, const int64_t* dims) override {
    if (k != target_) return base_.launch(k, bufs, dims);
    size_t n = cands_.size();
    // each candidate's arguments in its own parameter order (the same buffers)
    std::vector<std::vector<void*>> args(n);
    for (size_t c = 0; c < n; ++c)
      for (auto& p : cands_[c]->buffers) {
        void* ptr = nullptr;
        for (size_t j = 0; j < base_f_.buffers.size(); ++j)
          if (base_f_.buffers[j].buffer == p.buffer)  // the executor applied the base kernel's offset
            ptr = static_cast<std::byte*>(bufs[j]) + (p.offset - base_f_.buffers[j].offset) * static_cast<int64_t>(dtype_size(p.dtype));
        // a constant only the candidate reads (its weights packed in its own layout: repack.h)
        if (const BufferDesc& d = kg_.buffers.at(p.buffer); !ptr && d.kind == BufferKind::Constant && d.node && d.node->attrs.data)
          ptr = const_cast<std::byte*>(static_cast<const std::byte*>(d.node->attrs.data->data())) +
                p.offset * static_cast<int64_t>(dtype_size(p.dtype));
        LATHE_CHECK(ptr, "tune: candidate reads a buffer the kernel does not");
        args[c].push_back(ptr);
      }
    auto run = [&](size_t c) {
      if (c == n) base_.launch(k, bufs, dims);
      else cand_[c].first->launch(cand_[c].second, args[c].data(), dims);
    };
    // the output, for the comparison (the heuristic's result, reproducible)
    int out = -1;
    for (size_t j = 0; j < base_f_.buffers.size(); ++j)
      if (base_f_.buffers[j].written) out = (int)j;
    size_t bytes = 0;
    if (out >= 0) {
      const BufferDesc& d = kg_.buffers[base_f_.buffers[out].buffer];
      bytes = dtype_size(d.dtype);
      Bindings b;
      for (size_t i = 0; i < base_f_.dims.size(); ++i) b[base_f_.dims[i]] = dims[i];
      for (auto& s : d.shape) bytes *= (size_t)s.eval(b).value_or(0);
    }
    auto snapshot = [&] {
      std::vector<float> v;
      if (out < 0 || kg_.buffers[base_f_.buffers[out].buffer].dtype != DType::F32) return v;
      v.resize(bytes / 4);
      std::memcpy(v.data(), bufs[out], bytes);
      return v;
    };
    run(n);
    std::vector<float> want = snapshot();
    run(n);
    bool check = want == snapshot();  // an in-place kernel is not reproducible: no check
    auto wrong_output = [&](size_t c) {
      if (!check) return false;
      std::vector<float> got = snapshot();
      for (size_t i = 0; i < got.size(); ++i) {
        float a = got[i], b = want[i];
        if (std::isnan(a) != std::isnan(b) || std::abs(a - b) > 1e-3f * std::max(1.0f, std::abs(b))) return true;
      }
      return false;
    };
    // the sampling and the cut (core/tune/sampler.h), on the steady clock or a scripted one
    std::function<void(size_t)> launch = run;
    std::function<double()> now = [] { return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count(); };
    if (scripted) {
      launch = [&](size_t c) {
        run(c);
        scripted->launched(c);
      };
      now = [&] { return scripted->now(); };
    }
    tune::SampleOptions so;
    so.repeats = repeats_;
    so.sample_ms = sample_ms_;
    so.cut_slow = cut_slow;
    so.best_ratio = best_ratio;
    tune::SampleResult sr = tune::sample_batch(n, launch, wrong_output, now, so);
    samples = std::move(sr.samples);
    wrong = std::move(sr.wrong);
    cut = std::move(sr.cut);
    inner = sr.inner;
    if (std::getenv("LATHE_TUNE_DEBUG")) {
      std::fprintf(stderr, "tune: batch of %zu, inner %d, bar %.4f ms; per candidate samples (ms):", n, inner, sr.bar);
      for (size_t c = 0; c <= n; ++c) {
        std::fprintf(stderr, "\n  %s%s:", c == n ? "heuristic" : ("#" + std::to_string(c)).c_str(), c < n && cut[c] ? " (cut)" : "");
        for (double t : samples[c]) std::fprintf(stderr, " %.4f", t);
      }
      std::fprintf(stderr, "\n");
    }
    run(n);  // leave the heuristic's result for the kernels after
  }

 private:
  KernelLauncher& base_;
  std::vector<std::pair<KernelLauncher*, int>> cand_;
  int target_;
  const loop::LoopFunc& base_f_;
  const std::vector<const loop::LoopFunc*>& cands_;
  const KernelGraph& kg_;
  int repeats_;
  double sample_ms_;
};

// Times every launch of the heuristic's kernels (for the search's budget shares).
class ClockLauncher : public KernelLauncher {
 public:
  ClockLauncher(KernelLauncher& base, int n) : base_(base), ms(n, 0) {}
  bool runs_program_loops() const override { return base_.runs_program_loops(); }
  void launch(int k, void* const* bufs, const int64_t* dims) override {
    auto t0 = Clock::now();
    base_.launch(k, bufs, dims);
    ms.at(k) += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  KernelLauncher& base_;
  std::vector<double> ms;  // this run's, per kernel
};

// Compiles each program in a child process (fork) that writes the kernel cache, one child
// per hardware thread taking every T-th program in turn; a child whose current program takes
// over `limit_s` is killed and that program marked (true); a new child goes on with the rest.
// The caller then compiles the programs not marked, from the cache.
std::vector<bool> compile_bounded(Backend& backend, const std::vector<Program>& ps, double limit_s) {
  std::vector<bool> too_long(ps.size(), false);
  int threads = std::clamp((int)std::thread::hardware_concurrency(), 1, 4);
  struct Child {
    pid_t pid = -1;
    int fd = -1;
    std::vector<size_t> todo;  // programs left, the current one first
    Clock::time_point since;
  };
  std::vector<Child> kids(std::min<size_t>(threads, ps.size()));
  for (size_t j = 0; j < ps.size(); ++j) kids[j % kids.size()].todo.push_back(j);
  auto start = [&](Child& k) {
    k.pid = -1;
    if (k.todo.empty()) return;
    int fds[2];
    if (pipe(fds) != 0) return;
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return;
    }
    if (pid == 0) {  // the child: compile (into the cache), report each one done, leave at once
      close(fds[0]);
      for (size_t j : k.todo) {
        try {
          backend.compile(ps[j]);
        } catch (...) {  // the parent's own compile reports the error
        }
        unsigned char b = 1;
        if (write(fds[1], &b, 1) != 1) _exit(1);
      }
      _exit(0);
    }
    close(fds[1]);
    k.pid = pid;
    k.fd = fds[0];
    k.since = Clock::now();
  };
  for (auto& k : kids) start(k);
  for (;;) {
    std::vector<pollfd> pfd;
    std::vector<Child*> who;
    for (auto& k : kids)
      if (k.pid > 0) {
        pfd.push_back({k.fd, POLLIN, 0});
        who.push_back(&k);
      }
    if (pfd.empty()) break;
    poll(pfd.data(), pfd.size(), 20);
    for (size_t i = 0; i < pfd.size(); ++i) {
      Child& k = *who[i];
      bool ended = false;
      if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        unsigned char b;
        ssize_t got = read(k.fd, &b, 1);
        if (got == 1) {
          k.todo.erase(k.todo.begin());
          k.since = Clock::now();
        } else {
          ended = true;  // the child exited (or died: the rest are compiled here)
        }
      }
      bool late = !ended && std::chrono::duration<double>(Clock::now() - k.since).count() > limit_s;
      if (late || ended || k.todo.empty()) {
        if (late) kill(k.pid, SIGKILL);
        close(k.fd);
        int status = 0;
        waitpid(k.pid, &status, 0);
        k.pid = -1;
        if (late) {
          too_long[k.todo.front()] = true;
          k.todo.erase(k.todo.begin());
          start(k);
        } else if (ended) {
          k.todo.clear();
        }
      }
    }
  }
  return too_long;
}

}  // namespace

std::vector<double> BackendMeasurer::kernel_ms() {
  const Program& p = exe_->program();
  int n = p.num_kernels();
  ClockLauncher cl(*base_, n);
  std::shared_ptr<KernelLauncher> wrap(&cl, [](KernelLauncher*) {});
  exe_->set_launcher(wrap);
  std::vector<std::vector<double>> runs(n);
  try {
    for (int r = 0; r < 6; ++r) {
      std::fill(cl.ms.begin(), cl.ms.end(), 0.0);
      exe_->run(inputs_);
      if (r > 0)
        for (int k = 0; k < n; ++k) runs[k].push_back(cl.ms[k]);
    }
  } catch (...) {
    exe_->set_launcher(base_);
    throw;
  }
  exe_->set_launcher(base_);
  std::vector<double> out;
  for (auto& v : runs) out.push_back(robust_median(v));
  return out;
}

std::vector<tune::Timing> BackendMeasurer::confirm(int kernel, const tune::Candidate& c) {
  // the kernel's own time, as the search measured it but longer: the winner and the
  // heuristic's kernel back to back on the program's buffers, more rounds of longer samples.
  // Timing one launch per whole run (as this did) adds what a lone launch costs (waking the
  // thread pool, caches the kernels before it left) to both sides: dwconv5's kernel was
  // 1.2-1.4x faster, its in-program confirmation 0.908 vs 0.936 ms, under the 5% bar.
  Batch b = run_batch(kernel, {c}, kConfirmRepeats, kConfirmSampleMs, /*cut_slow=*/false);
  confirm_runs = 1;
  confirm_samples = b.samples;
  confirm_inner = b.inner;
  return {tune::Timing{b.ms[0], b.baseline_ms}};
}

double BackendMeasurer::robust_median(std::vector<double> v) {
  if (v.empty()) return -1;
  auto med = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    size_t n = x.size();
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  };
  double m = med(v);
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::abs(x - m));
  double mad = med(dev);
  std::vector<double> kept;
  for (double x : v)
    if (std::abs(x - m) <= 3 * 1.4826 * mad || mad == 0) kept.push_back(x);
  return med(kept.empty() ? v : kept);
}

void BackendMeasurer::check_backend(const std::string& backend) {
  if (backend == "interp") throw UserError("lathe tune: the interp backend runs whole graphs; tune for c or llvm");
  if (backend == "cuda")
    throw UserError("lathe tune: measuring on cuda is not supported yet (its launches are queued); use --measure model or a CPU backend");
  if (auto why = get_backend(backend).available(); !why.empty())
    throw UserError("backend '" + backend + "' is not available here: " + why);
}

BackendMeasurer::BackendMeasurer(const Program& p, const std::string& backend, TensorMap inputs, int repeats)
    : backend_(get_backend(backend)), name_(backend), inputs_(std::move(inputs)), repeats_(repeats) {
  check_backend(backend);
  base_ = backend_.compile(p);
  exe_ = std::make_unique<Executable>(p, base_, backend);
  exe_->run(inputs_);  // binds, plans memory, checks the inputs
}

std::vector<double> BackendMeasurer::measure(int kernel, const std::vector<const loop::LoopFunc*>& candidates,
                                             double* baseline_ms) {
  std::vector<tune::Candidate> cs;
  for (const loop::LoopFunc* f : candidates) cs.push_back({f, nullptr});
  Batch b = run_batch(kernel, cs, repeats_, 1.0);
  if (baseline_ms) *baseline_ms = b.baseline_ms;
  return b.ms;
}

std::vector<tune::Timing> BackendMeasurer::measure_each(int kernel, const std::vector<tune::Candidate>& candidates) {
  Batch b = run_batch(kernel, candidates, repeats_, 1.0);
  std::vector<tune::Timing> t;
  for (double ms : b.ms) t.push_back({ms, b.baseline_ms});
  return t;
}

BackendMeasurer::Batch BackendMeasurer::run_batch(int kernel, const std::vector<tune::Candidate>& candidates, int repeats,
                                                  double sample_ms, bool cut_slow) {
  const Program& p = exe_->program();
  // the candidates as one small program: kernel j = candidate j
  Program mini;
  mini.kg = p.kg;
  mini.kg.kernels.assign(candidates.size(), p.kg.kernels.at(kernel));
  repacked = 0;
  for (size_t j = 0; j < candidates.size(); ++j) {
    const tune::Candidate& c = candidates[j];
    loop::LoopFunc f = *c.f;
    // a GEMM candidate with other blocks than the build's: the weights the build packed are
    // packed in its layout (as a tuned program's build packs them, once) and it is lowered
    // again to read them, instead of packing them on every launch (repack.h); the new packed
    // copies join the small program as constants only it reads
    loop::MatmulParams mp;
    if (c.schedule && !c.schedule->empty() && tune::parse_matmul_line(c.schedule->front(), mp)) {
      KernelGraph kg = p.kg;
      if (loop::repack_for(kg, kernel, mp)) {
        f = tune::replay(kg, kernel, *c.schedule);
        std::map<int, int> id;
        for (size_t b = p.kg.buffers.size(); b < kg.buffers.size(); ++b) {
          BufferDesc d = kg.buffers[b];
          d.id = (int)mini.kg.buffers.size();
          id[(int)b] = d.id;
          mini.kg.buffer_of[d.node] = d.id;
          mini.kg.buffers.push_back(std::move(d));
        }
        for (auto& bp : f.buffers)
          if (auto it = id.find(bp.buffer); it != id.end()) bp.buffer = it->second;
        ++repacked;
      }
    }
    f.name = p.funcs[kernel].name + "_t" + std::to_string(j);
    if (f.dims != p.funcs[kernel].dims) throw UserError("tune: a candidate of " + p.funcs[kernel].name + " takes other dims");
    mini.funcs.push_back(std::move(f));
  }
  std::vector<const loop::LoopFunc*> named;
  for (auto& f : mini.funcs) named.push_back(&f);
  std::vector<std::shared_ptr<CompiledProgram>> compiled;
  std::vector<std::pair<KernelLauncher*, int>> where;
  std::vector<bool> too_long(candidates.size(), false);
  auto t_compile = Clock::now();
  if (compile_limit_s > 0) {
    // one program per candidate, each compiled first in a child process that is killed
    // when a candidate takes longer than the limit; then here, from the kernel cache
    std::vector<Program> singles(candidates.size());
    for (size_t j = 0; j < candidates.size(); ++j) {
      singles[j].kg = mini.kg;
      singles[j].kg.kernels.assign(1, p.kg.kernels.at(kernel));
      singles[j].funcs.push_back(mini.funcs[j]);
    }
    too_long = compile_bounded(backend_, singles, compile_limit_s);
    for (size_t j = 0; j < candidates.size(); ++j) {
      if (too_long[j]) {
        where.push_back({nullptr, 0});
        continue;
      }
      compiled.push_back(backend_.compile(singles[j]));
      where.push_back({compiled.back().get(), 0});
    }
  } else {
    compiled.push_back(backend_.compile(mini));
    for (size_t j = 0; j < candidates.size(); ++j) where.push_back({compiled[0].get(), (int)j});
  }
  compile_s = std::chrono::duration<double>(Clock::now() - t_compile).count();
  compile_killed = (int)std::count(too_long.begin(), too_long.end(), true);
  // a candidate whose compile was cut is not run: wrong[] marks it below
  std::vector<const loop::LoopFunc*> named_run;
  std::vector<std::pair<KernelLauncher*, int>> where_run;
  std::vector<size_t> index;
  for (size_t j = 0; j < candidates.size(); ++j)
    if (!too_long[j]) {
      named_run.push_back(named[j]);
      where_run.push_back(where[j]);
      index.push_back(j);
    }
  if (named_run.empty()) {
    Batch b;
    b.ms.assign(candidates.size(), -1);
    return b;
  }
  named = named_run;
  TimingLauncher tl(*base_, where_run, kernel, p.funcs[kernel], named, mini.kg, repeats, sample_ms);
  // the confirmation's winner was measured already: every round (one preempted sample under
  // load would otherwise end its confirmation after two)
  tl.cut_slow = cut_slow;
  tl.best_ratio = best_ratio;
  tl.scripted = scripted;
  std::shared_ptr<KernelLauncher> wrap(&tl, [](KernelLauncher*) {});
  exe_->set_launcher(wrap);
  try {
    exe_->run(inputs_);
  } catch (...) {
    exe_->set_launcher(base_);
    throw;
  }
  exe_->set_launcher(base_);
  Batch b;
  b.ms.assign(candidates.size(), -1);
  samples_each.assign(candidates.size(), 0);
  for (size_t i = 0; i < index.size(); ++i) {
    b.ms[index[i]] = tl.wrong[i] ? -1 : robust_median(tl.samples[i]);
    samples_each[index[i]] = (int)tl.samples[i].size();
  }
  b.baseline_ms = robust_median(tl.samples.back());
  b.samples = (int)tl.samples.back().size();
  for (size_t i = 0; i < index.size(); ++i) b.samples = std::min(b.samples, (int)tl.samples[i].size());
  b.inner = tl.inner;
  cut = (int)std::count(tl.cut.begin(), tl.cut.end(), true);
  return b;
}

BackendMeasurer::ProgramCheck BackendMeasurer::check_program(const std::vector<tune::Record>& records,
                                                             const std::string& target, int pairs, double max_s) {
  ProgramCheck r;
  Program p = exe_->program();
  tune::ApplyReport rep = tune::apply_records(p, records, target);
  r.applied = rep.applied;
  if (!rep.applied) return r;
  auto compiled = backend_.compile(p);
  Executable tuned(std::move(p), std::move(compiled), name_);
  auto t_start = Clock::now();
  auto once = [&](Executable& e) {
    auto t0 = Clock::now();
    e.run(inputs_);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  once(tuned);
  once(*exe_);
  std::vector<double> h, t, ratio;
  for (int i = 0; i < pairs; ++i) {
    if (i >= 3 && std::chrono::duration<double>(Clock::now() - t_start).count() > max_s) break;
    double a, b;
    if (i % 2) {  // who goes first alternates
      a = once(*exe_);
      b = once(tuned);
    } else {
      b = once(tuned);
      a = once(*exe_);
    }
    h.push_back(a);
    t.push_back(b);
    ratio.push_back(b / std::max(a, 1e-9));
  }
  r.pairs = (int)h.size();
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  r.heuristic_ms = med(h);
  r.tuned_ms = med(t);
  r.ratio = med(ratio);
  return r;
}

Executable compile_tuned(const Graph& g, const std::string& backend, const std::vector<tune::Record>& records,
                         std::vector<std::string>* notes, int* applied) {
  if (records.empty()) return compile_graph(g, backend);
  Backend& b = get_backend(backend);
  if (std::string why = b.available(); !why.empty()) throw UserError("backend '" + backend + "' is not available here: " + why);
  if (std::string why = b.supports_graph(g); !why.empty()) throw UserError("backend '" + backend + "' cannot run " + why);
  Program p = build_program(g);
  tune::ApplyReport rep = tune::apply_records(p, records, tune::target_of(backend));
  if (notes) notes->insert(notes->end(), rep.notes.begin(), rep.notes.end());
  if (applied) *applied = rep.applied;
  auto compiled = b.compile(p);
  return Executable(std::move(p), std::move(compiled), backend);
}

}  // namespace lathe
