// tune_check.h — what the tune tests share: the largest difference between outputs, a random
// point of a space, a schedule that replays to the code it built, a replay that must be
// refused with its reason, and tuned programs compiled at once (one C compiler call) and run
// against the interpreter's results. Each check returns an AssertionResult, so a failure is
// reported at the test's line (EXPECT_TRUE(...)).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/schedule/program.h"
#include "core/tune/space.h"

namespace lathe::tune_test {

// The largest absolute difference between `got` and `want`, output by output (want's names).
inline double max_diff(const TensorMap& got, const TensorMap& want) {
  double m = 0;
  for (auto& [n, t] : want) {
    const HostTensor& u = got.at(n);
    for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(u.get_f64(i) - t.get_f64(i)));
  }
  return m;
}

// ... divided by the largest |want| (outputs of any scale).
inline double max_rel_diff(const TensorMap& got, const TensorMap& want) {
  double r = 1e-30;
  for (auto& [n, t] : want)
    for (int64_t i = 0; i < t.numel(); ++i) r = std::max(r, std::abs(t.get_f64(i)));
  return max_diff(got, want) / r;
}

// A point of `s` drawn by a linear congruential step of `seed` per knob (deterministic).
inline tune::Point random_point(const tune::Space& s, uint64_t& seed) {
  tune::Point pt;
  for (auto& knob : s.knobs) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    pt.push_back(int((seed >> 33) % knob.values.size()));
  }
  return pt;
}

// `schedule` replayed on kernel k gives f's code (code_key: the loops without the name).
inline ::testing::AssertionResult replays_to(const KernelGraph& kg, int k, const std::vector<std::string>& schedule,
                                             const loop::LoopFunc& f) {
  const std::string again = tune::code_key(tune::replay(kg, k, schedule)), built = tune::code_key(f);
  if (again == built) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the replay differs:\n" << again << "\nbuilt:\n" << built;
}

// Replaying `lines` on kernel k is refused with a UserError that says `why`.
inline ::testing::AssertionResult refused(const KernelGraph& kg, int k, const std::vector<std::string>& lines,
                                          const std::string& why) {
  try {
    tune::replay(kg, k, lines);
  } catch (const UserError& e) {
    if (std::string(e.what()).find(why) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "refused for another reason: " << e.what() << " (expected '" << why << "')";
  }
  return ::testing::AssertionFailure() << "accepted: " << lines.back();
}

// `base` with kernel k's loops replaced by f (under the kernel's name).
inline Program with_kernel(const Program& base, int k, loop::LoopFunc f) {
  Program p = base;
  f.name = p.funcs[k].name;
  p.funcs[k] = std::move(f);
  return p;
}

// Compiles `progs` on c with one compile_many, runs each on `in` and compares with `want` by
// `diff`: a failure names each program off by `tol` or more (what(i), then kernel k's loops).
inline ::testing::AssertionResult all_match(const std::vector<Program>& progs, int k, const TensorMap& in,
                                            const TensorMap& want, double tol,
                                            const std::function<std::string(size_t)>& what = nullptr,
                                            double (*diff)(const TensorMap&, const TensorMap&) = max_diff) {
  std::vector<const Program*> ps;
  for (auto& p : progs) ps.push_back(&p);
  auto compiled = get_backend("c").compile_many(ps);
  std::string bad;
  for (size_t i = 0; i < progs.size(); ++i) {
    Executable e(progs[i], compiled[i], "c");
    const double d = diff(e.run(in), want);
    if (!(d < tol))
      bad += "program " + std::to_string(i) + (what ? " (" + what(i) + ")" : "") + ": off by " + std::to_string(d) + "\n" +
             loop::print_loop(progs[i].funcs[k]) + "\n";
  }
  if (bad.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad;
}

}  // namespace lathe::tune_test
