// parallel.h — the thread pool behind parallel loops in JIT-compiled kernels.
//
// A parallel loop is outlined into a "chunk function" that runs iterations [begin, end);
// the kernel calls lathe_llvm_parallel_for, which cuts [0, n) into one contiguous share per
// thread and each share into chunks (about 8 per thread; one iteration each when n is
// small, as for a matmul's few jobs). A thread claims the chunks of its own share first —
// the same iterations on every call, so a kernel launched many times over one weight (an
// RNN's steps) finds its part in that core's cache — then those left in the others', and
// the call returns when every iteration is done. Kernels are regular, but the machine may
// be shared: a thread that is descheduled or starts late does not hold the others back,
// and one that has not woken by then finds nothing to claim. The pool is created on first
// use with one thread per hardware thread (the caller is one of them). Idle workers poll for
// the next loop for a fraction of a millisecond before they sleep, so the kernels of a model,
// launched back to back, reach them without a wake-up; while the machine is oversubscribed
// they sleep between loops instead (parallel.cpp); whether it is, each thread judges once per
// window of ~8 ms, not around each loop (a read is a system call): the caller from its time
// waiting for a core (/proc/thread-self/schedstat), a worker from its CPU clock.
#pragma once
#include <cstdint>

namespace lathe::llvmjit {

using ChunkFn = void (*)(void* const* buffers, const int64_t* dims, const int64_t* captures, int64_t begin,
                         int64_t end);

extern "C" void lathe_llvm_parallel_for(ChunkFn fn, void* const* buffers, const int64_t* dims,
                                        const int64_t* captures, int64_t n);

// A kernel's local arrays over kHeapScratchBytes (a GEMM job's packed panels, a convolution's
// im2col pack shared by all jobs: up to 3 MiB) do not go on the stack of the thread that runs
// it, which may be small (a user's thread, a pool worker): the function takes them from this
// thread's scratch stack on entry, lathe_llvm_scratch_push(bytes) (64-byte aligned, kept
// between calls, so no allocation once warm), and gives its `count` back with
// lathe_llvm_scratch_pop(count) before it returns. Contents are not initialized (as an alloca).
constexpr int64_t kHeapScratchBytes = 64 << 10;
extern "C" void* lathe_llvm_scratch_push(int64_t bytes);
extern "C" void lathe_llvm_scratch_pop(int64_t count);

int pool_threads();

// Counters since start-up (tests and diagnostics): loops handed to the pool's threads, those
// of them run while the machine was judged oversubscribed (the workers sleep between loops
// then instead of polling; parallel.cpp), loops that had to wake a sleeping worker (the rest
// found the workers still polling), how many times the pool judged the machine taken, and
// how many times its threads read their CPU clock for that judgement (outside
// LATHE_POOL_STATS).
struct PoolStats {
  int64_t loops = 0, quiet_loops = 0, wakeups = 0, contended = 0, cpu_reads = 0;
};
PoolStats pool_stats();

}  // namespace lathe::llvmjit
