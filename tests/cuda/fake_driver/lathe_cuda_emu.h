// lathe_cuda_emu.h — just enough of CUDA C for the kernels Lathe renders to compile with
// the host C++ compiler and run on the CPU, for the fake driver (fake_cuda.cpp): one fiber
// per CUDA thread of a block, blocks one after another, __syncthreads() as a switch back
// to the block's scheduler, __shared__ as static storage (blocks never overlap), warp
// shuffles through a block-wide exchange array. Slow, and only for the small graphs of the tests; what it
// buys is checking the rendered kernels' arithmetic and indexing without a GPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct lathe_dim3 { unsigned x = 1, y = 1, z = 1; };
inline lathe_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline void lathe_emu_barrier_wait();
inline void __syncthreads() { lathe_emu_barrier_wait(); }
// blocks run one after another and a block's threads switch only at barriers, so memory
// is always coherent and an atomic is a plain update
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned old = *p; *p += v; return old; }
inline float __ldcg(const float* p) { return *p; }

struct alignas(16) float4 { float x, y, z, w; };

inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }

// __shfl_xor_sync across the block: every thread of the block calls it together.
inline double lathe_emu_exchange[1024];
template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  lathe_emu_exchange[threadIdx.x] = static_cast<double>(v);
  __syncthreads();
  unsigned partner = threadIdx.x ^ static_cast<unsigned>(lane_mask);
  T r = partner < blockDim.x ? static_cast<T>(lathe_emu_exchange[partner]) : v;
  __syncthreads();
  return r;
}

// f16 / bf16 storage types with round-to-nearest-even conversions.
struct __half { unsigned short bits; };
struct __nv_bfloat16 { unsigned short bits; };
inline float __half2float(__half h) {
  unsigned s = (h.bits >> 15) & 1, e = (h.bits >> 10) & 31, m = h.bits & 1023;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : e == 31 ? (m ? NAN : INFINITY)
                                                                      : std::ldexp(static_cast<float>(m | 1024), static_cast<int>(e) - 25);
  return s ? -v : v;
}
// Rounds |a| to `prec` significant bits, ties to even, with subnormals below 2^emin;
// +inf at or above `overflow`.
inline double lathe_emu_round(double a, int prec, int emin, double overflow) {
  if (a >= overflow) return INFINITY;
  int e;
  std::frexp(a, &e);
  int exp = e > emin + 1 ? e : emin + 1;
  double q = std::ldexp(1.0, exp - prec);
  return std::nearbyint(a / q) * q;
}
inline __half __double2half(double d) {
  unsigned short s = std::signbit(d) ? 0x8000 : 0;
  if (std::isnan(d)) return {static_cast<unsigned short>(s | 0x7e00)};
  double r = lathe_emu_round(std::fabs(d), 11, -14, 65520.0);
  if (std::isinf(r)) return {static_cast<unsigned short>(s | 0x7c00)};
  if (r < std::ldexp(1.0, -14)) return {static_cast<unsigned short>(s | static_cast<unsigned>(std::ldexp(r, 24)))};
  int e;
  double f = std::frexp(r, &e);  // r = f * 2^e, f in [0.5, 1)
  unsigned man = static_cast<unsigned>(std::ldexp(f, 11)) - 1024;
  return {static_cast<unsigned short>(s | (static_cast<unsigned>(e - 1 + 15) << 10) | man)};
}
inline __half __float2half_rn(float f) { return __double2half(f); }
inline float __bfloat162float(__nv_bfloat16 b) {
  unsigned u = static_cast<unsigned>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __double2bfloat16(double d) {
  if (std::isnan(d)) return {static_cast<unsigned short>(std::signbit(d) ? 0xffc0 : 0x7fc0)};
  double r = lathe_emu_round(std::fabs(d), 8, -126, std::ldexp(2.0 - std::ldexp(1.0, -8), 127));
  float f = static_cast<float>(std::signbit(d) ? -r : r);  // exact: r has 8 significant bits
  unsigned u;
  std::memcpy(&u, &f, 4);
  return {static_cast<unsigned short>(u >> 16)};
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __double2bfloat16(f); }
#include <math.h>  // exp2f, fmaf, log2f, sinf, sqrtf … as in CUDA, unqualified

#include <functional>
#include <memory>
#include <ucontext.h>
#include <vector>

// The threads of a block are fibers (ucontext) run in turn on one OS thread: each runs
// until its next __syncthreads() or its end, then the next one; a round ends when every
// live thread has reached the barrier. Deterministic and cheap, unlike OS threads.
struct LatheEmuFiber {
  ucontext_t ctx;
  bool done = false;
};
inline ucontext_t lathe_emu_main;
inline LatheEmuFiber* lathe_emu_current = nullptr;
inline std::function<void()>* lathe_emu_body = nullptr;
inline void lathe_emu_barrier_wait() { swapcontext(&lathe_emu_current->ctx, &lathe_emu_main); }
inline void lathe_emu_start() {
  (*lathe_emu_body)();
  lathe_emu_current->done = true;  // uc_link returns to the scheduler
}

// Runs `body` as a grid of gx blocks of bx threads (x only: Lathe launches 1-D grids).
template <class F>
void lathe_emu_grid(unsigned gx, unsigned bx, F body) {
  std::function<void()> fn = body;
  lathe_emu_body = &fn;
  constexpr size_t kStack = 256 * 1024;
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < bx) stacks.emplace_back(new char[kStack]);
  std::vector<LatheEmuFiber> fibers(bx);
  for (unsigned b = 0; b < gx; ++b) {
    for (unsigned t = 0; t < bx; ++t) {
      LatheEmuFiber& f = fibers[t];
      f.done = false;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks[t].get();
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = &lathe_emu_main;
      makecontext(&f.ctx, lathe_emu_start, 0);
    }
    blockIdx.x = b;
    blockDim.x = bx;
    gridDim.x = gx;
    for (bool live = true; live;) {
      live = false;
      for (unsigned t = 0; t < bx; ++t) {
        if (fibers[t].done) continue;
        lathe_emu_current = &fibers[t];
        threadIdx.x = t;
        swapcontext(&lathe_emu_main, &fibers[t].ctx);
        live |= !fibers[t].done;
      }
    }
  }
}
