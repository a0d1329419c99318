// jit.h — the process-wide LLVM 19 ORC JIT used by the llvm backend.
//
// One LLJIT per process (created on first use) targeting the host CPU (znver5 here) at
// CodeGenOptLevel::Aggressive. A module is optimized with the O3 pipeline, turned into an
// object file by the same TargetMachine, and loaded into its own JITDylib so a program's
// code can be dropped when the program dies. Object files are what the kernel cache
// stores: a cache hit skips IR generation, optimization and codegen entirely.
// LLVM types stay out of this header so the rest of the backend compiles fast.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace llvm { class Module; class LLVMContext; }

namespace lathe::llvmjit {

// Code loaded into the JIT; symbols stay valid while this object lives.
class LoadedCode {
 public:
  virtual ~LoadedCode() = default;
  virtual void* lookup(const std::string& symbol) = 0;  // nullptr if absent
};

struct CompileOutput {
  std::vector<char> object;   // the relocatable object file
  std::string optimized_ir;   // filled when want_ir
  std::string assembly;       // filled when want_asm
};

// Host CPU name and feature string as LLVM sees them (part of cache keys).
std::string host_cpu();
std::string host_features_hash();

// Verifies, optimizes (O3) and compiles a module. Throws UserError with LLVM's message
// when the module does not verify (a bug in IR generation, reported clearly).
CompileOutput compile_module(llvm::Module& m, bool want_ir, bool want_asm);

// Loads an object file (fresh from compile_module or from the cache).
std::unique_ptr<LoadedCode> load_object(const std::vector<char>& object, const std::string& name);

}  // namespace lathe::llvmjit
