// llvm_backend.cpp — the `llvm` backend (the default): loop IR -> LLVM IR (emit.h) -> the
// kernel pipeline (jit.h) for the host CPU -> object code (kernels compiled on all hardware threads,
// compile_program.h) -> ORC LLJIT, all in process. Object files go through the on-disk
// kernel cache, so a warm compile is a hash, a file read and a link. A tiered compile
// (CompileOptions::tier, `lathe run`; on unless LATHE_TIER=0) starts on a kernel-cache miss
// with the quick tier (jit.h) for the codes tier_plan.h picks, the others optimized at once,
// and compiles the quick ones' full tier from the end of the first run (or when
// finish_tiers() asks): on its own thread, the kernels' function pointers swapped when it is
// loaded, all the optimized objects written under the key an untiered compile uses. A program
// dropped before then leaves the thread to finish (keep_background_compile), so a one-shot
// run still leaves the optimized code in the cache for the next start; with
// CompileOptions::detach_tier (a one-shot `lathe run`) the runs do not start it and a dropped
// program leaves it to a detached child process (detach_background_compiles) holding a lock
// beside the full entry, which a start missing that entry waits on (LATHE_TIER_WAIT_MS).
//
// Supports every dtype (f16 and bf16 as storage types, computed in f32) and every
// primitive op; Extern kernels call the library (backends/library.h) between JIT kernels.
#include <sys/stat.h>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <atomic>
#include <cstdio>
#include <unordered_map>

#include "backends/backend.h"
#include "backends/kernel_dedup.h"
#include "backends/kernel_param.h"
#include "backends/library.h"
#include "backends/llvm/compile_program.h"
#include "backends/llvm/emit.h"
#include "backends/llvm/pool_stats.h"
#include "backends/llvm/jit.h"
#include "backends/llvm/parallel.h"
#include "backends/llvm/tier_plan.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/runtime/kernel_cache.h"

