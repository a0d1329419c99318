// cmd_run.cpp — `lathe run FILE`: loads a graph, fills the inputs (from .npy files or
// seeded random data), runs it on a backend, prints each output with a NumPy-like preview
// and optionally writes DIR/NAME.npy, a per-node profile and a Chrome trace.
//
//   lathe run FILE|--sample NAME [--backend B] [--input NAME=PATH]… [--bind SYM=N]… [--output-dir DIR]
//                  [--seed N] [--profile] [--profile-json OUT.json] [--trace OUT.json] [--iters N] [--stats]
//
// --stats prints where the time went (load, build, compile, first run; with --iters N the
// median of N more runs) and the peak resident memory as one `stats: {JSON}` line; `lathe
// bench --models` runs `lathe run` in a child process and reads it. Outputs written with
// --output-dir go to a temp name and are renamed into place.
//
// Backends come from the registry (backends/backend.h); the default is default_backend()
// (llvm when built). --profile prints per-node times for interp and the per-kernel
// table (time, GFLOP/s, GB/s, share of the machine ceiling) for compiled backends.
#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "app/load_model.h"
#include "backends/backend.h"
#include "backends/kernel_dedup.h"
#include "core/interp/interp.h"
#include "core/ir/diag.h"
#include "core/frontend/samples.h"
#include "core/loop/cost.h"
#include "core/loop/pack_defer.h"
#include "core/runtime/npy.h"
#include "core/runtime/random.h"
#include "core/runtime/tensor_cache.h"
#include "core/tune/records.h"
#ifdef HAVE_LATHE_IMPORT
#include "core/import/onnx_staged.h"
#endif

