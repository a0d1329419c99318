// jit.cpp — LLJIT set-up, the optimization pipeline, object emission, loading. See jit.h.
#include "backends/llvm/jit.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/PassTimingInfo.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Pass.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/llvm/parallel.h"
#include "core/ir/diag.h"

namespace lathe::llvmjit {

namespace {

// The optimizer and code generator settings. LLVM's O3 pipeline (both vectorizers on, no
// runtime/partial unrolling) at CodeGenOptLevel::Aggressive, as before. Measured while
// looking for a cheaper cold compile (LATHE_LLVM_TIMING=each sums per-kernel CPU time):
// O1 and O2 cost about the same in total on resnet50 / mobilenet_v2 / unet_small (less
// cleaned-up IR makes more code for the code generator); turning off the code generator's
// Loop Strength Reduction saved ~15% of a cold start's CPU but made kernels slower
// (mobilenet_v2's Gemm 0.20 -> 0.35 ms, its first conv 0.47 -> 0.69 ms, per-kernel minimum
// of 30 runs each), so it stays on.
// Environment overrides, for A/B comparisons (all part of the cache key):
//   LATHE_LLVM_OPT=1|2|3      the optimizer's level (default 3)
//   LATHE_LLVM_PIPELINE=TEXT  a pass pipeline in opt's syntax instead ("default<O3>")
//   LATHE_LLVM_CODEGEN=0..3   the code generator's level (default 3)
//   LATHE_LLVM_LSR=0          no Loop Strength Reduction
//   LATHE_LLVM_QUICK_CODEGEN=0..3  the quick tier's code generator level (default 0)
//   LATHE_LLVM_NOALIAS=0      no scoped no-alias metadata on the buffers' loads and stores (emit.cpp)
//   LATHE_LLVM_ARGS=...       LLVM's own options ("-time-passes")
std::string env_or(const char* name, const char* fallback) {
  const char* e = std::getenv(name);
  return e && *e ? e : fallback;
}
const std::string& pipeline_override() { static const std::string s = env_or("LATHE_LLVM_PIPELINE", ""); return s; }
int env_level(const char* name, const char* fallback, int lo) {
  return std::clamp(std::atoi(env_or(name, fallback).c_str()), lo, 3);
}
int opt_level() { static const int l = env_level("LATHE_LLVM_OPT", "3", 1); return l; }
int codegen_level() { static const int l = env_level("LATHE_LLVM_CODEGEN", "3", 0); return l; }
// LATHE_LLVM_QUICK_CODEGEN=0..3: the quick tier's code generator level (default 0), for A/B
int quick_codegen_level() { static const int l = env_level("LATHE_LLVM_QUICK_CODEGEN", "0", 0); return l; }
bool keep_lsr() { static const bool k = env_or("LATHE_LLVM_LSR", "1") != "0"; return k; }
// The quick tier (jit.h): scalar clean-up only (allocas to registers, redundancies, folding,
// dead blocks), then the code generator at O0 (FastISel, the fast register allocator). Measured
// on mobilenet_v2 (LATHE_LLVM_TIMING, CPU ms): 310 against 1850 for the full tier, the first run
// ~2.5x slower. instcombine without its fixpoint check (one round is all this tier wants).
const char* kQuickPasses = "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg)";
}  // namespace
bool alias_scopes() { static const bool k = env_or("LATHE_LLVM_NOALIAS", "1") != "0"; return k; }
bool contract_dequantize() { static const bool k = env_or("LATHE_LLVM_CONTRACT_DQ", "0") == "1"; return k; }
namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct JitState {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex mu;  // guards jit
  std::atomic<int> dylib_counter{0};
  // TargetMachines for compile_module: one per concurrent compile (codegen with one
  // TargetMachine is not thread-safe); idle ones wait here for the next compile
  std::optional<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::mutex tm_mu;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_tms[2];  // [quick]: kept apart (the
  // code generator leaves state on a TargetMachine, FastISel's switch, that the full tier must not see)
};

std::string take_error(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

JitState& state() {
  static JitState* st = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    {  // code generator options (process-wide in LLVM), then LATHE_LLVM_ARGS
      std::vector<const char*> argv = {"lathe"};
      if (!keep_lsr()) argv.push_back("-disable-lsr");
      llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", nullptr, "LATHE_LLVM_ARGS");
    }
    auto* s = new JitState();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) throw UserError("LLVM cannot target this host: " + take_error(jtmb.takeError()));
    jtmb->setCodeGenOptLevel(static_cast<llvm::CodeGenOptLevel>(codegen_level()));
    s->jtmb = *jtmb;
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) throw UserError("LLVM JIT start-up failed: " + take_error(jit.takeError()));
    s->jit = std::move(*jit);
    // Generated kernels may call libm (expf, sinf …): resolve them from this process.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        s->jit->getDataLayout().getGlobalPrefix());
    if (gen) s->jit->getMainJITDylib().addGenerator(std::move(*gen));
    // Host runtime entry points, by address (no -rdynamic; see DEPS.md).
    llvm::orc::SymbolMap host;
    host[s->jit->mangleAndIntern("lathe_llvm_parallel_for")] = {
        llvm::orc::ExecutorAddr::fromPtr(&lathe_llvm_parallel_for), llvm::JITSymbolFlags::Exported};
    host[s->jit->mangleAndIntern("lathe_llvm_scratch_push")] = {
        llvm::orc::ExecutorAddr::fromPtr(&lathe_llvm_scratch_push), llvm::JITSymbolFlags::Exported};
    host[s->jit->mangleAndIntern("lathe_llvm_scratch_pop")] = {
        llvm::orc::ExecutorAddr::fromPtr(&lathe_llvm_scratch_pop), llvm::JITSymbolFlags::Exported};
    if (auto e = s->jit->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(host))))
      throw InternalError("LLVM JIT: cannot define host symbols: " + take_error(std::move(e)));
    return s;
  }();
  return *st;
}