namespace lathe {

namespace {

using KernelFn = void (*)(void* const*, const int64_t*);

std::string module_text(const std::vector<const loop::LoopFunc*>& fs) {
  llvm::LLVMContext ctx;
  auto m = llvmjit::emit_module(fs, ctx, fs.size() == 1 ? fs[0]->name : "program");
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return os.str();
}

// The kernels that become machine code (extern kernels call the library instead).
std::vector<const loop::LoopFunc*> kernel_funcs(const Program& p) {
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs)
    if (f.kind != "extern") fs.push_back(&f);
  return fs;
}

bool read_file(const std::string& path, std::vector<char>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !out.empty();
}

// Kernels equal up to shape constants run one generic code (kernel_param.h); it reads the
// program's dims followed by this kernel's own values.
// LATHE_LLVM_SHAPE_PARAMS=class (the default): kernels share a code only when their serial
// loops' trip counts fall in the same size classes (kernel_param.h); =1: serial trip counts
// under 32 stay constants; =all: every trip count is free (fewest codes, but short loops in a
// code shared with long ones run slower); =hoist: class, and literals the innermost loops only
// use in values they do not change (hoisted: a GEMM's K block as a stride of the panel
// index) are free too (kernel_param.h); =0: off.
std::string shape_params_mode() {
  const char* e = std::getenv("LATHE_LLVM_SHAPE_PARAMS");
  return e && *e ? e : "class";
}
int64_t shape_params_min_trip() {
  std::string m = shape_params_mode();
  return m == "all" ? INT64_MIN : m == "class" ? kShapeParamClasses : m == "hoist" ? kShapeParamHoist : 32;
}
bool shape_params_on() { return shape_params_mode() != "0"; }

// LATHE_TIER: a tiered compile where the caller allows one (CompileOptions::tier). Unset or 1:
// on, the codes that start quick picked by their cost (tier_plan.h); 0: off (every code
// optimized before the first run); all: every code starts quick (the first, opt-in tier's
// choice, for comparisons: it made GPT-2's first run 7x slower).
std::string tier_mode() {
  const char* e = std::getenv("LATHE_TIER");
  std::string s = e ? e : "";
  return s == "0" ? "" : s == "all" ? "all" : "cost";
}

// LATHE_TIER_WAIT_MS: how long a start that misses the full entry waits for another process
// writing it (a one-shot run's detached full tier) before it starts on the quick code (1000).
double tier_wait_ms() {
  const char* e = std::getenv("LATHE_TIER_WAIT_MS");
  return e && *e ? std::atof(e) : 1000;
}

// Read a cached bundle of objects and load it; nullptr when absent or corrupt (then removed).
std::unique_ptr<llvmjit::LoadedCode> load_cached(const std::string& path, const std::string& name,
                                                 const std::vector<const loop::LoopFunc*>& codes) {
  std::vector<char> blob;
  std::vector<std::vector<char>> objects;
  if (path.empty() || !read_file(path, blob)) return nullptr;
  try {
    if (!llvmjit::unpack_objects(blob, objects)) throw UserError("not an object bundle");
    auto code = llvmjit::load_objects(objects, name);
    for (const loop::LoopFunc* f : codes)
      if (!code->lookup(f->name)) throw UserError("missing symbol");
    return code;
  } catch (const std::exception&) {
    std::remove(path.c_str());  // corrupt entry: rebuild, never trust it
    return nullptr;
  }
}

class LlvmProgram;

// What the full tier needs to compile the codes that started quick, shared by the program
// and the thread that compiles it (which may outlive the program).
struct TierJob {
  std::vector<loop::LoopFunc> codes;           // the codes that started quick
  std::vector<std::vector<char>> ready;        // the other codes' optimized objects
  llvmjit::DimRanges ranges;
  std::string path;                            // the full entry ("" without the cache)
  std::vector<std::string> parts;              // the partial entries it replaces
  std::string name;                            // the JITDylib's name
  std::mutex mu;                               // guards owner
  LlvmProgram* owner = nullptr;                // null once the program is gone
};

class LlvmProgram : public CompiledProgram {
 public:
  // code_name: kernel name -> the name its code was compiled under (kernel_dedup.h);
  // values: kernel name -> the values of that code's extra dims (kernel_param.h);
  // args: kernel name -> the order in which its code takes its buffers, where not theirs
  // (SameCode::args)
  LlvmProgram(const Program& p, std::unique_ptr<llvmjit::LoadedCode> code,
              const std::unordered_map<std::string, std::string>& code_name,
              const std::unordered_map<std::string, std::vector<int64_t>>& values,
              const std::unordered_map<std::string, std::vector<int>>& args)
      : program_(p), symbols_(p.kg.symbols.size()), fns_(new std::atomic<KernelFn>[p.funcs.size()]) {
    for (auto& f : p.funcs) {
      params_.emplace_back();
      args_.emplace_back();
      code_of_.push_back(f.kind == "extern" ? "" : code_name.at(f.name));
      if (auto it = values.find(f.name); it != values.end()) params_.back() = it->second;
      if (auto it = args.find(f.name); it != args.end()) args_.back() = it->second;
    }
    install(std::move(code));
  }
  ~LlvmProgram() override {
    if (job_) {
      std::lock_guard<std::mutex> lock(job_->mu);
      job_->owner = nullptr;
    }
    keep_background_compile(std::move(upgrade_));  // its code still reaches the cache
    if (job_ && detach_ && !full_started_ && !job_->path.empty()) {
      std::shared_ptr<TierJob> job = job_;
      keep_detached_compile({job->path + ".lock", [job] {
                               struct stat st {};
                               if (::stat(job->path.c_str(), &st) == 0) return;  // written meanwhile
                               compile_full_tier(job);
                             }});
    }
  }
  // Tiered: some codes start quick; `job` compiles their full tier.
  void set_job(std::shared_ptr<TierJob> job) {
    job_ = std::move(job);
    job_->owner = this;
  }

