// sampler.cpp — the sampling and cut rules of a measured batch (see sampler.h).
#include "core/tune/sampler.h"

#include <algorithm>
#include <cmath>

namespace lathe::tune {

SampleResult sample_batch(size_t n, const std::function<void(size_t)>& launch, const std::function<bool(size_t)>& check,
                          const std::function<double()>& now_ms, const SampleOptions& o) {
  SampleResult r;
  // a sample: one untimed launch (it wakes the thread pool the candidates before it let
  // sleep), then `inner` back to back, as the kernel runs inside a program
  auto t_one = [&](size_t c, int inner) {
    launch(c);
    double t0 = now_ms();
    for (int i = 0; i < inner; ++i) launch(c);
    return (now_ms() - t0) / inner;
  };
  auto timed = [&](size_t c) {
    double t0 = now_ms();
    launch(c);
    return now_ms() - t0;
  };
  // the faster of two: a first timed launch can still pay a cold cost (the c backend's
  // OpenMP team waking: 0.29 ms against 0.02 for a 512 x 384 column sum), which set the
  // cut's bar 10x too high and let a clearly slower candidate through uncut
  double base_ms = std::min(t_one(n, 1), t_one(n, 1));
  r.inner = (int)std::clamp(std::ceil(o.sample_ms / std::max(base_ms, 1e-6)), 2.0, 500.0);
  r.samples.assign(n + 1, {});
  r.cut.assign(n, false);
  r.wrong.assign(n, false);
  // The bar: the best time per launch known now (the heuristic's, or the search's best so
  // far relative to it), lowered by every sample of the first round.
  const double best = o.best_ratio > 0 ? std::min(1.0, o.best_ratio) : 1.0;
  double bar = base_ms * best;
  for (size_t c = 0; c < n; ++c) {  // warm-up, and the output check
    launch(c);
    r.wrong[c] = check(c);
    double w = timed(c);
    if (o.cut_slow && !r.wrong[c] && w > kCutWarm * bar) {
      w = std::min(w, timed(c));
      if (w > kCutWarm * bar) {
        r.cut[c] = true;
        r.samples[c].push_back(w);
      }
    }
  }
  auto fastest = [&](size_t c) { return *std::min_element(r.samples[c].begin(), r.samples[c].end()); };
  for (int round = 0; round < o.repeats; ++round) {
    for (size_t i = 0; i <= n; ++i) {
      size_t c = (i + round) % (n + 1);  // rotate who goes first
      if (c < n && (r.cut[c] || r.wrong[c])) continue;
      double t = t_one(c, r.inner);
      r.samples[c].push_back(t);
      if (round == 0 && o.cut_slow && c < n && t > kCut * bar) {
        r.samples[c].push_back(t_one(c, r.inner));
        if (std::min(t, r.samples[c].back()) > kCut * bar) r.cut[c] = true;
      }
      if (round == 0 && c == n) bar = std::min(bar, t * best);
      if (round == 0 && c < n && !r.cut[c]) bar = std::min(bar, fastest(c));
    }
    if (round == 0 && o.cut_slow)  // the bar after the whole first round: cut who it leaves behind
      for (size_t c = 0; c < n; ++c)
        if (!r.cut[c] && !r.wrong[c] && fastest(c) > kCut * bar) r.cut[c] = true;
  }
  r.bar = bar;
  return r;
}

}  // namespace lathe::tune
