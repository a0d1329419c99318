// backend.h — THE backend interface: one short struct of operations (ggml style), and the
// registry that finds backends by name at run time.
//
// A backend turns a Program (kernels as loop IR, core/schedule/program.h) into something
// that runs: CompiledProgram, which is a KernelLauncher (core/schedule/executor.h) plus
// the rendered source. The Executable pairs the two and owns buffers, binding, timing.
//
//   Backend& b = get_backend("c");                       // UserError if unknown
//   Executable e = compile_graph(g, "c");                 // build_program + compile
//   TensorMap out = e.run({{"x", x}});
//   ProfileReport r = e.profile({{"x", x}}, 20);
//
// Backends register themselves with LATHE_REGISTER_BACKEND(Type) from a file in their own
// static library (backends/NAME/); the app links those whole-archive, so linking the
// library is all it takes. Buffers are host memory for the CPU backends; a device backend
// (cuda) allocates device memory behind launch() and copies in and out (optional ops below).
#pragma once
#include <memory>
#include <string>
#include <functional>
#include <thread>
#include <vector>

#include "core/schedule/executor.h"
#include "core/schedule/program.h"

namespace lathe {

struct CompileOptions {
  bool use_cache = true;        // read/write the on-disk kernel cache
  std::string extra_flags;      // appended to the compiler command line (c backend)
  // May the backend compile tiered (llvm; on unless LATHE_TIER=0): on a kernel-cache miss,
  // the kernels whose slower quick code costs a run less than the compile time it saves start
  // on quickly compiled code (the rest are optimized at once, as untiered); their optimized
  // code compiles in the background from the end of the first run (or finish_tiers()), is
  // swapped in when ready and written to the cache. A program dropped before then leaves that
  // compile to finish: wait_background_compiles() waits for it. `lathe run` allows it (and
  // waits before it exits); false by default.
  bool tier = false;
  // Tiered: whether the optimized code compiles from the end of the first run (true), or only
  // when finish_tiers() asks (false: the quick code it started on is cached and a later start
  // loads it; `lathe run` without --iters or profiling under LATHE_TIER_UP=0).
  bool tier_up = true;
  // Tiered, a one-shot caller (`lathe run` without --iters or profiling; LATHE_TIER_DETACH=0
  // turns it off): the optimized code does not compile from the end of the first run in this
  // process; a program dropped with it not compiled leaves it to detach_background_compiles()
  // (a child process that writes it to the kernel cache). Not without the cache: then nothing
  // compiles it (finish_tiers() still does, in process).
  bool detach_tier = false;
};

// What compile() returns: runs kernels (KernelLauncher::launch) and shows their code.
class CompiledProgram : public KernelLauncher {
 public:
  // The source of kernel i in the backend's language (C, LLVM IR, CUDA C).
  virtual std::string source(int kernel) const = 0;
  // The whole translation unit / module, when the backend has one.
  virtual std::string full_source() const { return ""; }
  // [optional] assembly of kernel i; "" when the backend cannot show it.
  virtual std::string assembly(int kernel) const { return ""; }
  double compile_ms = 0;        // time spent rendering + compiling (0 when cached)
  bool from_cache = false;      // loaded from the kernel cache
  int codes_compiled = -1;      // distinct machine codes behind the kernels (-1: not reported)
  int quick_codes = 0;          // of them, those a tiered compile started quick (CompileOptions::tier)
  std::string command;          // the compiler invocation, for the curious
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "interp", "c", "llvm", "cuda" — the name users pass to --backend.
  virtual std::string name() const = 0;
  // One line for `lathe help` and errors.
  virtual std::string description() const = 0;
  // "" when usable on this machine; otherwise why not ("no C compiler: 'cc' not found").
  virtual std::string available() const { return ""; }
  // "" when the backend can compile here (source, assembly, a program to inspect) even if it
  // cannot run: cuda compiles with NVRTC, which needs no driver. Default: available().
  virtual std::string can_compile() const { return available(); }
  // "" when the backend can run this node; otherwise why not ("f16 is not supported by c").
  virtual std::string supports(NodeRef n) const = 0;
  // The source of kernel i, without compiling (for --show source, and for backends whose
  // toolkit is missing: cuda still renders).
  virtual std::string render(const Program& p, int kernel) const = 0;
  // [optional] kernel i's source after the backend's own optimizer (llvm: the IR after its
  // O3 pipeline); "" when the backend has no such stage.
  virtual std::string render_optimized(const Program& p, int kernel) const { return ""; }
  // Compiles a program. UserError on failure (with the compiler's first lines).
  virtual std::shared_ptr<CompiledProgram> compile(const Program& p, const CompileOptions& o = {}) = 0;
  // [optional] several programs in one go (one compiler invocation for the C backend).
  virtual std::vector<std::shared_ptr<CompiledProgram>> compile_many(const std::vector<const Program*>& ps,
                                                                     const CompileOptions& o = {});