  void launch(int k, void* const* bufs, const int64_t* dims) override {
    if (!llvmjit::pool_stats_enabled()) return run_kernel(k, bufs, dims);
    llvmjit::stats_kernel_begin(program_.funcs[static_cast<size_t>(k)].name.c_str());
    run_kernel(k, bufs, dims);
    llvmjit::stats_kernel_end();
  }
  void run_kernel(int k, void* const* bufs, const int64_t* dims) {
    KernelFn fn = fns_[static_cast<size_t>(k)].load(std::memory_order_acquire);
    if (!fn) return run_library_kernel(program_.kg.kernels.at(k).root, bufs);
    const std::vector<int>& order = args_[k];
    constexpr size_t kLocalBufs = 32;
    void* reordered[kLocalBufs];
    std::vector<void*> reordered_heap;
    if (!order.empty()) {  // a code shared with a kernel that lists its buffers in another order
      void** to = reordered;
      if (order.size() > kLocalBufs) {
        reordered_heap.resize(order.size());
        to = reordered_heap.data();
      }
      for (size_t j = 0; j < order.size(); ++j) to[j] = bufs[order[j]];
      bufs = to;
    }
    const std::vector<int64_t>& ps = params_[k];
    if (ps.empty()) return fn(bufs, dims);
    constexpr size_t kLocal = 64;
    int64_t local[kLocal];
    std::vector<int64_t> heap;
    int64_t* all = local;
    if (symbols_ + ps.size() > kLocal) {
      heap.resize(symbols_ + ps.size());
      all = heap.data();
    }
    for (size_t d = 0; d < symbols_; ++d) all[d] = dims[d];
    std::copy(ps.begin(), ps.end(), all + symbols_);
    fn(bufs, all);
  }
  // A tiered program compiles its full tier once its first run is done (the first result is
  // not kept waiting; a one-shot `lathe run` under LATHE_TIER_DETACH=0 waits for it before it
  // exits).
  // (Not with CompileOptions::tier_up false: then only finish_tiers() compiles it.)
  // (Nor with CompileOptions::detach_tier: then a child process compiles it once the program
  // is dropped, detach_background_compiles().)
  void begin_run(bool) override {
    if (llvmjit::pool_stats_enabled()) llvmjit::stats_run_begin();
  }
  void end_run(bool) override {
    if (tier_up_ && !detach_) start_full_tier();
  }
  void set_tier_up(bool on, bool detach) {
    tier_up_ = on;
    detach_ = on && detach;
  }
  void finish_tiers() override {
    start_full_tier();
    if (upgrade_.joinable()) upgrade_.join();
  }
  std::string source(int k) const override {
    const auto& f = program_.funcs.at(k);
    if (f.kind == "extern") { const std::string& nm = program_.kg.kernels.at(k).root->attrs.name; return "; library call: " + nm + (nm == "sgemm" ? " (OpenBLAS)\n" : "\n"); }
    return module_text({&f});
  }
  std::string full_source() const override { return module_text(kernel_funcs(program_)); }
  std::string assembly(int k) const override {
    if (program_.funcs.at(k).kind == "extern") return source(k);
    llvm::LLVMContext ctx;
    auto m = llvmjit::emit_module({&program_.funcs.at(k)}, ctx, program_.funcs.at(k).name);
    return llvmjit::compile_module(*m, false, true).assembly;
  }

 private:
  // Points every kernel at its code in `code` (kept alive with the program: a launch on
  // another thread may still be running the code it replaces).
  // partial: `code` holds only some codes (the full tier of those that started quick); the
  // others keep theirs.
  void install(std::unique_ptr<llvmjit::LoadedCode> code, bool partial = false) {
    for (size_t k = 0; k < code_of_.size(); ++k) {
      if (code_of_[k].empty()) { fns_[k].store(nullptr, std::memory_order_release); continue; }
      auto* fn = reinterpret_cast<KernelFn>(code->lookup(code_of_[k]));
      if (!fn && partial) continue;
      LATHE_CHECK(fn, "llvm backend: compiled module lacks kernel " + program_.funcs[k].name);
      fns_[k].store(fn, std::memory_order_release);
    }
    std::lock_guard<std::mutex> lock(codes_mu_);
    codes_.push_back(std::move(code));
  }
  void start_full_tier() {
    if (!job_ || full_started_) return;  // once: not again after finish_tiers joined it
    full_started_ = true;
    upgrade_ = std::thread(compile_full_tier, job_);
  }
  // The full tier's thread: compiles, writes the full entry (the partial ones go), and
  // swaps the code in while the program lives.
  static void compile_full_tier(std::shared_ptr<TierJob> job) {
    try {
      std::vector<const loop::LoopFunc*> codes;
      for (auto& f : job->codes) codes.push_back(&f);
      auto objects = llvmjit::compile_kernels(codes, 0, &job->ranges);
      if (!job->path.empty()) {
        std::vector<std::vector<char>> all = job->ready;
        all.insert(all.end(), objects.begin(), objects.end());
        atomic_write(job->path, llvmjit::pack_objects(all));
        for (auto& part : job->parts)
          if (!part.empty()) std::remove(part.c_str());
      }
      std::lock_guard<std::mutex> lock(job->mu);
      if (job->owner) job->owner->install(llvmjit::load_objects(objects, job->name), /*partial=*/true);
    } catch (const std::exception& e) {  // the quick code stays: slower, still right
      std::fprintf(stderr, "warning: llvm: the optimized tier failed, the quick code stays: %s\n", e.what());
    }
  }

