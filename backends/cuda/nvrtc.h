// nvrtc.h — compiling CUDA C in process with NVRTC (no GPU needed).
//
// nvrtc_compile() turns one translation unit into a cubin for a real architecture
// ("sm_90", the detected GPU's when there is one) or into PTX for a virtual one. NVRTC's
// diagnostics come back with the offending source line printed under each message, so a
// bad kernel reads like a compiler error in a terminal:
//     k0_add.cu(14): error: identifier "x" is undefined
//        14 |     out[i0] = x + 1.0f;
// Errors throw UserError; warnings are returned (the tests treat them as failures).
#pragma once
#include <string>
#include <vector>

namespace lathe::cuda {

struct NvrtcOptions {
  std::string arch = "sm_90";   // "sm_80", "sm_90", … (cubin); with ptx = true: PTX for compute_XX
  bool ptx = false;             // PTX instead of cubin (the driver JITs it on load)
  bool fast_math = false;       // --use_fast_math (not the default: results must match the interpreter)
  bool line_info = true;        // -lineinfo: profilers map SASS back to the CUDA C
  std::vector<std::string> extra;  // more NVRTC options
};

struct NvrtcResult {
  std::string arch;             // what it was compiled for
  std::vector<char> binary;     // cubin (ELF) or PTX text (NUL-terminated), ready for cuModuleLoadData
  std::string ptx;              // PTX text (when ptx = true)
  std::string warnings;         // diagnostics of a successful compile, with source lines ("" = clean)
  std::string command;          // "nvrtc --gpu-architecture=sm_90 …" for the curious
  double ms = 0;                // compile time
};

// Compiles `source` (named `name` in diagnostics, e.g. "k0_add.cu"). UserError when NVRTC
// reports an error, with the log and the source lines it names.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, const NvrtcOptions& o = {});

// NVRTC is loaded on first use (dlopen: $LATHE_NVRTC, else the toolkit's libnvrtc.so.N the
// build found). "" when it loads, else why not; the functions below throw UserError then.
std::string nvrtc_unavailable();

// "13.0"
std::string nvrtc_version();
// Architectures this NVRTC can target, as "sm_75", "sm_80", …
std::vector<std::string> nvrtc_archs();

// Adds the source line under every "NAME(LINE): …" diagnostic of an NVRTC log.
std::string annotate_log(const std::string& log, const std::string& source);

}  // namespace lathe::cuda
