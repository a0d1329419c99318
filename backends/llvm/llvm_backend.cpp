// llvm_backend.cpp — the `llvm` backend (the default): loop IR -> LLVM IR (emit.h) -> the
// kernel pipeline (jit.h) for the host CPU -> object code (kernels compiled on all hardware threads,
// compile_program.h) -> ORC LLJIT, all in process. Object files go through the on-disk
// kernel cache, so a warm compile is a hash, a file read and a link.
//
// Supports every dtype (f16 and bf16 as storage types, computed in f32) and every
// primitive op; Extern kernels call the library (backends/library.h) between JIT kernels.
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "backends/backend.h"
#include "backends/kernel_dedup.h"
#include "backends/library.h"
#include "backends/llvm/compile_program.h"
#include "backends/llvm/emit.h"
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

class LlvmProgram : public CompiledProgram {
 public:
  // code_name: kernel name -> the name its code was compiled under (kernel_dedup.h)
  LlvmProgram(const Program& p, std::unique_ptr<llvmjit::LoadedCode> code,
              const std::unordered_map<std::string, std::string>& code_name)
      : program_(p), code_(std::move(code)) {
    for (auto& f : p.funcs) {
      if (f.kind == "extern") { fns_.push_back(nullptr); continue; }
      auto* fn = reinterpret_cast<KernelFn>(code_->lookup(code_name.at(f.name)));
      LATHE_CHECK(fn, "llvm backend: compiled module lacks kernel " + f.name);
      fns_.push_back(fn);
    }
  }
  void launch(int k, void* const* bufs, const int64_t* dims) override {
    if (KernelFn fn = fns_.at(k)) fn(bufs, dims);
    else run_library_kernel(program_.kg.kernels.at(k).root, bufs);
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
  Program program_;
  std::unique_ptr<llvmjit::LoadedCode> code_;
  std::vector<KernelFn> fns_;
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
    // Kernels with the same loop IR are compiled once, under the first one's name. The key
    // covers everything that determines the object code: the loop IR of every kernel
    // (names included), the CPU, and this backend's code-generation version.
    std::vector<const loop::LoopFunc*> all = kernel_funcs(p), distinct;
    SameCode same = same_code(all);
    std::unordered_map<std::string, std::string> code_name;
    std::string ir;
    for (size_t i = 0; i < all.size(); ++i) {
      ir += all[i]->name + "\n" + same.keys[i] + "\n";
      code_name[all[i]->name] = all[same.first[i]]->name;
      if (same.is_first(i)) distinct.push_back(all[i]);
    }
    std::string key = cache_key({"llvm", llvmjit::emitter_build_id(), llvmjit::pipeline_id(), ir, llvmjit::host_cpu(),
                                 llvmjit::host_features_hash()});
    std::string path = o.use_cache ? cache_path("llvm", key + ".o") : "";
    std::vector<char> blob;
    std::vector<std::vector<char>> objects;
    bool cached = false;
    std::unique_ptr<llvmjit::LoadedCode> code;
    if (!path.empty() && read_file(path, blob)) {
      try {
        if (!llvmjit::unpack_objects(blob, objects)) throw UserError("not an object bundle");
        code = llvmjit::load_objects(objects, "k" + key.substr(0, 8));
        for (const loop::LoopFunc* f : distinct)
          if (!code->lookup(f->name)) throw UserError("missing symbol");
        cached = true;
      } catch (const std::exception&) {
        code.reset();  // corrupt entry: rebuild below, never trust it
        std::remove(path.c_str());
      }
    }
    if (!code) {
      objects = llvmjit::compile_kernels(distinct);  // on every hardware thread
      if (!path.empty()) atomic_write(path, llvmjit::pack_objects(objects));
      code = llvmjit::load_objects(objects, "k" + key.substr(0, 8));
    }
    auto cp = std::make_shared<LlvmProgram>(p, std::move(code), code_name);
    cp->from_cache = cached;
    cp->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    cp->command = std::string("LLVM ") + llvmjit::pipeline_id() + " -mcpu=" + llvmjit::host_cpu() + (cached ? " (cached object)" : "");
    return cp;
  }
};

LATHE_REGISTER_BACKEND(LlvmBackend);

}  // namespace

}  // namespace lathe
