// peers.cpp — the cuda bench's in-process peers (see peers.h).
#include "backends/cuda/peers.h"

#include <dlfcn.h>

#include <algorithm>
#include <vector>

#include "backends/cuda/driver.h"
#include "core/ir/diag.h"

namespace lathe::cuda {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// Times `fn` (enqueued on the default stream) with events: median of iters after 3 warm-ups.
template <class F>
double event_ms(int iters, F fn) {
  const Driver& d = driver();
  CUevent a = nullptr, b = nullptr;
  check(d.EventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.EventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<double> t;
  for (int i = 0; i < iters + 3; ++i) {
    check(d.EventRecord(a, nullptr), "cuEventRecord");
    fn();
    check(d.EventRecord(b, nullptr), "cuEventRecord");
    check(d.EventSynchronize(b), "cuEventSynchronize");
    float ms = 0;
    check(d.EventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    if (i >= 3) t.push_back(ms);
  }
  d.EventDestroy(a);
  d.EventDestroy(b);
  return median(t);
}

struct DeviceBuffer {
  CUdeviceptr p = 0;
  explicit DeviceBuffer(size_t bytes) { check(driver().MemAlloc(&p, bytes), "cuMemAlloc"); }
  ~DeviceBuffer() { driver().MemFree(p); }
};

}  // namespace

double copy_gbps(size_t bytes, int iters, std::string* why) {
  try {
    device();
    DeviceBuffer src(bytes), dst(bytes);
    const Driver& d = driver();
    double ms = event_ms(iters, [&] { check(d.MemcpyDtoD(dst.p, src.p, bytes), "cuMemcpyDtoD"); });
    return 2.0 * static_cast<double>(bytes) / (ms / 1000) / 1e9;
  } catch (const UserError& e) {
    if (why) *why = e.what();
    return -1;
  }
}

double cublas_sgemm_ms(int n, int iters, std::string* why) {
  // the few cuBLAS entry points used, declared here so no cuBLAS header is needed
  using Create = int (*)(void**);
  using Destroy = int (*)(void*);
  using SetMathMode = int (*)(void*, int);
  using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                        const float*, float*, int);
  static void* lib = [] {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so"})
      if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
    return static_cast<void*>(nullptr);
  }();
  if (!lib) {
    if (why) *why = "cuBLAS not found (libcublas.so.13)";
    return -1;
  }
  auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "cublasDestroy_v2"));
  auto set_math = reinterpret_cast<SetMathMode>(dlsym(lib, "cublasSetMathMode"));
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cublasSgemm_v2"));
  if (!create || !destroy || !sgemm) {
    if (why) *why = "cuBLAS lacks cublasSgemm_v2";
    return -1;
  }
  try {
    device();
    size_t bytes = size_t(n) * n * sizeof(float);
    DeviceBuffer a(bytes), b(bytes), c(bytes);
    std::vector<float> host(size_t(n) * n, 0.5f);
    check(driver().MemcpyHtoD(a.p, host.data(), bytes), "cuMemcpyHtoD");
    check(driver().MemcpyHtoD(b.p, host.data(), bytes), "cuMemcpyHtoD");
    void* h = nullptr;
    if (create(&h) != 0) throw UserError("cublasCreate failed");
    if (set_math) set_math(h, 0);  // CUBLAS_DEFAULT_MATH: exact f32, no TF32 tensor cores
    float alpha = 1, beta = 0;
    // row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: swap the operands
    auto* A = reinterpret_cast<const float*>(a.p);
    auto* B = reinterpret_cast<const float*>(b.p);
    auto* C = reinterpret_cast<float*>(c.p);
    int status = 0;
    double ms = event_ms(iters, [&] { status |= sgemm(h, 0, 0, n, n, n, &alpha, B, n, A, n, &beta, C, n); });
    destroy(h);
    if (status != 0) throw UserError("cublasSgemm failed (status " + std::to_string(status) + ")");
    return ms;
  } catch (const UserError& e) {
    if (why) *why = e.what();
    return -1;
  }
}

double peak_gflops(std::string* why) {
  try {
    Device& dev = device();
    int khz = 0;
    check(driver().DeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev.dev), "cuDeviceGetAttribute");
    int lanes = dev.cc_major >= 9 || (dev.cc_major == 8 && dev.cc_minor >= 6) ? 128 : 64;  // FP32 units per SM
    return 2.0 * dev.sm_count * lanes * (khz / 1e6);
  } catch (const UserError& e) {
    if (why) *why = e.what();
    return -1;
  }
}

}  // namespace lathe::cuda
