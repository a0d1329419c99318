// search.cpp — beam search over a kernel's Space, ranked by the cost model (see search.h).
#include "core/tune/search.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "core/ir/diag.h"
#include "core/loop/repack.h"
#include "core/tune/model.h"

namespace lathe::tune {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The estimate of a candidate as its program would run it: a GEMM candidate with blocks
// other than the build's reads the weights packed once in its own layout (loop::repack_for,
// as apply_records and the BackendMeasurer give it), not copied on every run.
Estimate estimate_as_built(const loop::LoopFunc& f, const std::vector<std::string>* schedule, const KernelGraph& kg,
                           int kernel, const Bindings& dims, const Machine& m) {
  loop::MatmulParams mp;
  if (schedule && !schedule->empty() && parse_matmul_line(schedule->front(), mp)) {
    KernelGraph repacked = kg;
    if (loop::repack_for(repacked, kernel, mp)) return estimate(replay(repacked, kernel, *schedule), repacked, dims, m);
  }
  return estimate(f, kg, dims, m);
}

struct Rng {  // splitmix64: the same sequence on every platform
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(size_t n) { return n ? static_cast<int>(next() % n) : 0; }
};

struct Cand {
  Point point;
  Built built;
  std::string key;
  Estimate est;
  double predicted = kInf, measured = -1;
  double ratio = kInf;       // measured / the heuristic's time in the same rounds (drift-free rank)
  double base_ms = -1;       // that heuristic time
};

class KernelSearch {
 public:
  // lazy: the Measurer estimates (--measure model), add() only builds
  KernelSearch(const Program& p, int kernel, const Bindings& dims, const TuneOptions& o, uint64_t seed, bool lazy)
      : p_(p), k_(kernel), dims_(dims), o_(o), space_(make_space(p.kg, kernel, o.machine)), rng_{seed}, lazy_(lazy) {}

  Point random_point() {
    Point pt(space_.knobs.size());
    for (size_t i = 0; i < pt.size(); ++i) pt[i] = rng_.below(space_.knobs[i].values.size());
    return pt;
  }
  Point mutate(const Point& from) {
    Point pt = from;
    int changes = 1 + rng_.below(2);
    for (int c = 0; c < changes && !pt.empty(); ++c) {
      int i = rng_.below(pt.size());
      pt[i] = rng_.below(space_.knobs[i].values.size());
    }
    return pt;
  }

  // builds a point; nullptr when its code was seen already
  Cand* add(const Point& pt) {
    if (seen_points_.count(pt)) return nullptr;
    seen_points_.insert(pt);
    Cand c;
    c.point = pt;
    try {
      c.built = build(p_.kg, k_, space_, pt);
    } catch (const UserError&) {
      return nullptr;
    }
    c.built.f.name = p_.funcs[k_].name;
    c.key = code_key(c.built.f);
    if (!seen_code_.insert(c.key).second) return nullptr;
    if (lazy_) {
      cands_.push_back(std::move(c));
      return &cands_.back();
    }
    c.est = estimate_as_built(c.built.f, &c.built.schedule, p_.kg, k_, dims_, o_.machine);
    c.predicted = model_.predict(c.est);
    if (std::getenv("LATHE_TUNE_DEBUG")) {
      std::fprintf(stderr, "tune: %s est %.4f ms:", p_.funcs[k_].name.c_str(), c.est.ms);
      for (auto& l : c.built.schedule) std::fprintf(stderr, " | %s", l.c_str());
      std::fprintf(stderr, "\n");
    }
    cands_.push_back(std::move(c));
    return &cands_.back();
  }

  std::vector<Cand*> pool(int randoms, int mutations, int beam) {
    std::vector<Cand*> r;
    std::vector<Cand*> best = ranked_measured(beam);
    for (int i = 0; i < mutations && !best.empty(); ++i)
      if (Cand* c = add(mutate(best[i % best.size()]->point))) r.push_back(c);
    for (int i = 0; i < randoms; ++i)
      if (Cand* c = add(random_point())) r.push_back(c);
    return r;
  }

  std::vector<Cand*> ranked_measured(int n) {
    std::vector<Cand*> m;
    for (auto& c : cands_)
      if (c.measured > 0) m.push_back(&c);
    std::sort(m.begin(), m.end(), [](Cand* a, Cand* b) { return a->ratio < b->ratio; });
    if ((int)m.size() > n) m.resize(n);
    return m;
  }

  void repredict() {
    for (auto& c : cands_) c.predicted = model_.predict(c.est);
  }

