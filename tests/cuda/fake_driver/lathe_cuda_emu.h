// lathe_cuda_emu.h — just enough of CUDA C for the kernels Lathe renders to compile with
// the host C++ compiler and run on the CPU, for the fake driver (fake_cuda.cpp): one fiber
// per CUDA thread of a block, blocks one after another, __syncthreads() as a switch back
// to the block's scheduler, __shared__ as static storage (blocks never overlap), warp
// shuffles through an exchange array with a barrier of the warp's own threads (a warp
// waits for its 32 threads only, so warps may shuffle different numbers of times between
// two __syncthreads(); a warp split between a shuffle and __syncthreads() is reported). Slow, and only for the small graphs of the tests; what it
// buys is checking the rendered kernels' arithmetic and indexing without a GPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
inline void lathe_emu_warp_wait();
inline void __syncthreads() { lathe_emu_barrier_wait(); }
// blocks run one after another and a block's threads switch only at barriers, so memory
// is always coherent and an atomic is a plain update
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned old = *p; *p += v; return old; }
inline float __ldcg(const float* p) { return *p; }

struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(8) uint2 { unsigned x, y; };

inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }

// dp2a / dp4a: sums of products of 16-bit x 8-bit (2) or 8-bit x 8-bit (4) lanes, wrapping
inline int __dp2a_lo(int a, int b, int c) {
  return static_cast<int>(static_cast<unsigned>(c) + static_cast<unsigned>(static_cast<short>(a) * static_cast<signed char>(b)) +
                          static_cast<unsigned>(static_cast<short>(a >> 16) * static_cast<signed char>(b >> 8)));
}
inline int __dp2a_hi(int a, int b, int c) {
  return static_cast<int>(static_cast<unsigned>(c) + static_cast<unsigned>(static_cast<short>(a) * static_cast<signed char>(b >> 16)) +
                          static_cast<unsigned>(static_cast<short>(a >> 16) * static_cast<signed char>(b >> 24)));
}
inline int __dp4a(int a, int b, int c) {
  unsigned s = static_cast<unsigned>(c);
  for (int i = 0; i < 32; i += 8) s += static_cast<unsigned>(static_cast<signed char>(a >> i) * static_cast<signed char>(b >> i));
  return static_cast<int>(s);
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int i = 0; i < 32; i += 8) c += ((a >> i) & 255u) * ((b >> i) & 255u);
  return c;
}

// Warp shuffles: every thread of the warp calls them together (each waits for its warp).
inline unsigned long long lathe_emu_exchange[1024];
template <class T>
T lathe_emu_shuffle(T v, unsigned partner) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  lathe_emu_exchange[threadIdx.x] = bits;
  lathe_emu_warp_wait();
  T r = v;
  if (partner < blockDim.x && (partner >> 5) == (threadIdx.x >> 5)) std::memcpy(&r, &lathe_emu_exchange[partner], sizeof(T));
  lathe_emu_warp_wait();
  return r;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) { return lathe_emu_shuffle(v, threadIdx.x ^ static_cast<unsigned>(lane_mask)); }
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
  unsigned lane = threadIdx.x & 31;
  return lathe_emu_shuffle(v, lane + delta < 32 ? threadIdx.x + delta : threadIdx.x);
}
template <class T>
T __shfl_sync(unsigned, T v, int src) { return lathe_emu_shuffle(v, (threadIdx.x & ~31u) + (static_cast<unsigned>(src) & 31)); }

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
inline float __fdiv_rn(float a, float b) { return a / b; }

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
  int wait = 0;  // 0: runnable, 1: at __syncthreads(), 2: at its warp's barrier (a shuffle)
};
inline ucontext_t lathe_emu_main;
inline LatheEmuFiber* lathe_emu_current = nullptr;
inline std::function<void()>* lathe_emu_body = nullptr;
inline void lathe_emu_barrier_wait() {
  lathe_emu_current->wait = 1;
  swapcontext(&lathe_emu_current->ctx, &lathe_emu_main);
}
inline void lathe_emu_warp_wait() {
  lathe_emu_current->wait = 2;
  swapcontext(&lathe_emu_current->ctx, &lathe_emu_main);
}
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
      f.wait = 0;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = stacks[t].get();
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = &lathe_emu_main;
      makecontext(&f.ctx, lathe_emu_start, 0);
    }
    blockIdx.x = b;
    blockDim.x = bx;
    gridDim.x = gx;
    for (;;) {
      for (unsigned t = 0; t < bx; ++t) {  // every runnable thread up to its next barrier or its end
        if (fibers[t].done || fibers[t].wait) continue;
        lathe_emu_current = &fibers[t];
        threadIdx.x = t;
        swapcontext(&lathe_emu_main, &fibers[t].ctx);
      }
      unsigned live = 0, at_block = 0;
      bool released = false;
      for (unsigned w0 = 0; w0 < bx; w0 += 32) {  // a warp whose live threads all wait at its barrier goes on
        unsigned wl = 0, ww = 0;
        for (unsigned t = w0; t < bx && t < w0 + 32; ++t)
          if (!fibers[t].done) ++wl, ww += fibers[t].wait == 2, at_block += fibers[t].wait == 1;
        live += wl;
        if (wl && ww == wl) {
          for (unsigned t = w0; t < bx && t < w0 + 32; ++t) fibers[t].wait = 0;
          released = true;
        }
      }
      if (!live) break;
      if (released) continue;
      if (at_block == live) {
        for (auto& f : fibers) f.wait = 0;
        continue;
      }
      std::fprintf(stderr, "lathe cuda emulator: block %u: a warp's threads wait at a shuffle while others wait at __syncthreads()\n", b);
      std::abort();
    }
  }
}
