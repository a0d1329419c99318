// sampler.h — how a batch of candidates is sampled and who is cut short: the schedule of
// launches and the cut rules of the BackendMeasurer (backends/tune_measure.h), apart from
// the hardware. It sees a batch only through two functions: launch candidate c (c == n:
// the heuristic's kernel) and read a clock, so a test drives it with scripted times
// (ScriptedClock) and checks the cut without timing anything.
//
// A batch: two lone timed launches of the heuristic (the faster sets the sample length and
// the first bar), a warm-up launch of each candidate (its output checked), then `repeats`
// rounds over the candidates and the heuristic in turn (who goes first rotates), each sample
// one untimed launch then `inner` back to back (≥ sample_ms). With cut_slow, a candidate
// clearly slower than the bar (the faster of the heuristic and the search's best so far,
// lowered by every first-round sample) is cut: its two warm launches over kCutWarm × the bar,
// or its first-round sample and one more at once over kCut × (a lone preempted sample is not
// cut), or over kCut × the bar after the whole first round. A cut candidate keeps the median
// of the samples it has: it is still timed (the cost model learns from it), in about two
// samples instead of `repeats` at its own length.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace lathe::tune {

struct SampleOptions {
  int repeats = 7;
  double sample_ms = 1.0;   // a sample's length at least (inner launches of the heuristic)
  bool cut_slow = true;     // false: every candidate gets every round (the winner's confirmation)
  double best_ratio = 0;    // the search's best time over the heuristic's so far (<= 0: none)
};

struct SampleResult {
  std::vector<std::vector<double>> samples;  // ms per launch: per candidate, then the heuristic last
  std::vector<bool> wrong;                   // per candidate: its output differs from the heuristic's
  std::vector<bool> cut;                     // per candidate: cut short as clearly slower
  int inner = 0;                             // launches per sample
  double bar = 0;                            // the bar the cuts were taken against (ms)
};

constexpr double kCut = 2.0, kCutWarm = 4.0;

// n candidates. launch(c): one launch of candidate c, or of the heuristic when c == n.
// check(c): called after candidate c's warm-up launch; true when its output is wrong (it is
// then neither timed nor cut). now_ms: a clock in milliseconds.
SampleResult sample_batch(size_t n, const std::function<void(size_t)>& launch, const std::function<bool(size_t)>& check,
                          const std::function<double()>& now_ms, const SampleOptions& o);

// A fake clock for tests: each launch of candidate c advances the time by launch_ms(c, i)
// (i: that candidate's launches so far, from 0; c == n is the heuristic). Nothing runs.
struct ScriptedClock {
  std::function<double(size_t c, int i)> launch_ms;
  double t = 0;
  std::vector<int> launches;
  void launched(size_t c) {
    if (launches.size() <= c) launches.resize(c + 1, 0);
    t += launch_ms(c, launches[c]++);
  }
  double now() const { return t; }
};

}  // namespace lathe::tune
