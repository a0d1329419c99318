// parallel.h — the thread pool behind parallel loops in JIT-compiled kernels.
//
// A parallel loop is outlined into a "chunk function" that runs iterations [begin, end);
// the kernel calls lathe_llvm_parallel_for, which splits [0, n) into one contiguous chunk
// per worker (static schedule: kernels are regular) and waits for all of them. The pool
// is created on first use with one thread per hardware thread (the caller is one of them).
#pragma once
#include <cstdint>

namespace lathe::llvmjit {

using ChunkFn = void (*)(void* const* buffers, const int64_t* dims, const int64_t* captures, int64_t begin,
                         int64_t end);

extern "C" void lathe_llvm_parallel_for(ChunkFn fn, void* const* buffers, const int64_t* dims,
                                        const int64_t* captures, int64_t n);

int pool_threads();

}  // namespace lathe::llvmjit
