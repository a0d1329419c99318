// driver.h — the CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
//
// Lathe never links libcuda (nor the toolkit's stub, which makes binaries fail to start
// on machines without a driver): the entry points below are looked up with dlsym the
// first time something needs the GPU. Where there is no driver or no device, the calls
// here throw UserError with one clear line — "no CUDA driver (libcuda.so.1 not found)" or
// "no CUDA device" — and never crash. cuda.h is included for its typedefs only.
//
//   const cuda::Driver& d = cuda::driver();        // UserError without a driver
//   cuda::Device& dev = cuda::device();             // UserError without a device
//   cuda::check(d.MemAlloc(&p, bytes), "cuMemAlloc");
#pragma once
#include <cuda.h>

#include <string>

namespace lathe::cuda {

// The driver entry points Lathe uses (names without the "cu" prefix).
struct Driver {
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuMemAlloc) MemAlloc = nullptr;         // cuMemAlloc_v2
  decltype(&::cuMemFree) MemFree = nullptr;           // cuMemFree_v2
  decltype(&::cuMemcpyHtoD) MemcpyHtoD = nullptr;     // cuMemcpyHtoD_v2
  decltype(&::cuMemcpyDtoH) MemcpyDtoH = nullptr;     // cuMemcpyDtoH_v2
  decltype(&::cuMemcpyDtoD) MemcpyDtoD = nullptr;     // cuMemcpyDtoD_v2
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) EventElapsedTime = nullptr;  // cuEventElapsedTime_v2
  decltype(&::cuEventDestroy) EventDestroy = nullptr;          // cuEventDestroy_v2
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
};

// The loaded driver (dlopen + dlsym + cuInit once). UserError when unavailable.
const Driver& driver();

// The GPU Lathe runs on: device 0 with its primary context made current.
struct Device {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 1024;
  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};
// UserError "no CUDA driver (…)" / "no CUDA device" when there is none.
Device& device();

// "" when a driver and a device are present; otherwise the one-line reason. Never throws.
std::string availability();

// Throws UserError("cuda: WHAT failed: CUDA_ERROR_X (text)") unless r == CUDA_SUCCESS.
void check(CUresult r, const char* what);

}  // namespace lathe::cuda
