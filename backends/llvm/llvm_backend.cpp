// llvm_backend.cpp — the `llvm` backend (the default): loop IR -> LLVM IR (emit.h) -> the
// kernel pipeline (jit.h) for the host CPU -> object code (kernels compiled on all hardware threads,
// compile_program.h) -> ORC LLJIT, all in process. Object files go through the on-disk
// kernel cache, so a warm compile is a hash, a file read and a link. A tiered compile
// (CompileOptions::tier, `lathe run`) starts on a kernel-cache miss with the quick tier
// (jit.h) and compiles the full tier when the program runs a second time or finish_tiers()
// asks: on its own thread, the kernels' function pointers swapped when it is loaded, the
// objects written under the key an untiered compile uses.
//
// Supports every dtype (f16 and bf16 as storage types, computed in f32) and every
// primitive op; Extern kernels call the library (backends/library.h) between JIT kernels.
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

// LATHE_TIER=1: a tiered compile where the caller allows one (CompileOptions::tier); off by
// default. Measured (lathe bench --models, 3 locked rounds at load 6.5-10, medians): cold start
// mobilenet_v2 2.55 -> 1.05 s, unet_small 3.84 -> 1.77, resnet50 6.34 -> 2.25, gpt2_small (one
// round) 6.48 -> 4.60; but the next start loads the quick tier's entry (no process ran twice
// to compile the full one) and runs slower code: warm start 0.29 -> 0.45, 0.32 -> 1.11,
// 1.02 -> 1.71, 2.86 -> 5.79 s. Median of timed runs unchanged (they wait for the full tier).
bool tier_env_on() {
  const char* e = std::getenv("LATHE_TIER");
  return e && std::string(e) == "1";
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

// What the full tier needs to compile a program's codes after compile() returned quick ones.
struct PendingTier {
  std::vector<loop::LoopFunc> codes;
  llvmjit::DimRanges ranges;
  std::string path;  // the full tier's cache entry ("" without the cache)
  std::string name;  // the JITDylib's name
};

class LlvmProgram : public CompiledProgram {
 public:
  // code_name: kernel name -> the name its code was compiled under (kernel_dedup.h);
  // values: kernel name -> the values of that code's extra dims (kernel_param.h)
  LlvmProgram(const Program& p, std::unique_ptr<llvmjit::LoadedCode> code,
              const std::unordered_map<std::string, std::string>& code_name,
              const std::unordered_map<std::string, std::vector<int64_t>>& values)
      : program_(p), symbols_(p.kg.symbols.size()), fns_(new std::atomic<KernelFn>[p.funcs.size()]) {
    for (auto& f : p.funcs) {
      params_.emplace_back();
      code_of_.push_back(f.kind == "extern" ? "" : code_name.at(f.name));
      if (auto it = values.find(f.name); it != values.end()) params_.back() = it->second;
    }
    install(std::move(code));
  }
  ~LlvmProgram() override {
    if (upgrade_.joinable()) upgrade_.join();
  }
  // Tiered: the program starts on quick code; `pending` compiles the full tier.
  void set_pending(PendingTier pending) { pending_ = std::make_unique<PendingTier>(std::move(pending)); }

  void launch(int k, void* const* bufs, const int64_t* dims) override {
    if (!llvmjit::pool_stats_enabled()) return run_kernel(k, bufs, dims);
    llvmjit::stats_kernel_begin(program_.funcs[static_cast<size_t>(k)].name.c_str());
    run_kernel(k, bufs, dims);
    llvmjit::stats_kernel_end();
  }
  void run_kernel(int k, void* const* bufs, const int64_t* dims) {
    KernelFn fn = fns_[static_cast<size_t>(k)].load(std::memory_order_acquire);
    if (!fn) return run_library_kernel(program_.kg.kernels.at(k).root, bufs);
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
  // A tiered program compiles its full tier when it runs a second time: a one-shot run
  // never pays for it, a program run many times gets the optimized code soon.
  void begin_run(bool) override {
    if (++runs_ == 2) start_full_tier();
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
  void install(std::unique_ptr<llvmjit::LoadedCode> code) {
    for (size_t k = 0; k < code_of_.size(); ++k) {
      if (code_of_[k].empty()) { fns_[k].store(nullptr, std::memory_order_release); continue; }
      auto* fn = reinterpret_cast<KernelFn>(code->lookup(code_of_[k]));
      LATHE_CHECK(fn, "llvm backend: compiled module lacks kernel " + program_.funcs[k].name);
      fns_[k].store(fn, std::memory_order_release);
    }
    std::lock_guard<std::mutex> lock(codes_mu_);
    codes_.push_back(std::move(code));
  }
  void start_full_tier() {
    if (!pending_ || full_started_) return;  // once: not again after finish_tiers joined it
    full_started_ = true;
    upgrade_ = std::thread([this] {
      try {
        std::vector<const loop::LoopFunc*> codes;
        for (auto& f : pending_->codes) codes.push_back(&f);
        auto objects = llvmjit::compile_kernels(codes, 0, &pending_->ranges);
        if (!pending_->path.empty()) atomic_write(pending_->path, llvmjit::pack_objects(objects));
        install(llvmjit::load_objects(objects, pending_->name));
      } catch (const std::exception& e) {  // the quick code stays: slower, still right
        std::fprintf(stderr, "warning: llvm: the optimized tier failed, the quick code stays: %s\n", e.what());
      }
    });
  }

  Program program_;
  size_t symbols_;
  std::unique_ptr<std::atomic<KernelFn>[]> fns_;  // per kernel; nullptr: a library call
  std::vector<std::string> code_of_;              // per kernel: its code's symbol ("" for extern)
  std::vector<std::vector<int64_t>> params_;
  std::mutex codes_mu_;
  std::vector<std::unique_ptr<llvmjit::LoadedCode>> codes_;
  std::unique_ptr<PendingTier> pending_;
  int runs_ = 0;
  bool full_started_ = false;
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
    std::string ir;
    for (size_t i = 0; i < all.size(); ++i) {
      ir += all[i]->name + "\n" + same.keys[i] + "\n";
      if (same.is_first(i)) distinct.push_back(all[i]);
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
    std::string key = cache_key({"llvm", llvmjit::emitter_build_id(), llvmjit::pipeline_id(),
                                 "shape-params=" + shape_params_mode(), ir, llvmjit::host_cpu(),
                                 llvmjit::host_features_hash()});
    std::string path = o.use_cache ? cache_path("llvm", key + ".o") : "";
    std::string dylib = "k" + key.substr(0, 8);
    std::unique_ptr<llvmjit::LoadedCode> code = load_cached(path, dylib, codes);
    bool cached = code != nullptr, quick = false;
    if (!code && o.tier && tier_env_on()) {
      // tiered: the quick tier now (from its own cache entry when there), the full tier later
      std::string qkey = cache_key({"llvm", llvmjit::emitter_build_id(), llvmjit::pipeline_id(true),
                                    "shape-params=" + shape_params_mode(), ir, llvmjit::host_cpu(),
                                    llvmjit::host_features_hash()});
      std::string qpath = o.use_cache ? cache_path("llvm", qkey + ".o") : "";
      code = load_cached(qpath, "q" + qkey.substr(0, 8), codes);
      cached = code != nullptr;
      if (!code) {
        auto objects = llvmjit::compile_kernels(codes, 0, &ranges, /*quick=*/true);
        if (!qpath.empty()) atomic_write(qpath, llvmjit::pack_objects(objects));
        code = llvmjit::load_objects(objects, "q" + qkey.substr(0, 8));
      }
      quick = true;
    }
    if (!code) {
      auto objects = llvmjit::compile_kernels(codes, 0, &ranges);  // on every hardware thread
      if (!path.empty()) atomic_write(path, llvmjit::pack_objects(objects));
      code = llvmjit::load_objects(objects, dylib);
    }
    auto cp = std::make_shared<LlvmProgram>(p, std::move(code), code_name, values);
    if (quick) cp->set_pending({std::move(plan.codes), std::move(ranges), path, dylib});
    cp->codes_compiled = static_cast<int>(codes.size());
    cp->from_cache = cached;
    cp->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    cp->command = std::string("LLVM ") + llvmjit::pipeline_id(quick) + " -mcpu=" + llvmjit::host_cpu() +
                  (cached ? " (cached object)" : "") + (quick ? " (quick tier; the full tier from the second run)" : "");
    return cp;
  }
};

LATHE_REGISTER_BACKEND(LlvmBackend);

}  // namespace

}  // namespace lathe
