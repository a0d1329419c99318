// diff_util.h — shared helpers of the backend tests: run graphs on a backend and on the
// interpreter and compare, with a readable reproducer on failure. DiffBatch compiles all
// its graphs with one compile_many() call (one C compiler invocation for the lot).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "core/interp/interp.h"
#include "core/ir/text.h"
#include "core/loop/loop_print.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"

namespace lathe::test {

// LATHE_TEST_BACKEND: c, llvm, cuda, or cuda-emulated (cuda on the fake driver, which
// compiles the rendered CUDA C for the CPU: tests/cuda/fake_driver).
inline std::string test_backend() {
  const char* b = std::getenv("LATHE_TEST_BACKEND");
  std::string name = b && *b ? b : "c";
#ifdef LATHE_FAKE_CUDA
  if (name == "cuda-emulated") {
    setenv("LATHE_CUDA_DRIVER", LATHE_FAKE_CUDA, 0);
    setenv("LATHE_CUDA_LOAD_SOURCE", "1", 0);
    return "cuda";
  }
#endif
  return name;
}

// Compares every output with the interpreter's; "" when all match.
inline std::string compare_outputs(const TensorMap& got, const TensorMap& want, double loosen = 1) {
  for (auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) return "output '" + name + "' missing";
    if (it->second.shape() != w.shape())
      return "output '" + name + "' has shape " + it->second.shape_string() + ", interpreter " + w.shape_string();
    Tolerance tol = default_tolerance(w.dtype());
    std::string why;
    if (!allclose(it->second, w, tol.rtol * loosen, tol.atol * loosen, &why)) return "output '" + name + "': " + why;
  }
  return "";
}

inline std::string loop_ir_of(const Program& p) {
  std::string s;
  for (auto& f : p.funcs) s += loop::print_loop(f);
  return s;
}

// How many of the program's kernels are of `kind` ("matmul", ...).
// The schedule logs of every kernel of g's program as the default schedule writes them
// (one line a step), for tests of what the heuristics chose.
inline std::string default_schedule_log(const Graph& g) {
  Program p = build_program(g);
  std::string log;
  for (auto& f : p.funcs)
    for (auto& l : f.schedule_log) log += l + "\n";
  return log;
}

inline int count_kind(const Program& p, const std::string& kind) {
  int n = 0;
  for (auto& k : p.kg.kernels) n += k.kind == kind;
  return n;
}

class DiffBatch {
 public:
  // The backend under test: LATHE_TEST_BACKEND (CTest runs the suite once per CPU
  // backend: c and llvm), else "c".
  explicit DiffBatch(std::string backend = test_backend()) : backend_(std::move(backend)) {}
  // `loosen` multiplies the dtype tolerance (deep graphs: the interpreter sums in double).
  void add(const std::string& label, const Graph& g, uint64_t seed = 7, double loosen = 1) {
    cases_.push_back({label, g, random_inputs(g, seed), loosen});
  }
  void add(const std::string& label, const Graph& g, TensorMap inputs, double loosen = 1) {
    cases_.push_back({label, g, std::move(inputs), loosen});
  }
  // Compiles everything at once, runs, compares; returns the number of failures.
  int run(bool report = true) {
    auto whys = run_each(report);
    return static_cast<int>(std::count_if(whys.begin(), whys.end(), [](auto& w) { return !w.empty(); }));
  }
  // Per case: "" when it matched the interpreter, else why not.
  std::vector<std::string> run_each(bool report = true) {
    std::vector<std::string> result;
    Backend& b = get_backend(backend_);
    std::vector<Program> programs;
    programs.reserve(cases_.size());
    for (auto& c : cases_) programs.push_back(build_program(c.g));
    std::vector<const Program*> ptrs;
    for (auto& p : programs) ptrs.push_back(&p);
    auto compiled = b.compile_many(ptrs);
    for (size_t i = 0; i < cases_.size(); ++i) {
      auto& c = cases_[i];
      TensorMap want = interpret(c.g, c.inputs);
      Executable exe(std::move(programs[i]), compiled[i], backend_);
      std::string why;
      try {
        // cuda contracts a*b+c into fmaf and tiles its sums: allow it 4x the dtype tolerance
        why = compare_outputs(exe.run(c.inputs), want, c.loosen * (backend_ == "cuda" ? 4 : 1));
      } catch (const std::exception& e) {
        why = std::string("exception: ") + e.what();
      }
      result.push_back(why);
      if (why.empty()) continue;
      if (report)
        ADD_FAILURE() << c.label << ": " << why << "\nreproducer (.lathe):\n"
                      << print_graph(c.g) << "\nloop IR:\n" << loop_ir_of(exe.program());
    }
    cases_.clear();
    return result;
  }
  size_t size() const { return cases_.size(); }

 private:
  struct Case {
    std::string label;
    Graph g;
    TensorMap inputs;
    double loosen = 1;
  };
  std::string backend_;
  std::vector<Case> cases_;
};

}  // namespace lathe::test
