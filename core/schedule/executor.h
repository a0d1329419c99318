// executor.h — running a compiled Program on host tensors, and profiling it.
//
// A backend compiles a Program into a KernelLauncher (one entry point per kernel, the
// calling convention of loop_ir.h). An Executable pairs the two: it binds symbolic dims
// from the input shapes, plans memory once per set of dim values (the arena and, for
// profiling, the output tensors are allocated once and reused across runs), launches the
// kernels in order and returns the outputs. profile() times every kernel over N runs and
// reports medians, FLOPs, bytes and the share of the machine ceiling.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/host_tensor.h"
#include "core/runtime/profile.h"
#include "core/schedule/memory_plan.h"
#include "core/schedule/program.h"

namespace lathe {

using TensorMap = std::map<std::string, HostTensor>;

// Binds symbolic dims from concrete sizes one dim at a time (the executor's inputs, the C
// API's caller-owned buffers): a constant dim must match, a name takes the first value it
// sees and must agree after, an expression (B*T) is checked by finish() once every name is
// bound. `where` names the dim in messages, `want` the expected type and shape.
class DimBinder {
 public:
  void bind(const SymInt& s, int64_t v, const std::string& where, const std::string& want);
  Bindings finish() const;

 private:
  Bindings b_;
  std::vector<std::pair<SymInt, std::pair<int64_t, std::string>>> later_;  // expressions to check
};

class KernelLauncher {
 public:
  virtual ~KernelLauncher() = default;
  // Runs kernel `kernel` with buffers[p] = its p-th LoopFunc buffer, dims[d] = dim values.
  virtual void launch(int kernel, void* const* buffers, const int64_t* dims) = 0;
  // Device backends. A run is bracketed by begin_run/end_run so launches can be queued
  // and transfers skipped: `upload` says the inputs may have changed since the last run
  // (copy them again); `download` asks for the results in the host buffers at end_run.
  // launch() outside a bracket must behave as a whole run (upload, run, download).
  virtual void begin_run(bool upload) {}
  virtual void end_run(bool download) {}
  // [tiered backends] blocks until the optimized code has replaced the quick first tier's
  // (the llvm backend's tiered compile); a no-op elsewhere. Timing and profiling call it first.
  virtual void finish_tiers() {}
  // [device backends] kernel k's time in the last run, measured on the device; < 0 if none.
  virtual double device_ms(int kernel) const { return -1; }
  // [device backends] where the memory plan's arena lives on the host (intermediates are
  // host_arena + plan offset), so the device can mirror the plan with one arena of its own.
  virtual void bind_arena(const std::byte* host_arena, int64_t bytes) {}
  // [device backends] the device's ceilings for the profile's roofline (GFLOP/s, GB/s);
  // false keeps the host's (machine_ceiling()).
  virtual bool device_ceiling(double& gflops, double& gbps) { return false; }
  // Whether the kernels read exactly the buffers the program's loops (Program::funcs) read.
  // A device backend that renders loops of its own (cuda: the plain loops) may read a
  // constant that the CPU loops read only through its packed copy, so a freed computed
  // weight (prepack.cpp) is computed again and bound for it.
  virtual bool runs_program_loops() const { return true; }
  // Backends that run whole graphs (the interpreter) override these instead.
  virtual bool runs_whole_graph() const { return false; }
  virtual TensorMap run_graph(const Graph& g, const TensorMap& inputs, TensorMap* updated) { return {}; }
};

class Executable {
 public:
  Executable(Program program, std::shared_ptr<KernelLauncher> launcher, std::string backend);

  const Program& program() const { return program_; }
  Program& program() { return program_; }   // schedule edits; then set_launcher(recompiled)
  const std::string& backend() const { return backend_; }
  void set_launcher(std::shared_ptr<KernelLauncher> l) {
    launcher_ = std::move(l);
    bound_.valid = false;  // the new launcher learns the arena (bind_arena) on the next run
  }

  // Runs once; returns fresh output tensors (keyed by output name). Assign results also go
  // to *updated, keyed by the target input's name.
  TensorMap run(const TensorMap& inputs, TensorMap* updated = nullptr);
  // Runs `warmup` + `iters` times, reusing buffers; per-kernel medians.
  ProfileReport profile(const TensorMap& inputs, int iters = 20, int warmup = 2);
  // Median milliseconds of whole-program runs (buffers reused): what `lathe bench` reports.
  // On a device backend the inputs are uploaded on the first run only and the results
  // stay on the device except after the last run, so transfers are not timed.
  double time_ms(const TensorMap& inputs, int iters = 10, int warmup = 2);

  const MemoryPlan& memory_plan() const { return bound_.plan; }  // after the first run
  // Waits for a tiered backend's optimized code (KernelLauncher::finish_tiers); time_ms and
  // profile call it before they time anything.
  void finish_tiers() { launcher_->finish_tiers(); }

 private:
  struct Bound {
    bool valid = false;
    Bindings dims;
    std::vector<int64_t> dim_values;      // in Program::kg.symbols order
    MemoryPlan plan;
    std::shared_ptr<std::byte[]> arena;
    int64_t arena_capacity = 0;
    std::vector<HostTensor> outputs;      // per buffer (Output kind), reused when asked
    std::vector<void*> ptrs;              // per buffer
    std::vector<bool> read;               // per buffer: some kernel loads or stores it
  };
  void bind(const TensorMap& inputs, bool fresh_outputs);
  void launch_all(std::vector<double>* kernel_ms, std::vector<TraceEvent>* events, double t_origin_us);
  void use_device_times(std::vector<double>& kernel_ms, std::vector<TraceEvent>* events, double t_origin_us);
  TensorMap collect(const TensorMap& inputs, TensorMap* updated, bool clone);

  Program program_;
  std::shared_ptr<KernelLauncher> launcher_;
  std::string backend_;
  Bound bound_;
};

}  // namespace lathe