  Program program_;
  size_t symbols_;
  std::unique_ptr<std::atomic<KernelFn>[]> fns_;  // per kernel; nullptr: a library call
  std::vector<std::string> code_of_;              // per kernel: its code's symbol ("" for extern)
  std::vector<std::vector<int64_t>> params_;
  std::vector<std::vector<int>> args_;            // per kernel: SameCode::args
  std::mutex codes_mu_;
  std::vector<std::unique_ptr<llvmjit::LoadedCode>> codes_;
  std::shared_ptr<TierJob> job_;
  bool full_started_ = false;
  bool tier_up_ = true;                           // CompileOptions::tier_up
  bool detach_ = false;                           // CompileOptions::detach_tier
  std::thread upgrade_;
};

class LlvmBackend : public Backend {
 public:
  std::string name() const override { return "llvm"; }
  std::string description() const override {
    return "LLVM 19 IR, optimized for the host CPU (" + llvmjit::host_cpu() + "), ORC JIT in process, cached";
  }
  std::string supports(NodeRef n) const override {
    return library_kernel_available(n);
  }
  std::string render(const Program& p, int kernel) const override {
    if (p.funcs.at(kernel).kind == "extern") return "; library call: " + p.kg.kernels.at(kernel).root->attrs.name + "\n";
    return module_text({&p.funcs.at(kernel)});
  }

  std::string render_optimized(const Program& p, int kernel) const override {
    if (p.funcs.at(kernel).kind == "extern") return render(p, kernel);
    llvm::LLVMContext ctx;
    auto m = llvmjit::emit_module({&p.funcs.at(kernel)}, ctx, p.funcs.at(kernel).name);
    return llvmjit::compile_module(*m, true, false).optimized_ir;
  }