  const Program& p_;
  int k_;
  const Bindings& dims_;
  const TuneOptions& o_;
  Space space_;
  Rng rng_;
  bool lazy_;
  CostModel model_;
  std::deque<Cand> cands_;
  std::set<Point> seen_points_;
  std::set<std::string> seen_code_;
};

bool stopped(const TuneOptions& o) { return o.stop && o.stop->load(); }

}  // namespace

std::vector<Timing> Measurer::measure_each(int kernel, const std::vector<Candidate>& candidates) {
  std::vector<const loop::LoopFunc*> fs;
  for (auto& c : candidates) fs.push_back(c.f);
  double base = -1;
  std::vector<double> ms = measure(kernel, fs, &base);
  std::vector<Timing> t(candidates.size());
  for (size_t i = 0; i < t.size() && i < ms.size(); ++i) t[i] = {ms[i], base};
  return t;
}

std::vector<Timing> ModelMeasurer::measure_each(int kernel, const std::vector<Candidate>& candidates) {
  const double base = estimate(p_.funcs.at(kernel), p_.kg, dims_, m_).ms;
  std::vector<Timing> t;
  for (const Candidate& c : candidates) t.push_back({estimate_as_built(*c.f, c.schedule, p_.kg, kernel, dims_, m_).ms, base});
  return t;
}

std::vector<double> ModelMeasurer::measure(int kernel, const std::vector<const loop::LoopFunc*>& candidates,
                                           double* baseline_ms) {
  std::vector<double> ms;
  for (const loop::LoopFunc* f : candidates) ms.push_back(estimate(*f, p_.kg, dims_, m_).ms);
  if (baseline_ms) *baseline_ms = estimate(p_.funcs.at(kernel), p_.kg, dims_, m_).ms;
  return ms;
}

