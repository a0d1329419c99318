// nvrtc.cpp — NVRTC compile to cubin/PTX with annotated diagnostics (see nvrtc.h).
#include "backends/cuda/nvrtc.h"

#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "core/ir/diag.h"

#ifndef LATHE_CUDA_INCLUDE_DIR
#define LATHE_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace lathe::cuda {

namespace {

void nvcheck(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw UserError(std::string("nvrtc: ") + what + " failed: " + nvrtcGetErrorString(r));
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

  nvrtcProgram prog = nullptr;
  nvcheck(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  std::vector<const char*> argv;
  for (auto& s : opts) argv.push_back(s.c_str());
  nvrtcResult cr = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvcheck(nvrtcGetProgramLogSize(prog, &log_size), "nvrtcGetProgramLogSize");
  std::string log(log_size, '\0');
  if (log_size > 1) nvcheck(nvrtcGetProgramLog(prog, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (cr != NVRTC_SUCCESS)
    throw UserError("nvrtc: compiling " + name + " for " + o.arch + " failed:\n" + annotate_log(log, source));
  r.warnings = log.empty() ? "" : annotate_log(log, source);
  if (o.ptx) {
    size_t n = 0;
    nvcheck(nvrtcGetPTXSize(prog, &n), "nvrtcGetPTXSize");
    r.binary.resize(n);
    nvcheck(nvrtcGetPTX(prog, r.binary.data()), "nvrtcGetPTX");
    r.ptx.assign(r.binary.data(), n && r.binary[n - 1] == '\0' ? n - 1 : n);
  } else {
    size_t n = 0;
    nvcheck(nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
    r.binary.resize(n);
    nvcheck(nvrtcGetCUBIN(prog, r.binary.data()), "nvrtcGetCUBIN");
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvcheck(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_archs() {
  int n = 0;
  nvcheck(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> a(n);
  if (n) nvcheck(nvrtcGetSupportedArchs(a.data()), "nvrtcGetSupportedArchs");
  std::vector<std::string> out;
  for (int x : a) out.push_back("sm_" + std::to_string(x));
  return out;
}

}  // namespace lathe::cuda