  // A tiered start (the full entry missed): the codes tier_plan.h picks compile quick, the
  // others optimized, each part from its own cache entry when there. Sets `code` (null when
  // no code starts quick, or a partial entry was bad: then the caller compiles untiered) and
  // returns the job that compiles the quick codes' full tier.
  static std::shared_ptr<TierJob> start_tiered(const Program& p, const std::vector<loop::LoopFunc>& plan_codes,
                                               const std::vector<const loop::LoopFunc*>& codes,
                                               const std::unordered_map<std::string, std::string>& code_name,
                                               const llvmjit::DimRanges& ranges, std::vector<std::string> key_parts,
                                               const std::string& path, const std::string& dylib, bool use_cache,
                                               std::unique_ptr<llvmjit::LoadedCode>& code, bool& cached) {
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto est = llvmjit::plan_tiers(p, codes, code_name, threads, tier_mode());
    std::vector<const loop::LoopFunc*> full, quick;
    std::string full_names = "full:", quick_names = "quick:";
    static const bool timing = [] { const char* e = std::getenv("LATHE_LLVM_TIMING"); return e && *e && *e != '0'; }();
    for (size_t c = 0; c < codes.size(); ++c) {
      (est[c].quick ? quick : full).push_back(codes[c]);
      (est[c].quick ? quick_names : full_names) += codes[c]->name + ",";
      if (timing)
        std::fprintf(stderr, "llvm-tier: %s %s: run ~%.3f ms, full compile ~%.0f ms%s\n", codes[c]->name.c_str(),
                     est[c].quick ? "quick" : "full", est[c].run_ms, est[c].compile_ms, est[c].known ? "" : " (sizes unknown)");
    }
    if (quick.empty()) return nullptr;
    // the partial entries' keys: the program's, the part's pipeline and the part's codes
    auto part_path = [&](bool q, const std::string& names) -> std::string {
      if (!use_cache) return "";
      std::vector<std::string> k = key_parts;
      k[2] = llvmjit::pipeline_id(q);
      k.push_back("tier-part=" + names);
      return cache_path("llvm", cache_key(std::vector<std::string_view>(k.begin(), k.end())) + ".o");
    };
    auto job = std::make_shared<TierJob>();
    job->parts = {full.empty() ? "" : part_path(false, full_names), part_path(true, quick_names)};
    bool hits[2] = {full.empty(), false};
    auto objects_of = [&](const std::vector<const loop::LoopFunc*>& fs, bool q) {
      const std::string& ppath = job->parts[q];
      std::vector<char> blob;
      std::vector<std::vector<char>> objs;
      if (!ppath.empty() && read_file(ppath, blob) && llvmjit::unpack_objects(blob, objs)) {
        hits[q] = true;
        return objs;
      }
      objs = llvmjit::compile_kernels(fs, 0, &ranges, q);
      if (!ppath.empty()) atomic_write(ppath, llvmjit::pack_objects(objs));
      return objs;
    };
    if (!full.empty()) job->ready = objects_of(full, false);
    std::vector<std::vector<char>> all = job->ready, quick_objs = objects_of(quick, true);
    all.insert(all.end(), quick_objs.begin(), quick_objs.end());
    try {
      code = llvmjit::load_objects(all, "t" + dylib);
      for (const loop::LoopFunc* f : codes)
        if (!code->lookup(f->name)) throw UserError("missing symbol " + f->name);
    } catch (const std::exception&) {  // a bad partial entry: drop both, compile untiered
      code.reset();
      for (auto& part : job->parts)
        if (!part.empty()) std::remove(part.c_str());
      return nullptr;
    }
    cached = hits[0] && hits[1];
    for (auto& f : plan_codes)
      for (const loop::LoopFunc* q : quick)
        if (q == &f) job->codes.push_back(f);
    job->ranges = ranges;
    job->path = path;
    job->name = dylib;
    return job;
  }