namespace lathe::app {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
// the process's CPU time so far (all threads, user + system), ms
double process_cpu_ms() {
  struct rusage r {};
  getrusage(RUSAGE_SELF, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

// --stats: where a run's time went.
struct RunStats {
  double load_ms = 0, build_ms = 0, compile_ms = 0, first_run_ms = 0, median_ms = -1, min_ms = -1;
  std::vector<double> runs_ms;  // --iters: each timed run, in order
  double full_tier_ms = -1;  // --iters with a tiered compile: the wait for the optimized code
  std::string tier;          // "quick" when the first run ran the quick tier (llvm)
  int quick_codes = 0;       // the codes that started quick (the rest: optimized at once)
  bool count_work = false;  // --stats: fill gflop
  double gflop = -1;  // the program's work per run (loop/cost.h's count), in GFLOP
  double faults_per_run = -1;  // page faults (minor + major) per timed run
  double cpu_ms = -1;  // the process's CPU time (all threads, user + system) per timed run
  int kernels = 0, distinct_kernels = 0, distinct_up_to_constants = 0, codes_compiled = -1, iters = 0;
  bool from_cache = false;
  // --stats' timeline: each phase's end, wall ms since the process start and the process's
  // CPU ms (all threads) by then; build_program's stages (Program::passes), wall ms
  std::vector<std::pair<std::string, std::pair<double, double>>> marks;
  std::vector<std::pair<std::string, double>> stages;
  Clock::time_point origin;
  double result_ms = -1;  // wall ms from the process start to the first run's results
  double pack_fill_ms = -1;  // the deferred weight packing's wall time on its thread
  void mark(const char* phase) { marks.push_back({phase, {ms_since(origin), process_cpu_ms()}}); }
};

struct RunResult {
  TensorMap outputs, updated;
  std::vector<NodeTiming> timings;  // per node (interp)
  std::optional<ProfileReport> report;  // per kernel (compiled backends)
};

RunResult run_on_backend(const std::string& backend, const Graph& g, const TensorMap& inputs, const Bindings& binds,
                         bool want_timings, int iters, RunStats& st, const std::string& tuned, const std::string& graph) {
  RunResult r;
  if (backend == "interp") {
    InterpOptions o;
    o.bindings = binds;
    o.updated = &r.updated;
    if (want_timings) o.timings = &r.timings;
    auto t0 = Clock::now();
    r.outputs = interpret(g, inputs, o);
    st.first_run_ms = ms_since(t0);
    return r;
  }
  // compile_graph, in its steps, timed
  Backend& b = get_backend(backend);
  if (std::string why = b.available(); !why.empty()) throw UserError("backend '" + backend + "' is not available here: " + why);
  if (std::string why = b.supports_graph(g); !why.empty()) throw UserError("backend '" + backend + "' cannot run " + why);
  auto t0 = Clock::now();
  // LATHE_PACK_BACKGROUND=1: the large weights' packed copies filled on a thread of their own
  // while the build goes on and the backend compiles (pack_defer.h); the first run waits for
  // them. Off by default: at load 4-6 it moved GPT-2's packing off the build thread (prepack
  // 1003-1142 -> 277-346 ms) but cost ~300 ms more CPU (copy-on-write faults), and the first
  // result moved 4140 -> 3846 and 3363 -> 3458 ms: no gain shown on this loaded 2-core host.
  const char* pb = std::getenv("LATHE_PACK_BACKGROUND");
  auto filler = pb && std::string(pb) == "1" ? std::make_unique<loop::PackFiller>() : nullptr;
  Program p = [&] {
    loop::DeferPacks defer(filler.get());
    return build_program(g);
  }();
  // tuning records (`lathe tune`): --tuned FILE, else the default file when it exists
  tune::ApplyReport applied = tune::apply_records(p, tune::load_tuned(tuned), tune::target_of(backend), graph);
  for (auto& n : applied.notes) std::cerr << "note: " << n << "\n";
  st.build_ms = ms_since(t0);
  for (auto& ps : p.passes) st.stages.push_back({ps.name, ps.ms});
  st.mark("build");
  t0 = Clock::now();
  // a tiered compile (llvm, unless LATHE_TIER=0): quick code for the first run where it pays;
  // the optimized code compiles (and is cached) from the end of the first run: the timed runs
  // below wait for it, a one-shot run waits before the process exits (run_run), so that the
  // next start loads the optimized code.
  // LATHE_TIER_UP=0: a one-shot run (no --iters, no profiling) does not compile it; its quick
  // code is cached and the next start loads that. Off by default: it cut the vision models'
  // cold exit to their first result (mobilenet_v2 2.87/6.59 -> 1.10/1.88 s, resnet50
  // 12.57/12.73 -> 6.39/6.93 s, locked bench pairs at load 4-9) but the warm start ran the
  // quick code: mobilenet_v2 0.46/0.64 -> 0.57/0.88 s, unet_small 0.41/0.66 -> 0.78/0.88,
  // resnet50 1.34/1.53 -> 2.17/2.27.
  CompileOptions co;
  co.tier = true;
  static const bool tier_up_env = [] { const char* e = std::getenv("LATHE_TIER_UP"); return !(e && std::string(e) == "0"); }();
  co.tier_up = tier_up_env || iters > 0 || want_timings;
  // A one-shot run (no --iters, no profiling) leaves the optimized code to a detached child
  // process (detach_background_compiles, run_run): the process exits at its first result and
  // the next start loads the optimized code, or waits for it (LATHE_TIER_WAIT_MS).
  // LATHE_TIER_DETACH=0: the process compiles it and waits, as before.
  static const bool detach_env = [] { const char* e = std::getenv("LATHE_TIER_DETACH"); return !(e && std::string(e) == "0"); }();
  co.detach_tier = detach_env && iters == 0 && !want_timings;
  auto compiled = b.compile(p, co);
  st.compile_ms = ms_since(t0);
  st.mark("compile");
  if (compiled->quick_codes > 0) st.tier = "quick";
  st.quick_codes = compiled->quick_codes;
  st.from_cache = compiled->from_cache;
  st.codes_compiled = compiled->codes_compiled;
  Executable exe(std::move(p), std::move(compiled), backend);
  if (filler) {
    filler->wait();
    st.mark("packs");
    st.pack_fill_ms = filler->busy_ms();
  }
  t0 = Clock::now();
  r.outputs = exe.run(inputs, &r.updated);
  st.first_run_ms = ms_since(t0);
  st.mark("first_run");
  st.result_ms = st.marks.back().second.first;
  {  // --stats' counts, after the first result (not on the cold start's path)
    const Program& q = exe.program();
    st.kernels = q.num_kernels();
    std::vector<const loop::LoopFunc*> fs;
    for (auto& f : q.funcs) fs.push_back(&f);
    st.distinct_kernels = static_cast<int>(same_code(fs).distinct());
    st.distinct_up_to_constants = static_cast<int>(distinct_up_to_constants(fs));
    if (st.count_work) {
      st.gflop = 0;
      for (auto& f : q.funcs) st.gflop += loop::estimate_cost(f, q.kg, binds).flops / 1e9;
    }
  }
  if (iters > 0 || want_timings) {
    // the timed and the profiled runs use the optimized code, not the first run's quick tier
    t0 = Clock::now();
    exe.finish_tiers();
    if (!st.tier.empty()) st.full_tier_ms = ms_since(t0);
  }
  if (iters > 0) {
    std::vector<double> t;
    struct rusage r0 {};
    getrusage(RUSAGE_SELF, &r0);
    for (int i = 0; i < iters; ++i) {
      auto t1 = Clock::now();
      exe.run(inputs);
      t.push_back(ms_since(t1));
    }
    struct rusage r1 {};
    getrusage(RUSAGE_SELF, &r1);
    auto cpu_s = [](const struct rusage& r) {
      return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
    };
    st.cpu_ms = (cpu_s(r1) - cpu_s(r0)) * 1000 / iters;
    st.faults_per_run = static_cast<double>(r1.ru_minflt - r0.ru_minflt + r1.ru_majflt - r0.ru_majflt) / iters;
    st.runs_ms = t;
    std::sort(t.begin(), t.end());
    st.iters = iters;
    st.min_ms = t.front();
    st.median_ms = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  }
  if (want_timings) r.report = exe.profile(inputs, std::max(10, iters));  // --iters N: N profiled calls
  return r;
}

// A malformed command line (exit code 2, unlike a UserError's 1).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::pair<std::string, std::string> split_pair(const std::string& s, const char* flag) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw UsageError(std::string(flag) + " expects NAME=VALUE, got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

// ---- NumPy-like preview -----------------------------------------------------------------

std::string format_value(const HostTensor& t, int64_t i) {
  if (t.dtype() == DType::Bool) return t.get_i64(i) ? "True" : "False";
  if (t.dtype() == DType::U64) return std::to_string(static_cast<uint64_t>(t.get_i64(i)));
  if (!is_float(t.dtype())) return std::to_string(t.get_i64(i));
  double v = t.get_f64(i);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".";
  return s;
}

struct Preview {
  const HostTensor& t;
  bool summarize;              // over 1000 elements: 3 items at each edge of every dim
  static constexpr int64_t kEdge = 3;
  size_t width = 0;
  std::vector<int64_t> strides;

  explicit Preview(const HostTensor& tensor) : t(tensor), summarize(tensor.numel() > 1000) {
    strides.assign(t.rank(), 1);
    for (size_t d = t.rank(); d-- > 1;) strides[d - 1] = strides[d] * t.shape()[d];
  }
  // The indices shown along a dim (-1 marks the "..." gap).
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> v;
    if (summarize && n > 2 * kEdge) {
      for (int64_t i = 0; i < kEdge; ++i) v.push_back(i);
      v.push_back(-1);
      for (int64_t i = n - kEdge; i < n; ++i) v.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) v.push_back(i);
    }
    return v;
  }
  void measure(size_t dim, int64_t off) {
    if (dim == t.rank()) { width = std::max(width, format_value(t, off).size()); return; }
    for (int64_t i : shown(t.shape()[dim])) if (i >= 0) measure(dim + 1, off + i * strides[dim]);
  }
  void print(std::ostream& os, size_t dim, int64_t off) {
    if (dim == t.rank()) {
      std::string s = format_value(t, off);
      os << std::string(width - s.size(), ' ') << s;
      return;
    }
    os << "[";
    auto idx = shown(t.shape()[dim]);
    bool last_dim = dim + 1 == t.rank();
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k) {
        os << ",";
        if (last_dim) os << " ";
        else os << std::string(t.rank() - dim - 1, '\n') << std::string(dim + 1, ' ');
      }
      if (idx[k] < 0) os << "...";
      else print(os, dim + 1, off + idx[k] * strides[dim]);
    }
    os << "]";
  }
  std::string str() {
    if (t.numel() == 0) return "[]";
    measure(0, 0);
    std::ostringstream os;
    print(os, 0, 0);
    return os.str();
  }
};

