// compile_program.h — a program's kernels to object code, compiled on several threads,
// and the bundle of object files the kernel cache stores for one program.
//
// Cold compiles are dominated by LLVM's optimizer and code generator, per function. The
// kernels are split into groups of similar size (by loop IR size), each group becomes its
// own module in its own LLVMContext, and the groups compile concurrently, one thread each
// (up to the hardware threads). Each group gives one object file; all of them load into
// the program's one JITDylib (load_objects in jit.h).
#pragma once
#include <string>
#include <vector>

#include "backends/llvm/emit.h"
#include "core/loop/loop_ir.h"

namespace lathe::llvmjit {

// Rough compile cost of a kernel: its loop IR's statements and expression nodes (the full
// tier's CPU time grows about linearly with it: 30-120 us per node, LATHE_LLVM_TIMING=each).
size_t ir_size(const loop::LoopFunc& f);

// threads <= 0: one per hardware thread. Returns one object file per group (in no
// particular kernel order). Throws what compile_module throws.
// ranges: known bounds of the kernels' dims (emit.h), or nullptr. quick: the quick tier
// (compile_module in jit.h).
std::vector<std::vector<char>> compile_kernels(const std::vector<const loop::LoopFunc*>& funcs, int threads = 0,
                                               const DimRanges* ranges = nullptr, bool quick = false);

// Object files <-> one cache entry ("LATHEOBJS", a count, then each size and its bytes).
std::string pack_objects(const std::vector<std::vector<char>>& objects);
// false when the blob is not a complete bundle (a corrupt or old-format cache entry).
bool unpack_objects(const std::vector<char>& blob, std::vector<std::vector<char>>& objects);

}  // namespace lathe::llvmjit
