// driver.cpp — dlopen/dlsym of libcuda.so.1 and the device-0 context (see driver.h).
#include "backends/cuda/driver.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <mutex>

#include "core/ir/diag.h"

namespace lathe::cuda {

namespace {

struct Loaded {
  Driver drv;
  std::string error;  // why the driver is unusable ("" = fine)
};

// Entry points come from cuGetProcAddress (CUDA 12+ drivers) when the driver has it: asked
// for by base name with the CUDA version of the headers compiled against, it returns the
// ABI those headers describe (the _v2/_v3 variants, legacy default stream), which plain
// dlsym of a versioned name only approximates. Older drivers: dlsym.
using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
GetProcAddress proc_lookup = nullptr;

template <class Fn>
bool sym(void* lib, Fn& slot, const char* name, std::string& missing) {
  slot = nullptr;
  if (proc_lookup) {
    std::string base = name;
    if (auto v = base.rfind("_v"); v != std::string::npos && v + 2 < base.size() && std::isdigit(static_cast<unsigned char>(base[v + 2])))
      base.resize(v);
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (proc_lookup(base.c_str(), &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) == CUDA_SUCCESS &&
        found == CU_GET_PROC_ADDRESS_SUCCESS)
      slot = reinterpret_cast<Fn>(fn);
  }
  if (!slot) slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!slot) missing += std::string(missing.empty() ? "" : ", ") + name;
  return slot != nullptr;
}

Loaded load_driver() {
  Loaded L;
  // LATHE_CUDA_DRIVER names another driver library (the tests' fake one, tests/cuda/fake_driver)
  const char* path = std::getenv("LATHE_CUDA_DRIVER");
  void* lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    L.error = path && *path ? "no CUDA driver (" + std::string(path) + " not loadable)" : "no CUDA driver (libcuda.so.1 not found)";
    return L;
  }
  Driver& d = L.drv;
  std::string missing;
  proc_lookup = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  sym(lib, d.Init, "cuInit", missing);
  sym(lib, d.DriverGetVersion, "cuDriverGetVersion", missing);
  sym(lib, d.DeviceGetCount, "cuDeviceGetCount", missing);
  sym(lib, d.DeviceGet, "cuDeviceGet", missing);
  sym(lib, d.DeviceGetName, "cuDeviceGetName", missing);
  sym(lib, d.DeviceGetAttribute, "cuDeviceGetAttribute", missing);
  sym(lib, d.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  sym(lib, d.CtxSetCurrent, "cuCtxSetCurrent", missing);
  sym(lib, d.CtxSynchronize, "cuCtxSynchronize", missing);
  sym(lib, d.ModuleLoadData, "cuModuleLoadData", missing);
  sym(lib, d.ModuleUnload, "cuModuleUnload", missing);
  sym(lib, d.ModuleGetFunction, "cuModuleGetFunction", missing);
  sym(lib, d.LaunchKernel, "cuLaunchKernel", missing);
  sym(lib, d.MemAlloc, "cuMemAlloc_v2", missing);
  sym(lib, d.MemFree, "cuMemFree_v2", missing);
  sym(lib, d.MemcpyHtoD, "cuMemcpyHtoD_v2", missing);
  sym(lib, d.MemcpyDtoH, "cuMemcpyDtoH_v2", missing);
  sym(lib, d.MemcpyDtoD, "cuMemcpyDtoD_v2", missing);
  sym(lib, d.EventCreate, "cuEventCreate", missing);
  sym(lib, d.EventRecord, "cuEventRecord", missing);
  sym(lib, d.EventSynchronize, "cuEventSynchronize", missing);
  if (std::string none; !sym(lib, d.EventElapsedTime, "cuEventElapsedTime_v2", none))
    sym(lib, d.EventElapsedTime, "cuEventElapsedTime", missing);
  sym(lib, d.EventDestroy, "cuEventDestroy_v2", missing);
  sym(lib, d.GetErrorString, "cuGetErrorString", missing);
  sym(lib, d.GetErrorName, "cuGetErrorName", missing);
  if (!missing.empty()) {
    L.error = "CUDA driver too old (libcuda.so.1 lacks " + missing + ")";
    return L;
  }
  CUresult r = d.Init(0);
  if (r == CUDA_ERROR_NO_DEVICE) L.error = "no CUDA device";
  else if (r == CUDA_ERROR_STUB_LIBRARY) L.error = "no CUDA driver (libcuda.so.1 is the toolkit's stub)";
  else if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    d.GetErrorString(r, &s);
    L.error = "no CUDA device (cuInit failed: " + std::string(s ? s : "unknown error") + ")";
  }
  return L;
}

const Loaded& loaded() {
  static Loaded L = load_driver();  // thread-safe static init
  return L;
}

struct DeviceState {
  Device dev;
  std::string error;
};

DeviceState open_device() {
  DeviceState S;
  const Loaded& L = loaded();
  if (!L.error.empty()) {
    S.error = L.error;
    return S;
  }
  const Driver& d = L.drv;
  int count = 0;
  if (d.DeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    S.error = "no CUDA device";
    return S;
  }
  try {
    Device& v = S.dev;
    check(d.DeviceGet(&v.dev, 0), "cuDeviceGet");
    char name[256] = {};
    check(d.DeviceGetName(name, sizeof name, v.dev), "cuDeviceGetName");
    v.name = name;
    check(d.DeviceGetAttribute(&v.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, v.dev), "cuDeviceGetAttribute");
    check(d.DeviceGetAttribute(&v.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, v.dev), "cuDeviceGetAttribute");
    check(d.DeviceGetAttribute(&v.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, v.dev), "cuDeviceGetAttribute");
    check(d.DeviceGetAttribute(&v.max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, v.dev),
          "cuDeviceGetAttribute");
    check(d.DevicePrimaryCtxRetain(&v.ctx, v.dev), "cuDevicePrimaryCtxRetain");
  } catch (const UserError& e) {
    S.error = e.what();
  }
  return S;
}

DeviceState& device_state() {
  static DeviceState S = open_device();
  return S;
}

}  // namespace

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const Driver& d = loaded().drv;
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.GetErrorName) d.GetErrorName(r, &name);
  if (d.GetErrorString) d.GetErrorString(r, &text);
  throw UserError(std::string("cuda: ") + what + " failed: " + (name ? name : "error " + std::to_string(r)) +
                  (text ? std::string(" (") + text + ")" : ""));
}

const Driver& driver() {
  const Loaded& L = loaded();
  if (!L.error.empty()) throw UserError(L.error);
  return L.drv;
}

Device& device() {
  DeviceState& S = device_state();
  if (!S.error.empty()) throw UserError(S.error);
  // the primary context is per process; make it current on the calling thread
  check(loaded().drv.CtxSetCurrent(S.dev.ctx), "cuCtxSetCurrent");
  return S.dev;
}

std::string availability() {
  const DeviceState& S = device_state();
  return S.error;
}

}  // namespace lathe::cuda