void print_tensor(const std::string& label, const HostTensor& t) {
  std::cout << label << ": " << dtype_name(t.dtype()) << t.shape_string() << "\n" << Preview(t).str() << "\n";
}

// ---- outputs, profile, trace ----------------------------------------------------------

// Written to a temp name beside it and renamed into place: no half-written .npy.
void write_output(const std::filesystem::path& dir, const std::string& name, const HostTensor& t) {
  std::string path = (dir / (name + ".npy")).string();
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    if (t.dtype() == DType::BF16) {
      write_npy(tmp, cast_tensor(t, DType::F32));
      std::cout << "  (" << name << " is bf16; NumPy has none, written as f32)\n";
    } else {
      write_npy(tmp, t);
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw UserError("cannot write " + path + ": " + ec.message());
  }
}

std::string node_label(NodeRef n) {
  std::string s = "%" + std::to_string(n->id) + " " + std::string(op_name(n->op));
  if (n->op == Op::Reduce) s += "{" + std::string(reduce_op_name(n->attrs.reduce)) + "}";
  if (n->op == Op::Extern) s += "{" + n->attrs.name + "}";
  return s;
}

void print_profile(const std::vector<NodeTiming>& timings) {
  double total = 0;
  for (auto& t : timings) total += t.dur_us;
  std::vector<NodeTiming> sorted = timings;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.dur_us > b.dur_us; });
  std::printf("\nprofile (backend interp, one row per node, slowest first)\n");
  std::printf("  %-24s %-22s %10s %7s  %s\n", "node", "result", "ms", "%", "provenance");
  size_t shown = std::min<size_t>(sorted.size(), 25);
  for (size_t i = 0; i < shown; ++i) {
    const auto& t = sorted[i];
    std::string result = std::string(dtype_name(t.node->dtype)) + shape_to_string(t.node->shape);
    std::printf("  %-24s %-22s %10.3f %6.1f%%  %s\n", node_label(t.node).c_str(), result.c_str(), t.dur_us / 1e3,
                total > 0 ? 100 * t.dur_us / total : 0.0, t.node->prov.path.c_str());
  }
  if (sorted.size() > shown) std::printf("  … %zu more nodes\n", sorted.size() - shown);
  std::printf("  total %.3f ms over %zu nodes\n", total / 1e3, timings.size());
}

