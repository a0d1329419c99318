// tune_job.cpp — the app's Tune job and Apply (see tune_job.h).
#include "views/tune_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/tune/space.h"
#include "views/app_actions.h"

namespace lathe::views {

TuneRun::Live TuneRun::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

void TuneRun::update(const std::function<void(Live&)>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  f(live_);
}

namespace {

// Index in `fresh` of kernel k of `shown` (the same graph built again: the same kernels
// in the same order, unless records or edits changed them; matched by structure).
int kernel_in(const Program& fresh, const Program& shown, int k) {
  if (k < fresh.num_kernels() && fresh.kg.kernels[k].name == shown.kg.kernels[k].name &&
      tune::structural_hash(fresh.kg, k) == tune::structural_hash(shown.kg, k))
    return k;
  std::string h = tune::structural_hash(shown.kg, k);
  for (int i = 0; i < fresh.num_kernels(); ++i)
    if (tune::structural_hash(fresh.kg, i) == h) return i;
  return -1;
}

// The worker's result: records and texts, applied to the run on the UI thread.
struct Outcome {
  tune::TuneResult result;
  std::vector<TuneKernel> kernels;   // final (records, loop IR)
  std::vector<loop::LoopFunc> heuristic_funcs;
  double seconds = 0;
};

}  // namespace

bool start_tune(AppState& s, const TuneRequest& r) {
  if (!s.compiled) {
    s.warn("tune: compile first (Compile in the Kernels panel, or :compile)");
    return false;
  }
  if (s.jobs.busy()) {
    s.warn("tune: wait for the running job (" + s.jobs.label() + ") to finish");
    return false;
  }
  if (s.compiled->backend == "interp") {
    s.warn("tune: the interp backend runs the graph as a whole, with no schedules to tune (compile with c or llvm)");
    return false;
  }
  const Program& shown = s.compiled->program();
  if (r.kernel >= shown.num_kernels()) {
    s.warn("tune: no kernel " + std::to_string(r.kernel + 1) + " (the program has " + std::to_string(shown.num_kernels()) + ")");
    return false;
  }
  if (r.measure != "time" && r.measure != "model") {
    s.warn("tune: measure is 'time' or 'model', not '" + r.measure + "'");
    return false;
  }
  if (r.measure == "time" && !s.hooks.measurer) {
    s.warn("tune: timing candidates needs the backends (this build has none); use the cost model");
    return false;
  }
  auto run = std::make_shared<TuneRun>();
  run->req = r;
  run->req.trials = std::clamp(r.trials, 1, 100000);
  run->backend = s.compiled->backend;
  run->target = tune::target_of(run->backend);
  run->records_path = r.records.empty() ? tune::default_records_path() : r.records;
  run->document = s.document;
  run->compiled = s.compiled;
  run->scope = r.kernel >= 0 ? "kernel " + shown.kg.kernels[r.kernel].name
                             : "the graph (" + std::to_string(shown.num_kernels()) + " kernels)";
  std::string label = "tuning " + run->scope + (r.measure == "model" ? " (cost model)" : " on " + run->backend);
  auto measurer = s.hooks.measurer;
  bool started = s.jobs.start("tune", label, "tune failed", [run, measurer]() -> JobRunner::Apply {
    auto t0 = std::chrono::steady_clock::now();
    const Program& shown = run->compiled->program();
    Program fresh = build_program(shown.graph);   // the heuristic's schedules
    Bindings dims;
    for (const std::string& sym : fresh.graph.symbols()) dims[sym] = 64;   // as the profile job
    tune::TuneOptions o;
    o.trials = run->req.trials;
    o.budget_s = run->req.budget_s;
    o.seed = run->req.seed;
    o.stop = &run->stop;
    if (run->req.kernel >= 0) {
      int k = kernel_in(fresh, shown, run->req.kernel);
      if (k < 0) throw UserError("tune: kernel " + shown.kg.kernels[run->req.kernel].name + " is not in a fresh build of the graph");
      o.only = {k};
    }
    o.on_trial = [run, &fresh](const tune::Trial& t) {
      run->update([&](TuneRun::Live& live) {
        TuneKernel* tk = nullptr;
        for (auto& x : live.kernels)
          if (x.kernel == t.kernel) tk = &x;
        if (!tk) {
          tk = &live.kernels.emplace_back();
          tk->kernel = t.kernel;
          tk->name = fresh.kg.kernels[t.kernel].name;
          tk->kind = fresh.kg.kernels[t.kernel].kind;
        }
        tk->trials.push_back(t);
      });
      int seen = ++run->trials_seen;
      if (run->req.cancel_after > 0 && seen >= run->req.cancel_after) run->stop = true;
    };
    o.progress = [run](const tune::Progress& pr) {
      run->update([&](TuneRun::Live& live) {
        live.progress = pr;
        for (auto& tk : live.kernels)
          if (tk.name == pr.kernel) {
            tk.best_ms = pr.best_ms;
            tk.baseline_ms = pr.baseline_ms;
            tk.done = pr.done;
          }
      });
    };
    // each kernel's record as soon as it is final: the Tune tab shows its code while the
    // search goes on to the next kernel
    o.on_record = [run, &fresh](const tune::Record& rec) {
      TuneKernel fin;
      for (int k = 0; k < fresh.num_kernels(); ++k)
        if (fresh.kg.kernels[k].name == rec.kernel) fin.kernel = k;
      if (fin.kernel < 0) return;
      fin.heuristic_loop = loop::print_loop(fresh.funcs[fin.kernel]);
      try {
        loop::LoopFunc f = tune::replay(fresh.kg, fin.kernel, rec.schedule);
        f.name = fresh.funcs[fin.kernel].name;
        fin.best_loop = loop::print_loop(f);
      } catch (const UserError& e) {
        fin.best_loop = std::string("// the schedule does not replay: ") + e.what();
      }
      run->update([&](TuneRun::Live& live) {
        for (auto& tk : live.kernels)
          if (tk.kernel == fin.kernel) {
            tk.has_record = true;
            tk.record = rec;
            tk.faster = rec.ms < rec.baseline_ms * tune::kApplyMargin;
            tk.best_ms = rec.ms;
            tk.baseline_ms = rec.baseline_ms;
            tk.done = true;
            tk.heuristic_loop = std::move(fin.heuristic_loop);
            tk.best_loop = std::move(fin.best_loop);
          }
      });
    };
    std::unique_ptr<tune::Measurer> m;
    if (run->req.measure == "time") m = measurer(fresh, run->backend, dims);
    run->update([](TuneRun::Live& live) { live.started = true; });
    auto out = std::make_shared<Outcome>();
    out->result = tune::tune_program(fresh, dims, run->target, m.get(), o);
    out->kernels = run->snapshot().kernels;
    for (auto& tk : out->kernels) {
      if (tk.heuristic_loop.empty()) tk.heuristic_loop = loop::print_loop(fresh.funcs[tk.kernel]);
      tk.done = true;
    }
    out->heuristic_funcs = fresh.funcs;
    out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return [run, out](AppState& s) {
      run->finished = true;
      run->interrupted = out->result.interrupted;
      run->notes = out->result.notes;
      run->records = out->result.records;
      run->seconds = out->seconds;
      run->heuristic_funcs = std::move(out->heuristic_funcs);
      run->update([&](TuneRun::Live& live) { live.kernels = out->kernels; });
      if (s.tune != run) return;   // a newer run replaced it (cannot happen while one job runs)
      int faster = 0;
      for (auto& tk : out->kernels) faster += tk.faster;
      char line[200];
      std::snprintf(line, sizeof line, "%stuned %s in %.1f s: %d kernel%s, %d faster than the heuristic (Apply replays them)",
                    run->interrupted ? "cancelled: " : "", run->scope.c_str(), run->seconds,
                    static_cast<int>(run->records.size()), run->records.size() == 1 ? "" : "s", faster);
      s.info(line);
      for (auto& tk : out->kernels)
        if (tk.has_record)
          s.info("  " + tk.name + ": " + tune::format_ms(tk.record.ms) + " vs heuristic " + tune::format_ms(tk.record.baseline_ms) +
                 (tk.faster ? "" : " (not faster: the heuristic stays)"));
      for (auto& n : run->notes) s.warn("tune: " + n);
    };
  });
  if (!started) {
    s.warn("tune: could not start (another job runs)");
    return false;
  }
  s.tune = run;
  s.tune_selected = -1;
  s.bottom_tab_request = "Tune";
  return true;
}

bool cancel_tune(AppState& s) {
  if (!s.tune || s.tune->finished || !s.jobs.busy() || s.jobs.kind() != "tune") return false;
  s.tune->stop = true;
  s.info("tune: cancelling after the batch in flight (what was found is kept)");
  return true;
}

bool apply_tune(AppState& s) {
  std::shared_ptr<TuneRun> run = s.tune;
  if (!run || !run->finished) {
    s.warn("apply: no finished tuning run");
    return false;
  }
  if (run->records.empty()) {
    s.warn("apply: the run found no schedule");
    return false;
  }
  if (s.jobs.busy()) {
    s.warn("apply: wait for the running job (" + s.jobs.label() + ") to finish");
    return false;
  }
  if (s.document != run->document || !s.compiled || !s.hooks.build_scheduled) {
    s.warn(!s.hooks.build_scheduled ? "apply: compiling needs the scripting layer and a backend"
                                    : "apply: the graph tuned is no longer the one shown");
    return false;
  }
  try {
    tune::merge_records(run->records_path, run->records);
  } catch (const std::exception& e) {
    s.fail(std::string("apply: cannot write the records: ") + e.what());
    return false;
  }
  // the program shown with the records replayed onto its kernels (all that share a hash)
  Program tuned = s.compiled->program();
  tune::ApplyReport rep = tune::apply_records(tuned, run->records, run->target);
  for (auto& n : rep.notes) s.warn("apply: " + n);
  run->applied = true;
  run->applied_kernels = rep.applied;
  s.info("apply: records written to " + run->records_path + "; " + std::to_string(rep.applied) + " kernel" +
         (rep.applied == 1 ? "" : "s") + " of the program take the tuned schedule");
  if (rep.applied == 0) return true;
  auto build = s.hooks.build_scheduled;
  std::string backend = run->backend;
  std::vector<loop::LoopFunc> reset_to = run->heuristic_funcs;
  if (reset_to.size() != tuned.funcs.size()) reset_to = s.compiled->program().funcs;
  uint64_t document = s.document;
  int64_t version = static_cast<int64_t>(s.compiled->graph_version);
  int applied = rep.applied;
  return s.jobs.start("compile", "compiling the tuned program", "compiling the tuned program failed",
                      [tuned = std::move(tuned), backend, build, reset_to, document, version, applied]() mutable -> JobRunner::Apply {
                        BuiltProgram bp = build(std::move(tuned), backend, std::move(reset_to));
                        return [bp, document, version, applied](AppState& s) {
                          if (s.document != document) {
                            s.warn("the tuned program finished compiling after another graph was opened: dropped");
                            return;
                          }
                          if (s.hooks.publish) s.hooks.publish(bp);
                          adopt_program(s, bp.exe, version);
                          s.info("p is the tuned program (" + std::to_string(applied) + " kernel" + (applied == 1 ? "" : "s") +
                                 " rescheduled; p:reset() goes back to the heuristic's)");
                        };
                      });
}

}  // namespace lathe::views
