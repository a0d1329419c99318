// tier_plan.h — which of a program's codes a tiered compile (llvm_backend.cpp) starts on the
// quick tier (jit.h) and which it optimizes at once.
//
// The quick tier costs ~6x less compile CPU and runs ~2-7x slower (measured here, one-shot
// `lathe run`, LATHE_LLVM_TIMING=each, CPU ms, full / quick compile, first run full / quick:
// gpt2_small 920 / 100, 496 / 3707 ms; resnet50 3539 / 447, 169 / 967; mobilenet_v2 1819 / 388,
// 38 / 199). A code starts quick when the time its quick code adds to a run is less than the
// compile time the quick tier saves on the compile threads:
//   (slowdown - 1) * run_ms  <  (1 - kQuickCompileShare) * compile_ms / threads
// slowdown: kQuickSlowdownMatmul for contractions (matmul, attention: the register-tiled
// micro-kernels suffer most from the O0 code generator's spills; GPT-2's first run, its
// one-time work included, 7.5x slower all quick), kQuickSlowdown for the rest.
// run_ms: the code's kernels' roofline time at nominal rates (their FLOPs at kNominalGflops,
// bytes at kNominalGbps; loop/cost.h); compile_ms: kCompileMsPerNode per loop IR node
// (ir_size). So a GEMM run many times (GPT-2's projections, the LM head) is optimized at once
// and a convolution run once, or an elementwise tail, starts quick. A code whose sizes are not
// all known at compile time is optimized at once (the untiered behaviour).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/schedule/program.h"

namespace lathe::llvmjit {

constexpr double kQuickSlowdown = 6;         // quick code's run time / the full tier's (2-7x)
constexpr double kQuickSlowdownMatmul = 12;  // the same for contractions
constexpr double kQuickCompileShare = 0.15;  // quick compile CPU / full (0.11-0.22)
constexpr double kCompileMsPerNode = 0.06;   // full-tier CPU ms per loop IR node (0.03-0.12)
constexpr double kNominalGflops = 60;        // for run_ms: a modest 2-core FMA rate
constexpr double kNominalGbps = 10;

struct TierEstimate {
  double run_ms = 0;      // one run of every kernel that uses the code (full tier)
  double compile_ms = 0;  // the full tier's CPU time
  bool known = true;      // every size known at compile time
  bool contraction = false;  // a matmul or attention code (kQuickSlowdownMatmul)
  bool quick = false;     // starts on the quick tier
};

// Per code (codes[c]); code_name: kernel name -> its code's name (extern kernels absent).
// mode: "cost" (the rule above), "all" (every code quick: the cold7 tier, for comparisons).
std::vector<TierEstimate> plan_tiers(const Program& p, const std::vector<const loop::LoopFunc*>& codes,
                                     const std::unordered_map<std::string, std::string>& code_name, int threads,
                                     const std::string& mode);

}  // namespace lathe::llvmjit