  std::shared_ptr<CompiledProgram> compile(const Program& p, const CompileOptions& o) override {
    if (auto why = supports_graph(p.graph); !why.empty()) throw UserError("backend 'llvm' cannot run " + why);
    auto t0 = std::chrono::steady_clock::now();
    // Kernels with the same loop IR are compiled once, under the first one's name; kernels
    // equal up to shape constants share a generic code (kernel_param.h). The key covers
    // everything that determines the object code: the loop IR of every kernel (names
    // included), the CPU, and this backend's code-generation version.
    std::vector<const loop::LoopFunc*> all = kernel_funcs(p), distinct;
    SameCode same = same_code(all);
    std::unordered_map<std::string, std::string> code_name;
    std::unordered_map<std::string, std::vector<int64_t>> values;
    std::unordered_map<std::string, std::vector<int>> args;
    std::string ir;
    for (size_t i = 0; i < all.size(); ++i) {
      // the key leaves the buffers' order out; the compiled code takes them in its own
      ir += all[i]->name + "\n" + same.keys[i] + "\norder";
      for (int b : same.orders[i]) ir += " " + std::to_string(b);
      ir += "\n";
      if (same.is_first(i)) distinct.push_back(all[i]);
      if (!same.args[i].empty()) args[all[i]->name] = same.args[i];
    }
    ShapeParamPlan plan = plan_shape_params(distinct, shape_params_on() ? 2 : SIZE_MAX, shape_params_min_trip());
    std::unordered_map<std::string, size_t> distinct_index;
    for (size_t d = 0; d < distinct.size(); ++d) distinct_index[distinct[d]->name] = d;
    for (size_t i = 0; i < all.size(); ++i) {
      size_t d = distinct_index.at(all[same.first[i]]->name);
      code_name[all[i]->name] = plan.codes[plan.code[d]].name;
      if (!plan.values[d].empty()) values[all[i]->name] = plan.values[d];
    }
    std::vector<const loop::LoopFunc*> codes;
    llvmjit::DimRanges ranges;
    for (size_t c = 0; c < plan.codes.size(); ++c) {
      codes.push_back(&plan.codes[c]);
      if (plan.bounds[c].empty()) continue;
      auto& r = ranges[plan.codes[c].name];
      r.assign(plan.first_param[c], {1, 0});  // the program's own dims: unknown
      r.insert(r.end(), plan.bounds[c].begin(), plan.bounds[c].end());
    }
    std::vector<std::string> key_parts = {"llvm", llvmjit::emitter_build_id(), llvmjit::pipeline_id(),
                                          "shape-params=" + shape_params_mode(), ir, llvmjit::host_cpu(),
                                          llvmjit::host_features_hash()};
    std::string key = cache_key(std::vector<std::string_view>(key_parts.begin(), key_parts.end()));
    std::string path = o.use_cache ? cache_path("llvm", key + ".o") : "";
    std::string dylib = "k" + key.substr(0, 8);
    std::unique_ptr<llvmjit::LoadedCode> code = load_cached(path, dylib, codes);
    bool cached = code != nullptr;
    // another process may be writing the full entry (a one-shot run's detached full tier):
    // wait a little for it, then start on the quick code
    bool still_compiling = false;
    if (!code && o.tier && !path.empty()) {
      LockWait w = wait_unlocked(path + ".lock", tier_wait_ms());
      if (w == LockWait::kReleased) code = load_cached(path, dylib, codes);
      still_compiling = w == LockWait::kStillHeld;
      cached = code != nullptr;
    }
    std::shared_ptr<TierJob> job;
    if (!code && o.tier && !tier_mode().empty()) {
      job = start_tiered(p, plan.codes, codes, code_name, ranges, key_parts, path, dylib, o.use_cache, code, cached);
    }
    if (!code) {
      auto objects = llvmjit::compile_kernels(codes, 0, &ranges);  // on every hardware thread
      if (!path.empty()) atomic_write(path, llvmjit::pack_objects(objects));
      code = llvmjit::load_objects(objects, dylib);
    }
    auto cp = std::make_shared<LlvmProgram>(p, std::move(code), code_name, values, args);
    if (job) {
      cp->quick_codes = static_cast<int>(job->codes.size());
      cp->set_job(std::move(job));
      cp->set_tier_up(o.tier_up, o.detach_tier);
    }
    cp->codes_compiled = static_cast<int>(codes.size());
    cp->from_cache = cached;
    cp->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    cp->command = std::string("LLVM ") + llvmjit::pipeline_id() + " -mcpu=" + llvmjit::host_cpu() +
                  (cached ? " (cached object)" : "");
    if (cp->quick_codes > 0)
      cp->command += " (quick tier for " + std::to_string(cp->quick_codes) + " of " + std::to_string(codes.size()) +
                     " codes: " + llvmjit::pipeline_id(true) +
                     (still_compiling ? "; the full tier still compiling in another process)"
                      : !o.tier_up || (o.detach_tier && !o.use_cache) ? "; the full tier only when asked)"
                      : o.detach_tier && o.use_cache ? "; the full tier in a detached process after the first result)"
                                                     : "; the full tier from the end of the first run)");
    return cp;
  }
};

// library kernels (gemv_q4) run their parallel work on this backend's pool (library.h)
static void pool_chunk(void* const* b, const int64_t*, const int64_t*, int64_t begin, int64_t end) {
  reinterpret_cast<LibraryChunkFn>(b[0])(b[1], begin, end);
}
static void pool_parallel_for(LibraryChunkFn fn, void* ctx, int64_t n) {
  void* b[2] = {reinterpret_cast<void*>(fn), ctx};
  llvmjit::lathe_llvm_parallel_for(pool_chunk, b, nullptr, nullptr, n);
}
static const bool kLibraryPool [[maybe_unused]] = (set_library_parallel_for(pool_parallel_for), true);

LATHE_REGISTER_BACKEND(LlvmBackend);

}  // namespace

}  // namespace lathe
