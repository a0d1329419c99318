// fake_cuda.cpp — a stand-in libcuda.so.1 for machines without a GPU: the driver entry
// points the cuda backend uses, with "device memory" in host memory and every handle
// checked the way the real driver checks it (a current context, a live allocation, an
// event that was recorded, a loaded module). Tests load it through LATHE_CUDA_DRIVER.
//
// Kernels: a module loaded from a cubin only checks launches (nothing runs). A module
// loaded from CUDA C source (the backend hands over its source with
// LATHE_CUDA_LOAD_SOURCE=1) is compiled by the host C++ compiler against
// lathe_cuda_emu.h and really runs, one CPU thread per CUDA thread, so the differential
// tests can check the rendered kernels' results without a GPU (slowly: small graphs only).
// Speed and the real driver's behaviour are checked on a GPU (tests/gpu/run.sh).
#include <cuda.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {
std::mutex mu;
std::map<CUdeviceptr, size_t> allocations;
std::set<CUevent> events, recorded;
std::set<CUmodule> modules;
thread_local CUcontext current = nullptr;
int fake_ctx_tag, fake_fn_tag;
CUcontext const kCtx = reinterpret_cast<CUcontext>(&fake_ctx_tag);
long launches = 0;

// An emulated module: the kernels compiled for the CPU.
struct EmuModule {
  void* so = nullptr;
};
struct EmuFunction {
  void (*run)(void**, unsigned, unsigned) = nullptr;  // lathe_emu_NAME(params, grid, block)
};
std::set<EmuModule*> emu_modules;
std::set<EmuFunction*> emu_functions;

// Source → shared object: the includes of CUDA headers go, the emulation header comes
// in, and every kernel gets a wrapper taking the driver's void** parameter array.
EmuModule* compile_emulated(const std::string& cuda) {
  static std::map<std::string, void*> compiled;  // the same source (programs of one compile_many): one build
  if (auto it = compiled.find(cuda); it != compiled.end()) {
    auto* m = new EmuModule{it->second};
    emu_modules.insert(m);
    return m;
  }
  std::string src;
  std::istringstream in(cuda);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#include <cuda_", 0) != 0) src += line + "\n";
  std::string wrappers;
  std::regex sig(R"(extern "C" __global__ void (\w+)\(([^)]*)\))");
  for (std::sregex_iterator it(cuda.begin(), cuda.end(), sig), end; it != end; ++it) {
    std::string name = (*it)[1], params = (*it)[2], call;
    std::istringstream ps(params);
    int i = 0;
    for (std::string p; std::getline(ps, p, ',');) {
      p = std::regex_replace(p, std::regex("__restrict__"), "");
      auto last = p.find_last_not_of(" ");
      auto start = p.find_last_of(" *", last);
      std::string type = p.substr(0, start + 1);
      call += std::string(i ? ", " : "") + "*(" + type + "*)p[" + std::to_string(i) + "]";
      ++i;
    }
    wrappers += "extern \"C\" void lathe_emu_" + name + "(void** p, unsigned gx, unsigned bx) {\n  lathe_emu_grid(gx, bx, [&] { " +
                name + "(" + call + "); });\n}\n";
  }
  char dir[] = "/tmp/lathe-fake-cuda-XXXXXX";
  if (!mkdtemp(dir)) return nullptr;
  std::string base = dir;
  std::ofstream(base + "/k.cpp") << "#include \"lathe_cuda_emu.h\"\n" << src << "\n" << wrappers;
  std::string cmd = "c++ -std=c++20 -O1 -w -shared -fPIC -I" LATHE_EMU_DIR " " + base + "/k.cpp -o " + base + "/k.so -lpthread 2>" +
                    base + "/log";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "fake cuda driver: the emulated module does not compile (see %s/log)\n", dir);
    return nullptr;
  }
  void* so = dlopen((base + "/k.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so) return nullptr;
  std::remove((base + "/k.cpp").c_str());  // the loaded library stays mapped
  std::remove((base + "/k.so").c_str());
  std::remove((base + "/log").c_str());
  rmdir(dir);
  compiled[cuda] = so;
  auto* m = new EmuModule{so};
  emu_modules.insert(m);
  return m;
}

bool in_allocation(CUdeviceptr p, size_t bytes) {
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}
}  // namespace