  // [device backends] the peers and ceilings `lathe bench` and the profiler measure a
  // device's kernels against, in place of the CPU's (triad, OpenBLAS, machine_ceiling):
  // copy bandwidth in GB/s (bytes read + written), the vendor BLAS's n×n×n sgemm in ms,
  // and the f32 peak in GFLOP/s. < 0 (and *why) where the backend has none.
  virtual double device_copy_gbps(std::string* why) { return -1; }
  virtual double device_sgemm_ms(int n, int iters, std::string* why) { return -1; }
  virtual double device_peak_gflops(std::string* why) { return -1; }

  // The first node of g this backend cannot run, as "node %12 (Exp2 f16[4]): why"; "" if none.
  std::string supports_graph(const Graph& g) const;
};

// ---- registry ---------------------------------------------------------------------------
void register_backend(std::shared_ptr<Backend> b);
Backend* find_backend(const std::string& name);     // nullptr when unknown
Backend& get_backend(const std::string& name);      // UserError listing the known names
std::vector<std::string> backend_names();           // registered, sorted
std::string default_backend();                      // "llvm" when built, else "c", else "interp"

// Compiles a backend finishes after their program was dropped (the llvm backend's full tier,
// CompileOptions::tier): kept here so that their code still reaches the kernel cache.
void keep_background_compile(std::thread t);
// Waits for every kept compile; `lathe run` calls it after it printed its results. (At exit,
// whatever is still running is waited for too.)
void wait_background_compiles();

// A compile that may finish in a detached child process after the caller's results are out
// (the llvm full tier of a one-shot `lathe run`, CompileOptions::detach_tier): `run` compiles
// and writes its kernel-cache entry (atomic_write); lock_path (try_lock_exclusive) is held from
// before the fork until the child exits, so a start that misses the entry meanwhile can wait
// for it (wait_unlocked), and a second writer does not start.
struct DetachedCompile {
  std::string lock_path;
  std::function<void()> run;
};
void keep_detached_compile(DetachedCompile c);
// Waits for the in-process compiles (wait_background_compiles), then forks one child (its own
// session, stdin/stdout/stderr on /dev/null, no other descriptors but the locks) that runs every
// kept detached compile whose lock this process got, one after the other, and exits. Returns
// its pid, or 0 when there was nothing to run (every lock held elsewhere, or none kept) or the
// fork failed (then they run here, before it returns). The caller does not wait for the child.
int detach_background_compiles();

// build_program + checks (known, available, supports) + compile: the one call most users need.
Executable compile_graph(const Graph& g, const std::string& backend, const BuildOptions& build = {},
                         const CompileOptions& opts = {});

struct BackendRegistrar {
  explicit BackendRegistrar(std::shared_ptr<Backend> b) { register_backend(std::move(b)); }
};

}  // namespace lathe

#define LATHE_BACKEND_CONCAT_(a, b) a##b
#define LATHE_BACKEND_CONCAT(a, b) LATHE_BACKEND_CONCAT_(a, b)
#define LATHE_REGISTER_BACKEND(Type) \
  static ::lathe::BackendRegistrar LATHE_BACKEND_CONCAT(lathe_backend_, __LINE__)(std::make_shared<Type>())