class LoadedDylib : public LoadedCode {
 public:
  LoadedDylib(llvm::orc::JITDylib* jd) : jd_(jd) {}
  ~LoadedDylib() override {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    llvm::consumeError(st.jit->getExecutionSession().removeJITDylib(*jd_));
  }
  void* lookup(const std::string& symbol) override {
    auto& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    auto sym = st.jit->lookup(*jd_, symbol);
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
    return sym->toPtr<void*>();
  }

 private:
  llvm::orc::JITDylib* jd_;
};

// A TargetMachine for the duration of one compile (quick: one at the O0 code generator level).
class TmLease {
 public:
  explicit TmLease(bool quick) : st_(state()), quick_(quick) {
    std::lock_guard<std::mutex> lock(st_.tm_mu);
    auto& idle = st_.idle_tms[quick_];
    if (!idle.empty()) {
      tm_ = std::move(idle.back());
      idle.pop_back();
      return;
    }
    auto tm = st_.jtmb->createTargetMachine();
    if (!tm) throw UserError("LLVM cannot create a target machine: " + take_error(tm.takeError()));
    tm_ = std::move(*tm);
    if (quick_) tm_->setOptLevel(static_cast<llvm::CodeGenOptLevel>(quick_codegen_level()));
  }
  ~TmLease() {
    std::lock_guard<std::mutex> lock(st_.tm_mu);
    st_.idle_tms[quick_].push_back(std::move(tm_));
  }
  llvm::TargetMachine* operator->() const { return tm_.get(); }
  llvm::TargetMachine* get() const { return tm_.get(); }

 private:
  JitState& st_;
  bool quick_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

}  // namespace


const char* pipeline_id(bool quick) {
  static const std::string quick_id = std::string("quick;passes=") + kQuickPasses + ";cg=O" + std::to_string(quick_codegen_level()) +
                                      (alias_scopes() ? "" : "-no-alias-scopes") + (contract_dequantize() ? "-contract-dq" : "") + ";v1";
  if (quick) return quick_id.c_str();
  static const std::string id = [] {
    std::string s = "O" + std::to_string(opt_level()) + "-no-unroll;cg=O" + std::to_string(codegen_level()) +
                    (keep_lsr() ? "" : "-no-lsr") + (alias_scopes() ? "" : "-no-alias-scopes") +
                    (contract_dequantize() ? "-contract-dq" : "") + ";v3";
    if (!pipeline_override().empty()) s += ";passes=" + pipeline_override();
    if (const char* a = std::getenv("LATHE_LLVM_ARGS"); a && *a) s += ";llvm-args=" + std::string(a);
    return s;
  }();
  return id.c_str();
}

