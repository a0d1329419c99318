// compiled.h — what the app knows about the compiled program it shows: the Executable
// (its Program: kernel graph, loop IR), the kernels' source and assembly as the backend
// renders them, the last profile, and the values of a run (for the inspector's stats).
//
// Views never link a backend or Lua: compiling, rendering source and reading the command
// layer's program `p` go through ProgramHooks, which app/cmd_gui.cpp fills in. Everything
// else (the loop IR, the profile, the interpreter run) uses core APIs directly.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/runtime/machine.h"
#include "core/runtime/profile.h"
#include "core/schedule/executor.h"

namespace lathe::tune {
class Measurer;
}

namespace lathe::views {

// Source and assembly of one kernel in the backend's language.
struct KernelCode {
  std::string source;
  std::string assembly;   // "" when the backend cannot show it
  std::string note;       // why not, or an error while rendering
};

// A program compiled off the UI thread: the Executable, the backend that made it, and
// the command layer's own state for it (opaque here), which publish() turns into `p`.
struct BuiltProgram {
  std::shared_ptr<Executable> exe;
  std::string backend;
  std::shared_ptr<void> handle;
};

struct ProgramHooks {
  // Compiles the graph shown with `backend` ("" = the default) through the command layer,
  // so the console's `p` is the same program. Returns "" or the error message. Runs on
  // the UI thread; the app uses it only when `build` is missing.
  std::function<std::string(const std::string& backend)> compile;
  // Compiles `g` with `backend` ("" = the default) without touching Lua, so the app can
  // call it on its worker thread (jobs.h). Throws UserError (unknown or unavailable
  // backend, an op it cannot run, a compile error).
  std::function<BuiltProgram(const Graph& g, const std::string& backend)> build;
  // UI thread: makes a built program the command layer's `p` (the console sees it).
  std::function<void(const BuiltProgram&)> publish;
  // The command layer's current program (Lua global `p`), nullptr when there is none.
  std::function<std::shared_ptr<Executable>()> program;
  // Kernel k's source (and its assembly when `assembly` is set).
  std::function<KernelCode(const Executable& exe, int k, bool assembly)> code;
  // Backend names usable on this machine, the default first.
  std::function<std::vector<std::string>()> backends;
  // The tuner's link to a backend (tune_job.h), both called on the worker thread: a
  // Measurer that times candidates of `p`'s kernels on `backend` (seeded random inputs,
  // symbolic dims from `dims`; throws UserError for a backend it cannot time on), and
  // compiling a program whose kernels are already scheduled (the tuned one) as `p` would be,
  // `as_compiled` being the schedules p:reset() goes back to.
  std::function<std::unique_ptr<tune::Measurer>(const Program& p, const std::string& backend, const Bindings& dims)> measurer;
  std::function<BuiltProgram(Program p, const std::string& backend, std::vector<loop::LoopFunc> as_compiled)> build_scheduled;
};

// Per-kernel text, filled lazily (rendering a kernel costs a few ms; assembly a compile).
struct KernelText {
  std::string loop;            // loop IR (core/loop/loop_print.h)
  bool have_loop = false;
  KernelCode code;
  bool have_source = false, have_asm = false;
};

struct Compiled {
  std::shared_ptr<Executable> exe;
  std::string backend;
  uint64_t graph_version = 0;                      // AppState::version it was compiled from
  std::unordered_map<uint32_t, int> kernel_of;     // primitive node id -> first kernel computing it
  std::vector<KernelText> text;                    // per kernel
  std::optional<ProfileReport> profile;            // after Profile
  uint64_t serial = 0;                             // bumps on every change (colour caches key on it)

  const Program& program() const { return exe->program(); }
  int num_kernels() const { return exe->program().num_kernels(); }
  // Median ms of kernel k in the profile, or -1.
  double kernel_ms(int k) const;
  double max_kernel_ms() const;
};

// Statistics of one node's value after a run (Inspector > Values).
struct NodeStats {
  bool ok = false;
  std::string error;              // why there are no values
  int64_t count = 0, nans = 0, infs = 0;
  double min = 0, max = 0, mean = 0, stddev = 0;
  std::vector<int64_t> hist;      // 24 bins over [min, max] of the finite values
  std::string preview;            // the first few values
  std::string dtype_shape;        // "f32 [4, 8]"
};

// The inputs of the last run (seeded random data) and the stats computed from it so far.
struct RunValues {
  uint64_t graph_version = 0;
  TensorMap inputs;
  std::string note;               // "random inputs, seed 0; B=64"
  std::map<uint32_t, NodeStats> stats;   // per node id, computed when first shown
};

}  // namespace lathe::views
