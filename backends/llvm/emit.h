// emit.h — loop IR -> LLVM IR, with IRBuilder. The llvm backend's only renderer.
//
// Every LoopFunc becomes `void NAME(void* const* buffers, const int64_t* dims)`. Loops
// are plain counted loops (LLVM's O3 pipeline vectorizes and interleaves them; annotations
// become llvm.loop metadata, and only loops annotated to unroll are unrolled, see jit.h); parallel loops are outlined into chunk functions run by
// lathe_llvm_parallel_for (parallel.h). f32 exp2/log2 are inlined as polynomials so that
// they vectorize (libm calls would not); f16 uses LLVM's half (per-op rounding, as the
// interpreter does); bf16 is stored as i16 and computed in f32, rounded after each op.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/loop/loop_ir.h"

namespace llvm { class Module; class LLVMContext; }

namespace lathe::llvmjit {

// Identifies this emitter build (part of kernel-cache keys, so a changed code generator
// never reuses objects made by an older one).
const char* emitter_build_id();

// Known bounds (inclusive) of a kernel's run-time dims, by kernel name, one pair per entry of
// LoopFunc::dims (lo > hi: unknown). Their loads carry !range metadata, so the optimizer sees
// trip counts and strides of a shape-parametric kernel (kernel_param.h) as bounded.
using DimRanges = std::unordered_map<std::string, std::vector<std::pair<int64_t, int64_t>>>;

std::unique_ptr<llvm::Module> emit_module(const std::vector<const loop::LoopFunc*>& funcs, llvm::LLVMContext& ctx,
                                          const std::string& module_name, const DimRanges* ranges = nullptr);

}  // namespace lathe::llvmjit