std::string host_cpu() { return llvm::sys::getHostCPUName().str(); }

std::string host_features_hash() {
  std::string f;
  for (auto& kv : llvm::sys::getHostCPUFeatures())
    if (kv.second) f += kv.first().str() + ",";
  return std::to_string(std::hash<std::string>()(f));
}

CompileOutput compile_module(llvm::Module& m, bool want_ir, bool want_asm, bool quick) {
  TmLease tm(quick);
  m.setDataLayout(tm->createDataLayout());
  m.setTargetTriple(tm->getTargetTriple().str());
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(m, &os))
      throw InternalError("llvm backend generated invalid IR: " + os.str());
  }
  // clang's pipeline at opt_level() (O3, see above) tuned for this TargetMachine, with both
  // vectorizers on and without runtime/partial unrolling (see jit.h); loops the loop IR asks
  // to unroll still are (llvm.loop metadata)
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopUnrolling = false;
  llvm::PassInstrumentationCallbacks pic;
  std::optional<llvm::StandardInstrumentations> si;
  if (llvm::TimePassesIsEnabled) {
    si.emplace(m.getContext(), false);
    si->registerCallbacks(pic, &mam);
  }
  llvm::PassBuilder pb(tm.get(), pto, std::nullopt, &pic);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  double t0 = thread_cpu_ms();
  llvm::ModulePassManager mpm;
  if (quick) {
    if (auto e = pb.parsePassPipeline(mpm, kQuickPasses))
      throw InternalError("llvm quick tier pipeline: " + take_error(std::move(e)));
  } else if (pipeline_override().empty()) {
    const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O1, llvm::OptimizationLevel::O2,
                                              llvm::OptimizationLevel::O3};
    mpm = pb.buildPerModuleDefaultPipeline(levels[opt_level() - 1]);
  } else if (auto e = pb.parsePassPipeline(mpm, pipeline_override())) {
    throw UserError("LATHE_LLVM_PIPELINE: " + take_error(std::move(e)));
  }
  mpm.run(m, mam);
  double t1 = thread_cpu_ms();

  CompileOutput out;
  out.opt_ms = t1 - t0;
  if (want_ir) {
    llvm::raw_string_ostream os(out.optimized_ir);
    m.print(os, nullptr);
  }
  auto emit = [&](llvm::CodeGenFileType type, llvm::Module& mod) {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, type))
      throw InternalError("LLVM target cannot emit this file type");
    pm.run(mod);
    if (llvm::TimePassesIsEnabled) llvm::reportAndResetTimings();
    return std::vector<char>(buf.begin(), buf.end());
  };
  if (want_asm) {
    auto clone = llvm::CloneModule(m);
    auto a = emit(llvm::CodeGenFileType::AssemblyFile, *clone);
    out.assembly.assign(a.begin(), a.end());
  }
  out.object = emit(llvm::CodeGenFileType::ObjectFile, m);
  out.codegen_ms = thread_cpu_ms() - t1;
  return out;
}

std::unique_ptr<LoadedCode> load_objects(const std::vector<std::vector<char>>& objects, const std::string& name) {
  JitState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  std::string dyname = name + "." + std::to_string(st.dylib_counter++);
  auto jd = st.jit->createJITDylib(dyname);
  if (!jd) throw InternalError("LLVM JIT: cannot create a dylib: " + take_error(jd.takeError()));
  jd->addToLinkOrder(st.jit->getMainJITDylib());
  for (size_t i = 0; i < objects.size(); ++i) {
    auto buf = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(objects[i].data(), objects[i].size()),
                                                    dyname + "." + std::to_string(i));
    if (auto e = st.jit->addObjectFile(*jd, std::move(buf))) {
      std::string why = take_error(std::move(e));
      llvm::consumeError(st.jit->getExecutionSession().removeJITDylib(*jd));
      throw UserError("LLVM JIT could not load compiled code (corrupt cache entry?): " + why);
    }
  }
  return std::make_unique<LoadedDylib>(&*jd);
}

}  // namespace lathe::llvmjit