TuneResult tune_program(const Program& p, const Bindings& dims, const std::string& target, Measurer* m,
                        const TuneOptions& o) {
  TuneResult res;
  ModelMeasurer local(p, dims, o.machine);
  if (!m) m = &local;
  const bool model = m->kind() == "model";
  auto t_start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t_start).count(); };
  // distinct kernels to tune (the first of each structural hash)
  std::vector<int> todo;
  std::set<std::string> hashes;
  std::map<int, std::string> hash_of;
  for (int i = 0; i < p.num_kernels(); ++i) {
    if (!o.only.empty() && !std::count(o.only.begin(), o.only.end(), i)) continue;
    const Kernel& k = p.kg.kernels[i];
    if (k.kind == "extern") {
      res.notes.push_back(k.name + ": a library call, nothing to tune");
      continue;
    }
    std::string h = structural_hash(p.kg, i);
    if (!hashes.insert(h).second) continue;  // the same kernel again: tuned once
    hash_of[i] = h;
    todo.push_back(i);
  }
  // The budget bounds the whole run: a batch (compile + measure) or a confirmation starts
  // only when one as long as the longest of the recent ones still fits (a kernel that started near the
  // end overran it by a batch and a confirmation: mobilenet_v2, --time-budget 840, ran
  // 877 s under load). Measured times only: --measure model batches take milliseconds.
  // Where the run's time goes: kernels by their share of a run (all the kernels of a hash),
  // the largest first; the budget is shared by those weights (a kernel with 60% of the run
  // gets 60% of what is left), equal weights when the measurer cannot say.
  std::map<int, double> weight;
  for (int k : todo) weight[k] = 1;
  if (!model) {
    std::vector<double> kms = m->kernel_ms();
    if ((int)kms.size() == p.num_kernels()) {
      std::map<std::string, double> by_hash;
      for (int i = 0; i < p.num_kernels(); ++i)
        if (p.kg.kernels[i].kind != "extern") by_hash[structural_hash(p.kg, i)] += std::max(kms[i], 0.0);
      for (int k : todo) weight[k] = std::max(by_hash[hash_of[k]], 1e-6);
      std::stable_sort(todo.begin(), todo.end(), [&](int a, int b) { return weight[a] > weight[b]; });
    }
  }
  // (the longest of the last kRecent batches and confirmations: one slow batch, a candidate
  // compiled to its limit, does not end the run for the kernels after it)
  constexpr size_t kRecent = 6;
  std::deque<double> batches, confirms;
  double batch_s = 0, confirm_s = 0;
  auto note_time = [&](std::deque<double>& recent, double& longest, double s) {
    recent.push_back(s);
    if (recent.size() > kRecent) recent.pop_front();
    longest = *std::max_element(recent.begin(), recent.end());
  };
  auto fits = [&](double need) { return o.budget_s <= 0 || elapsed() + need <= o.budget_s; };
  for (size_t n = 0; n < todo.size(); ++n) {
    if (stopped(o)) { res.interrupted = true; break; }
    int k = todo[n];
    double deadline = -1;  // this kernel's share of the remaining budget
    if (o.budget_s > 0) {
      double left = o.budget_s - elapsed();
      if (left <= 0 || !fits(batch_s + confirm_s)) {
        char why[160];
        std::snprintf(why, sizeof why, " (%.0f s left, a batch and its confirmation took %.0f s)", std::max(left, 0.0),
                      batch_s + confirm_s);
        res.notes.push_back("time budget spent before " + p.kg.kernels[k].name + (left > 0 ? why : ""));
        break;
      }
      double rest = 0;
      for (size_t j = n; j < todo.size(); ++j) rest += weight[todo[j]];
      deadline = elapsed() + left * weight[k] / rest;
    }
    KernelSearch s(p, k, dims, o, o.seed * 0x9e3779b97f4a7c15ull + (uint64_t)k, model);
    Progress pr;
    pr.index = (int)n + 1;
    pr.count = (int)todo.size();
    pr.kernel = p.kg.kernels[k].name;
    pr.max_trials = o.trials;
    auto report = [&](bool done) {
      pr.done = done;
      pr.time_left_s = o.budget_s > 0 ? std::max(0.0, o.budget_s - elapsed()) : -1;
      if (o.progress) o.progress(pr);
    };
    auto out_of_time = [&] {
      // (every kernel started gets one batch: a small share ends it after that)
      return stopped(o) || (pr.trials > 0 && deadline > 0 && elapsed() > deadline) || (pr.trials > 0 && !fits(batch_s + confirm_s));
    };
    Record rec;
    rec.hash = hash_of[k];
    rec.target = target;
    rec.kernel = p.kg.kernels[k].name;
    rec.kind = p.kg.kernels[k].kind;
    rec.graph = o.graph;
    Cand* best = nullptr;
    if (model) {
      // --measure model: the estimate is the time; a fixed-seed sample, then hill climbing
      // in rounds of kClimb mutations of the best; each estimated as one batch
      constexpr int kClimb = 8;
      rec.measure = "model";
      Estimate base = estimate(p.funcs[k], p.kg, dims, o.machine);
      rec.baseline_ms = base.ms;
      size_t done = 0;  // cands_[0, done) are estimated
      auto evaluate = [&] {
        std::vector<Candidate> batch;
        for (size_t i = done; i < s.cands_.size(); ++i) batch.push_back({&s.cands_[i].built.f, &s.cands_[i].built.schedule});
        if (batch.empty()) return;
        std::vector<Timing> t = m->measure_each(k, batch);
        for (size_t i = 0; i < batch.size(); ++i) {
          Cand& c = s.cands_[done + i];
          c.predicted = i < t.size() && t[i].ms > 0 ? t[i].ms : kInf;
          c.measured = c.predicted;
          if (o.on_trial) o.on_trial({k, (int)(done + i) + 1, std::isfinite(c.predicted) ? c.predicted : -1, rec.baseline_ms});
        }
        done = s.cands_.size();
      };
      Point zero(s.space_.knobs.size(), 0);
      s.add(zero);
      int budget = std::max(o.trials, 1) * 8;
      for (int i = 0; i < budget; ++i) s.add(s.random_point());
      evaluate();
      auto pick = [&] {
        Cand* b = nullptr;
        for (auto& c : s.cands_)
          if (std::isfinite(c.predicted) && (!b || c.predicted < b->predicted)) b = &c;
        return b;
      };
      best = pick();
      for (int round = 0; best && round < std::max(o.trials, 1) * 4 / kClimb + 1 && !stopped(o); ++round) {
        for (int i = 0; i < kClimb; ++i) s.add(s.mutate(best->point));
        evaluate();
        best = pick();
        pr.trials = (int)s.cands_.size();
        if (best) pr.best_ms = best->predicted;
        pr.baseline_ms = rec.baseline_ms;
        report(false);  // (and a chance to see Ctrl-C)
      }
      pr.trials = (int)s.cands_.size();
      if (best) {
        rec.ms = best->predicted;
        pr.best_ms = rec.ms;
      }
      pr.baseline_ms = rec.baseline_ms;
      rec.trials = pr.trials;
    } else {
      auto measure = [&](std::vector<Cand*> batch) {
        std::vector<Candidate> cs;
        for (Cand* c : batch) cs.push_back({&c->built.f, &c->built.schedule});
        std::vector<Timing> t;
        try {
          t = m->measure_each(k, cs);
        } catch (const UserError& e) {
          res.notes.push_back(p.kg.kernels[k].name + ": a batch failed to compile or run: " + e.what());
        }
        t.resize(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) {
          double ms = t[i].ms, base = t[i].baseline_ms;
          batch[i]->measured = ms > 0 ? ms : kInf;
          batch[i]->base_ms = base;
          batch[i]->ratio = ms > 0 && base > 0 ? ms / base : kInf;
          if (ms > 0) s.model_.add(batch[i]->est.features, std::log(ms / batch[i]->est.ms));
          if (o.on_trial) o.on_trial({k, pr.trials + (int)i + 1, ms > 0 ? ms : -1, base});
        }
        pr.trials += (int)batch.size();
        s.repredict();
      };
      std::vector<Cand*> first = s.pool(96, 0, 0);
      if (Cand* z = s.add(Point(s.space_.knobs.size(), 0))) first.push_back(z);
      // candidates the analytic estimate puts far behind the heuristic are never measured
      // (nor compiled): one launch of such a nest can take seconds, and the time a batch
      // took sets when the budget ends (a plain 3x3 convolution estimated at 14 s against
      // the GEMM's 4 ms, picked by an extrapolating fit, cost 45 s of a 300 s budget)
      const double far_ms = kFarFromHeuristic * estimate(p.funcs[k], p.kg, dims, o.machine).ms;
      std::set<const Cand*> far;
      while (pr.trials < o.trials && !out_of_time()) {
        std::vector<Cand*> pool = pr.trials == 0 ? first : s.pool(48, 48, 4);
        // also the unmeasured survivors of earlier pools
        for (auto& c : s.cands_)
          if (c.measured < 0 && !std::count(pool.begin(), pool.end(), &c)) pool.push_back(&c);
        if (far_ms > 0)
          pool.erase(std::remove_if(pool.begin(), pool.end(),
                                    [&](Cand* c) { return c->est.ms > far_ms && (far.insert(c), true); }),
                     pool.end());
        if (pool.empty()) break;
        std::sort(pool.begin(), pool.end(), [](Cand* a, Cand* b) { return a->predicted < b->predicted; });
        int take = std::min<int>({o.batch, o.trials - pr.trials, (int)pool.size()});
        std::vector<Cand*> batch(pool.begin(), pool.begin() + take);
        // one exploratory pick from the rest of the pool
        if (take >= 3 && (int)pool.size() > take) batch.back() = pool[take + s.rng_.below(pool.size() - take)];
        {
          auto top = s.ranked_measured(1);
          m->best_ratio = top.empty() || !std::isfinite(top[0]->ratio) ? 0 : top[0]->ratio;
        }
        double t0 = elapsed();
        measure(batch);
        note_time(batches, batch_s, elapsed() - t0);
        auto top = s.ranked_measured(1);
        if (!top.empty() && std::isfinite(top[0]->ratio)) {
          pr.best_ms = top[0]->measured;
          pr.baseline_ms = top[0]->base_ms;  // the pair measured in the same rounds
        }
        report(false);
      }
      auto top = s.ranked_measured(1);
      best = top.empty() || !std::isfinite(top[0]->ratio) ? nullptr : top[0];
      if (best) {
        // the record's pair: the winner and the heuristic measured in the same rounds; the
        // winner is measured again beside it (the search's best is biased low by the noise)
        rec.ms = best->measured;
        rec.baseline_ms = best->base_ms;
        if (!stopped(o)) {
          std::vector<Timing> again;
          double t0 = elapsed();
          try {
            again = m->confirm(k, {&best->built.f, &best->built.schedule});
          } catch (const UserError&) {
          }
          note_time(confirms, confirm_s, elapsed() - t0);
          if (!again.empty() && again[0].ms > 0 && again[0].baseline_ms > 0 &&
              again[0].ms / again[0].baseline_ms > best->ratio) {
            rec.ms = again[0].ms;
            rec.baseline_ms = again[0].baseline_ms;
          }
        }
      }
      rec.trials = pr.trials;
      if (!far.empty())
        res.notes.push_back(p.kg.kernels[k].name + ": " + std::to_string(far.size()) + " candidate" +
                            (far.size() == 1 ? "" : "s") + " estimated over " + std::to_string((int)kFarFromHeuristic) +
                            "x the heuristic's time not measured");
      if (best) {  // else "-", not the record's 0
        pr.best_ms = rec.ms;
        pr.baseline_ms = rec.baseline_ms;
      }
    }
    report(true);
    if (best && rec.baseline_ms > 0) {
      rec.schedule = best->built.schedule;
      res.records.push_back(rec);
      if (o.on_record) o.on_record(rec);
    } else {
      res.notes.push_back(p.kg.kernels[k].name + ": no candidate could be measured");
    }
    if (stopped(o)) { res.interrupted = true; break; }
  }
  return res;
}

}  // namespace lathe::tune