#define NEED_CTX() \
  if (current != kCtx) return CUDA_ERROR_INVALID_CONTEXT
#define LOCK() std::lock_guard<std::mutex> lock(mu)

extern "C" {
CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* d, int i) { if (i != 0) return CUDA_ERROR_INVALID_DEVICE; *d = 0; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char* name, int len, CUdevice) { std::strncpy(name, "Fake GPU (lathe test driver)", len); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 1; break;  // small grids: emulated blocks run one by one
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1000000; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) { *c = kCtx; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize() { NEED_CTX(); return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  NEED_CTX();
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  LOCK();
  if (std::strncmp(static_cast<const char*>(image), "// generated by lathe", 21) == 0) {
    EmuModule* em = compile_emulated(static_cast<const char*>(image));
    if (!em) return CUDA_ERROR_INVALID_SOURCE;
    *m = reinterpret_cast<CUmodule>(em);
    return CUDA_SUCCESS;
  }
  *m = reinterpret_cast<CUmodule>(new int(0));
  modules.insert(*m);
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) {
  LOCK();
  if (emu_modules.erase(reinterpret_cast<EmuModule*>(m))) return CUDA_SUCCESS;  // kept loaded: functions may outlive it
  if (!modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<int*>(m);
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  NEED_CTX();
  LOCK();
  if (emu_modules.count(reinterpret_cast<EmuModule*>(m))) {
    auto* em = reinterpret_cast<EmuModule*>(m);
    auto* fn = new EmuFunction{reinterpret_cast<void (*)(void**, unsigned, unsigned)>(dlsym(em->so, ("lathe_emu_" + std::string(name)).c_str()))};
    if (!fn->run) return CUDA_ERROR_NOT_FOUND;
    emu_functions.insert(fn);
    *f = reinterpret_cast<CUfunction>(fn);
    return CUDA_SUCCESS;
  }
  if (!modules.count(m) || !name || !*name) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(&fake_fn_tag);
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned,
                        CUstream, void** params, void** extra) {
  NEED_CTX();
  auto* emu = reinterpret_cast<EmuFunction*>(f);
  bool emulated;
  {
    LOCK();
    emulated = emu_functions.count(emu) > 0;
  }
  if (emulated) {
    if (!gx || !bx || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024 || !params) return CUDA_ERROR_INVALID_VALUE;
    emu->run(params, gx, bx);  // synchronously: the stream is trivially in order
    LOCK();
    ++launches;
    return CUDA_SUCCESS;
  }
  if (f != reinterpret_cast<CUfunction>(&fake_fn_tag) || !gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (!params && !extra) return CUDA_ERROR_INVALID_VALUE;
  LOCK();
  ++launches;
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  NEED_CTX();
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  LOCK();
  void* m = std::calloc(1, bytes);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(m);
  allocations[*p] = bytes;
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  NEED_CTX();
  LOCK();
  auto it = allocations.find(p);
  if (it == allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(p));
  allocations.erase(it);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  NEED_CTX();
  LOCK();
  if (!in_allocation(dst, n) || !src) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  NEED_CTX();
  LOCK();
  if (!in_allocation(src, n) || !dst) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  NEED_CTX();
  LOCK();
  if (!in_allocation(src, n) || !in_allocation(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned) {
  NEED_CTX();
  LOCK();
  *e = reinterpret_cast<CUevent>(new int(0));
  events.insert(*e);
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream) {
  NEED_CTX();
  LOCK();
  if (!events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  recorded.insert(e);
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent e) {
  LOCK();
  return events.count(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  NEED_CTX();
  LOCK();
  if (!recorded.count(a) || !recorded.count(b)) return CUDA_ERROR_INVALID_HANDLE;
  *ms = 0.001f;
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  LOCK();
  if (!events.erase(e)) return CUDA_ERROR_INVALID_HANDLE;
  recorded.erase(e);
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult r, const char** s) { *s = r == CUDA_SUCCESS ? "no error" : "fake driver error"; return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    default: *s = "CUDA_ERROR_OTHER";
  }
  return CUDA_SUCCESS;
}
// for tests: allocations still live and launches so far
long lathe_fake_cuda_live_allocations() { LOCK(); return static_cast<long>(allocations.size()); }
long lathe_fake_cuda_launches() { LOCK(); return launches; }
}