void write_trace(const std::string& path, const std::vector<NodeTiming>& timings) {
  nlohmann::json events = nlohmann::json::array();
  for (auto& t : timings) {
    events.push_back({{"name", node_label(t.node)},
                      {"cat", "interp"},
                      {"ph", "X"},
                      {"ts", t.start_us},
                      {"dur", t.dur_us},
                      {"pid", 1},
                      {"tid", 1},
                      {"args",
                       {{"dtype", std::string(dtype_name(t.node->dtype))},
                        {"shape", shape_to_string(t.node->shape)},
                        {"provenance", t.node->prov.path}}}});
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  std::ofstream f(path);
  if (!f) throw UserError("cannot write trace '" + path + "'");
  f << doc.dump(1) << "\n";
  if (!f) throw UserError("cannot write trace '" + path + "'");
}

// ---- the command ------------------------------------------------------------------------

struct RunFlags {
  std::string tuned;  // --tuned: records file ("none": no records; "": the default file)
  int iters = 0;
  bool stats = false;
  std::string profile_json;  // --profile-json: the per-kernel profile as JSON, in launch order
  Clock::time_point start;
  RunStats st;
};

int run_parsed(const Graph& g, const std::string& file, const std::string& backend, const std::vector<std::string>& input_args,
               const std::vector<std::string>& bind_args, const std::string& output_dir, uint64_t seed, bool profile,
               const std::string& trace, RunFlags& flags);

// An ONNX model whose shapes depend on its input values (load_onnx reports a dynamic
// shape) runs through the staged executor (core/import/onnx_staged.h): segment programs
// compiled per input shapes, data-dependent ops and run-time Loop / If on the host.
// Every input must be given (--input).
int run_staged_onnx(const std::string& file, const std::string& backend, const std::vector<std::string>& input_args,
                    const std::string& output_dir) {
#ifdef HAVE_LATHE_IMPORT
  KeyedLru<std::shared_ptr<Executable>> cache(64);  // programs by segment key (bounded)
  int64_t compiled = 0;
  SegmentRunner run = [&](const Graph& g, const std::string& key, const TensorMap& ins) {
    if (backend == "interp") return interpret(g, ins);
    std::shared_ptr<Executable>* e = cache.find(key);
    if (!e) e = &cache.put(key, std::make_shared<Executable>(compile_graph(g, backend))), ++compiled;
    return (*e)->run(ins);
  };
  StagedOnnx model(file, {}, run);
  TensorMap inputs;
  for (auto& s : input_args) {
    auto [name, path] = split_pair(s, "--input");
    inputs[name] = read_npy(path);
  }
  std::string missing;
  for (auto& [name, dt] : model.input_dtypes())
    if (!inputs.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  if (!missing.empty())
    throw UserError(file + " decides shapes from its input values, so it runs staged with every input given: "
                    "--input NAME=PATH.npy is missing for " + missing);
  TensorMap out = model.run(inputs);
  std::filesystem::path dir(output_dir);
  if (!output_dir.empty()) std::filesystem::create_directories(dir);
  for (auto& [name, t] : out) {
    print_tensor(name, t);
    if (!output_dir.empty()) write_output(dir, name, t);
  }
  const StagedStats& st = model.stats();
  std::cout << "staged: " << st.segments << " segment runs, " << compiled << " programs compiled, " << st.host_ops
            << " host ops, " << st.iterations << " loop iterations\n";
  return 0;
#else
  (void)backend, (void)input_args, (void)output_dir;
  throw UserError(file + " decides shapes from its input values; running it staged needs ONNX support (libonnx-dev)");
#endif
}

int run_run(const std::vector<std::string>& args) {
  CLI::App app{"Compile and run a graph. Inputs not given are filled with seeded random data\n"
               "(floats: standard normal; integers: uniform in [0, 10); bool: coin flips).",
               "lathe run"};
  std::string file, backend = default_backend(), output_dir, trace;
  std::vector<std::string> input_args, bind_args;
  int64_t seed = 0;
  bool profile = false;
  std::string sample;
  auto* file_opt = app.add_option("FILE", file, "graph to run: .lathe, .lua or .onnx (an ONNX model that decides shapes from its input values runs staged: give every --input)");
  auto* sample_opt = app.add_option("--sample", sample, "a built-in sample or bench workload instead of FILE (e.g. mlp, gpt2-block)");
  file_opt->excludes(sample_opt);
  app.add_option("--backend", backend, "interp | c | llvm | cuda (see `lathe help`)")->capture_default_str();
  app.add_option("--input", input_args, "NAME=PATH.npy: the value of input NAME (repeatable)");
  app.add_option("--bind", bind_args, "SYM=N: a symbolic dim's value when no input implies it (repeatable)");
  app.add_option("--output-dir", output_dir, "write each output (and each input updated by Assign) as DIR/NAME.npy");
  app.add_option("--seed", seed, "seed for the random inputs")->capture_default_str()->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_flag("--profile", profile, "print the per-node (interp) or per-kernel time table");
  app.add_option("--trace", trace, "write a Chrome trace-event JSON (open it in Perfetto)");
  RunFlags flags;
  app.add_option("--profile-json", flags.profile_json,
                 "write the per-kernel profile as JSON (launch order, output shape, source ONNX nodes, median us; "
                 "compiled backends; scripts/compare-profile.py reads it)");
  flags.start = Clock::now();
  app.add_option("--iters", flags.iters, "after the first run, time N more (median and min in --stats)")
      ->check(CLI::Range(0, 100000));
  app.add_flag("--stats", flags.stats,
               "print `stats: {JSON}`: load, build, compile and first-run ms, run medians, GFLOP per run, peak resident memory");
  app.add_option("--tuned", flags.tuned, "tuning records to apply (`lathe tune`; default: the records file in the cache dir, 'none': no records)");
  std::string qdq_sat16 = "auto";
  add_qdq_sat16_option(app, qdq_sat16);
  if (int rc = parse_cli(app, args); rc >= 0) return rc;
  apply_qdq_sat16_option(qdq_sat16);
  if (file.empty() && sample.empty()) {
    std::cerr << "lathe run: give FILE or --sample NAME\nRun with --help for more information.\n";
    return 2;
  }
  try {
    auto t0 = Clock::now();
    Graph g;
    try {
      // an imported model's attention fused as LATHE_FLASH_ATTENTION says (load_model.h)
      g = sample.empty() ? load_model(file, backend) : build_sample(sample);
    } catch (const UserError& e) {
      bool onnx = file.size() > 5 && file.compare(file.size() - 5, 5, ".onnx") == 0;
      if (!onnx || !onnx_needs_staged(e.what())) throw;
      return run_staged_onnx(file, backend, input_args, output_dir);
    }
    flags.st.load_ms = ms_since(t0);
    flags.st.origin = flags.start;
    flags.st.mark("load");
    int rc = run_parsed(g, sample.empty() ? file : "sample " + sample, backend, input_args, bind_args, output_dir,
                        static_cast<uint64_t>(seed), profile, trace, flags);
    // the results are out; a tiered compile's optimized code (llvm) may still be compiling
    // for the kernel cache: the process waits for it, so the next start loads that code, or
    // (CompileOptions::detach_tier) hands it to a detached child and exits now
    std::cout.flush();
    detach_background_compiles();
    return rc;
  } catch (const UsageError& e) {
    std::cerr << "lathe run: " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  }
}

int run_parsed(const Graph& g, const std::string& file, const std::string& backend, const std::vector<std::string>& input_args,
               const std::vector<std::string>& bind_args, const std::string& output_dir, uint64_t seed, bool profile,
               const std::string& trace, RunFlags& flags) {

  Bindings binds;
  for (auto& s : bind_args) {
    auto [name, value] = split_pair(s, "--bind");
    try {
      size_t used = 0;
      long long v = std::stoll(value, &used);
      if (used != value.size() || v < 0) throw std::invalid_argument(value);
      binds[name] = v;
    } catch (const std::exception&) {
      throw UsageError("--bind " + s + ": expected a non-negative integer after '='");
    }
  }

  TensorMap inputs;
  for (auto& s : input_args) {
    auto [name, path] = split_pair(s, "--input");
    if (!g.input(name)) {
      std::string known;
      for (NodeRef in : g.inputs) known += (known.empty() ? "" : ", ") + in->attrs.name;
      throw UserError("--input " + name + ": " + file + " has no input named '" + name + "' (inputs: " +
                      (known.empty() ? "none" : known) + ")");
    }
    inputs[name] = read_npy(path);
  }
  // Symbols implied by the given inputs size the random ones.
  if (!inputs.empty()) {
    Graph given = g;
    given.inputs.clear();
    for (NodeRef in : g.inputs)
      if (inputs.count(in->attrs.name)) given.inputs.push_back(in);
    binds = bind_symbols(given, inputs, binds);
  }
  if (inputs.size() < g.inputs.size())
    for (auto& [name, t] : random_inputs(g, seed, binds)) inputs.emplace(name, std::move(t));

  flags.st.count_work = flags.stats;
  flags.st.mark("inputs");
  RunResult r = run_on_backend(backend, g, inputs, binds, profile || !trace.empty() || !flags.profile_json.empty(), flags.iters, flags.st, flags.tuned,
                                 file.rfind("sample ", 0) == 0 ? file : tune::graph_name(file));
  // process start to the first run's results (less exec); its --stats counts and --iters after
  double start_ms = flags.st.result_ms >= 0 ? flags.st.result_ms : ms_since(flags.start);

  std::filesystem::path dir(output_dir);
  if (!output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw UserError("cannot create output directory '" + output_dir + "': " + ec.message());
  }
  for (auto& [name, n] : g.outputs) {
    const HostTensor& t = r.outputs.at(name);
    print_tensor(name, t);
    if (!output_dir.empty()) write_output(dir, name, t);
  }
  for (auto& [name, t] : r.updated) {
    print_tensor(name + " (updated by Assign)", t);
    if (output_dir.empty()) continue;
    if (g.output(name)) {
      std::cout << "  (not writing " << name << ".npy: an output has that name)\n";
      continue;
    }
    write_output(dir, name, t);
  }
  if (!output_dir.empty()) std::cout << "wrote " << (dir / "").string() << "NAME.npy for each tensor above\n";
  if (profile && r.report) std::cout << "\n" << r.report->table();
  else if (profile) print_profile(r.timings);
  if (!trace.empty()) {
    if (r.report) r.report->write_trace(trace);
    else write_trace(trace, r.timings);
    std::cout << "wrote trace " << trace << "\n";
  }
  if (!flags.profile_json.empty()) {
    if (!r.report) throw UserError("--profile-json needs a compiled backend (c, llvm, cuda), not " + backend);
    r.report->write_json(flags.profile_json);
    std::cout << "wrote profile " << flags.profile_json << "\n";
  }
  if (flags.stats) {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const RunStats& st = flags.st;
    nlohmann::json j = {{"backend", backend},           {"load_ms", st.load_ms},       {"build_ms", st.build_ms},
                        {"compile_ms", st.compile_ms}, {"first_run_ms", st.first_run_ms}, {"start_ms", start_ms},
                        {"kernels", st.kernels},       {"distinct_kernels", st.distinct_kernels},
                        {"distinct_up_to_constants", st.distinct_up_to_constants},
                        {"from_cache", st.from_cache},   {"peak_rss_mb", ru.ru_maxrss / 1024.0}};
    if (st.codes_compiled >= 0) j["codes"] = st.codes_compiled;  // machine codes (llvm: shape-parametric sharing)
    if (st.gflop >= 0) j["gflop"] = st.gflop;
    if (!st.tier.empty()) j["tier"] = st.tier, j["quick_codes"] = st.quick_codes;
    if (st.full_tier_ms >= 0) j["full_tier_ms"] = st.full_tier_ms;
    if (st.iters) {
      j["iters"] = st.iters;
      j["median_ms"] = st.median_ms;
      j["min_ms"] = st.min_ms;
      if (st.iters <= 1000) j["runs_ms"] = st.runs_ms;  // in order: a warm-up still going, a burst of load
      j["cpu_ms"] = st.cpu_ms;
      j["faults_per_run"] = st.faults_per_run;
    }
    nlohmann::json marks = nlohmann::json::array(), stages = nlohmann::json::object();
    for (auto& [phase, at] : st.marks) marks.push_back({phase, at.first, at.second});
    for (auto& [stage, ms] : st.stages) stages[stage] = stages.value(stage, 0.0) + ms;
    j["timeline"] = marks;  // [phase, wall ms at its end, process CPU ms by then]
    j["build_stages_ms"] = stages;
    if (st.pack_fill_ms >= 0) j["pack_fill_ms"] = st.pack_fill_ms;
    // the packed weights' cache (tensor_cache.h): copies mapped, packed and stored, files ignored
    if (const TensorCacheStats pc = tensor_cache_stats(); pc.hits + pc.misses + pc.rejected)
      j["pack_cache"] = {{"hits", pc.hits}, {"misses", pc.misses}, {"rejected", pc.rejected},
                         {"mapped_mb", static_cast<double>(pc.bytes_mapped) / (1 << 20)}};
    std::cout << "stats: " << j.dump() << std::endl;
  }
  return 0;
}

LATHE_COMMAND("run", "run a graph on a backend: inputs from .npy or seeded random, outputs to .npy", run_run);

}  // namespace
}  // namespace lathe::app
