// nvrtc.cpp — NVRTC compile to cubin/PTX with annotated diagnostics (see nvrtc.h).
// NVRTC is loaded with dlopen on first use, not linked: a process that never compiles CUDA
// (every CPU run) does not map it (its start-up touched ~28 MB of it, all resident).
#include "backends/cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <type_traits>
#include <vector>

#include "core/ir/diag.h"

#ifndef LATHE_CUDA_INCLUDE_DIR
#define LATHE_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace lathe::cuda {

namespace {

// The NVRTC entry points, resolved from the library on first use.
struct Api {
  decltype(&nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&nvrtcVersion) Version = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  decltype(&nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&nvrtcGetPTX) GetPTX = nullptr;
  decltype(&nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&nvrtcGetCUBIN) GetCUBIN = nullptr;
  std::string error;  // why NVRTC is unusable ("" = loaded)
};

// $LATHE_NVRTC (a path), else the toolkit's soname and the library the build found.
Api load_api() {
  Api a;
  std::vector<std::string> names;
  if (const char* e = std::getenv("LATHE_NVRTC"); e && *e) {
    names.push_back(e);
  } else {
#ifdef LATHE_NVRTC_SONAME
    names.push_back(LATHE_NVRTC_SONAME);
#endif
#ifdef LATHE_NVRTC_LIBRARY
    names.push_back(LATHE_NVRTC_LIBRARY);
#endif
    names.push_back("libnvrtc.so");
  }
  void* lib = nullptr;
  std::string why;
  for (auto& n : names) {
    if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (why.empty()) {
      const char* e = dlerror();
      why = e ? e : n + ": not loadable";
    }
  }
  if (!lib) {
    a.error = "NVRTC not loadable (" + why + ")";
    return a;
  }
  std::string missing;
  auto sym = [&](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(lib, name));
    if (!slot) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  sym(a.GetErrorString, "nvrtcGetErrorString");
  sym(a.Version, "nvrtcVersion");
  sym(a.GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  sym(a.GetSupportedArchs, "nvrtcGetSupportedArchs");
  sym(a.CreateProgram, "nvrtcCreateProgram");
  sym(a.DestroyProgram, "nvrtcDestroyProgram");
  sym(a.CompileProgram, "nvrtcCompileProgram");
  sym(a.GetProgramLogSize, "nvrtcGetProgramLogSize");
  sym(a.GetProgramLog, "nvrtcGetProgramLog");
  sym(a.GetPTXSize, "nvrtcGetPTXSize");
  sym(a.GetPTX, "nvrtcGetPTX");
  sym(a.GetCUBINSize, "nvrtcGetCUBINSize");
  sym(a.GetCUBIN, "nvrtcGetCUBIN");
  if (!missing.empty()) a.error = "NVRTC library " + names.front() + " lacks " + missing;
  return a;
}

const Api& loaded() {
  static const Api a = load_api();
  return a;
}

// The API, or a UserError saying why there is none.
const Api& api() {
  const Api& a = loaded();
  if (!a.error.empty()) throw UserError("cuda: " + a.error);
  return a;
}

void nvcheck(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw UserError(std::string("nvrtc: ") + what + " failed: " + api().GetErrorString(r));
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// The CUDA include folder: $LATHE_CUDA_INCLUDE, else the toolkit's the build found.
std::string include_dir() {
  if (const char* e = std::getenv("LATHE_CUDA_INCLUDE"); e && *e) return e;
  std::string d = LATHE_CUDA_INCLUDE_DIR;
  if (auto semi = d.find(';'); semi != std::string::npos) d = d.substr(0, semi);  // a CMake list
  return d;
}

}  // namespace

std::string annotate_log(const std::string& log, const std::string& source) {
  std::vector<std::string> src = split_lines(source);
  std::vector<std::string> lines = split_lines(log);
  auto trim = [](const std::string& s) {
    auto a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    out += line + "\n";
    // "name(LINE): error: …"
    auto open = line.find('(');
    auto close = line.find("): ", open == std::string::npos ? 0 : open);
    if (open == std::string::npos || close == std::string::npos || close <= open + 1) continue;
    std::string num = line.substr(open + 1, close - open - 1);
    if (num.find_first_not_of("0123456789") != std::string::npos) continue;
    size_t n = std::stoul(num);
    if (n < 1 || n > src.size()) continue;
    // NVRTC 13 quotes the line itself, with a caret under the column: nothing to add
    if (i + 1 < lines.size() && !trim(src[n - 1]).empty() && trim(lines[i + 1]) == trim(src[n - 1])) continue;
    std::string ln = std::to_string(n);
    out += std::string(ln.size() < 6 ? 6 - ln.size() : 0, ' ') + ln + " | " + src[n - 1] + "\n";
  }
  return out;
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, const NvrtcOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  NvrtcResult r;
  if (o.arch.rfind("sm_", 0) != 0 || o.arch.size() < 5)
    throw UserError("nvrtc: architecture '" + o.arch + "' is not of the form sm_XX (e.g. sm_80, sm_90)");
  r.arch = o.arch;
  std::string digits = o.arch.substr(3);
  std::vector<std::string> opts = {
      (o.ptx ? "--gpu-architecture=compute_" : "--gpu-architecture=sm_") + digits,
      "--std=c++17",
      "--include-path=" + include_dir(),
      "--include-path=" + include_dir() + "/cccl",
      "--device-as-default-execution-space",
  };
  if (o.fast_math) opts.push_back("--use_fast_math");
  if (o.line_info) opts.push_back("-lineinfo");
  for (auto& e : o.extra) opts.push_back(e);
  r.command = "nvrtc";
  for (auto& s : opts) r.command += " " + s;

  const Api& nv = api();
  nvrtcProgram prog = nullptr;
  nvcheck(nv.CreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { api().DestroyProgram(p); });
  std::vector<const char*> argv;
  for (auto& s : opts) argv.push_back(s.c_str());
  nvrtcResult cr = nv.CompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvcheck(nv.GetProgramLogSize(prog, &log_size), "nvrtcGetProgramLogSize");
  std::string log(log_size, '\0');
  if (log_size > 1) nvcheck(nv.GetProgramLog(prog, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (cr != NVRTC_SUCCESS)
    throw UserError("nvrtc: compiling " + name + " for " + o.arch + " failed:\n" + annotate_log(log, source));
  r.warnings = log.empty() ? "" : annotate_log(log, source);
  if (o.ptx) {
    size_t n = 0;
    nvcheck(nv.GetPTXSize(prog, &n), "nvrtcGetPTXSize");
    r.binary.resize(n);
    nvcheck(nv.GetPTX(prog, r.binary.data()), "nvrtcGetPTX");
    r.ptx.assign(r.binary.data(), n && r.binary[n - 1] == '\0' ? n - 1 : n);
  } else {
    size_t n = 0;
    nvcheck(nv.GetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
    r.binary.resize(n);
    nvcheck(nv.GetCUBIN(prog, r.binary.data()), "nvrtcGetCUBIN");
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string nvrtc_unavailable() { return loaded().error; }

std::string nvrtc_version() {
  const Api& nv = api();
  int major = 0, minor = 0;
  nvcheck(nv.Version(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_archs() {
  const Api& nv = api();
  int n = 0;
  nvcheck(nv.GetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> a(n);
  if (n) nvcheck(nv.GetSupportedArchs(a.data()), "nvrtcGetSupportedArchs");
  std::vector<std::string> out;
  for (int x : a) out.push_back("sm_" + std::to_string(x));
  return out;
}

}  // namespace lathe::cuda
