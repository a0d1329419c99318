// jit.h — the process-wide LLVM 19 ORC JIT used by the llvm backend.
//
// One LLJIT per process (created on first use) targeting the host CPU (znver5 here) at
// CodeGenOptLevel::Aggressive (jit.cpp: what cheaper settings were measured and why they are
// not used). A module is optimized with the O3 pipeline minus LLVM's own loop unrolling (kernels come unrolled where it pays: the matmul micro-kernel, and the
// vectorizer interleaves; unrolling made matmul kernels ~8x slower to compile and no
// faster to run), turned into an object file, and loaded into its own JITDylib so a
// program's code can be dropped when the program dies. compile_module may run on several
// threads at once (each takes its own TargetMachine; modules need their own contexts).
// Object files are what the kernel cache stores: a cache hit skips IR generation,
// optimization and codegen entirely.
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
  double opt_ms = 0, codegen_ms = 0;  // this thread's CPU time in each (LATHE_LLVM_TIMING)
};

// Host CPU name and feature string as LLVM sees them (part of cache keys).
std::string host_cpu();
std::string host_features_hash();

// Names the optimization pipeline and code generator settings (part of cache keys); quick:
// those of the quick tier.
const char* pipeline_id(bool quick = false);
// whether emit.cpp tags buffer accesses with scoped no-alias metadata (LATHE_LLVM_NOALIAS=0: not)
bool alias_scopes();
// whether a dequantized product may contract into an FMA as before (LATHE_LLVM_CONTRACT_DQ=1;
// emit_expr.cpp; part of pipeline_id, so that the cache keeps the two apart)
bool contract_dequantize();

// Verifies, optimizes and compiles a module. Throws InternalError with LLVM's message
// when the module does not verify (a bug in IR generation, reported clearly).
// quick: the quick tier, for a fast start (a tiered compile, llvm_backend.cpp): a short
// scalar clean-up and the O0 code generator, ~6x less CPU than the full pipeline and code
// ~2-7x slower; for the codes tier_plan.h picks, until the full tier replaces it after the first run.
CompileOutput compile_module(llvm::Module& m, bool want_ir, bool want_asm, bool quick = false);

// Loads object files (fresh from compile_module or from the cache) into one JITDylib.
std::unique_ptr<LoadedCode> load_objects(const std::vector<std::vector<char>>& objects, const std::string& name);
inline std::unique_ptr<LoadedCode> load_object(const std::vector<char>& object, const std::string& name) {
  return load_objects({object}, name);
}

}  // namespace lathe::llvmjit
