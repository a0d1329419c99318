// tier_plan.cpp — which codes start on the quick tier. See tier_plan.h.
#include "backends/llvm/tier_plan.h"

#include <algorithm>

#include "backends/llvm/compile_program.h"
#include "core/loop/cost.h"

namespace lathe::llvmjit {

std::vector<TierEstimate> plan_tiers(const Program& p, const std::vector<const loop::LoopFunc*>& codes,
                                     const std::unordered_map<std::string, std::string>& code_name, int threads,
                                     const std::string& mode) {
  std::vector<TierEstimate> est(codes.size());
  std::unordered_map<std::string, size_t> index;
  for (size_t c = 0; c < codes.size(); ++c) {
    index[codes[c]->name] = c;
    est[c].compile_ms = kCompileMsPerNode * static_cast<double>(ir_size(*codes[c]));
    est[c].contraction = codes[c]->kind == "matmul" || codes[c]->kind == "attention";
  }
  const Bindings none;
  for (const loop::LoopFunc& f : p.funcs) {
    auto it = code_name.find(f.name);
    if (f.kind == "extern" || it == code_name.end()) continue;
    auto ci = index.find(it->second);
    if (ci == index.end()) continue;
    TierEstimate& e = est[ci->second];
    for (auto& b : f.buffers)
      for (auto& d : p.kg.buffers[b.buffer].shape)
        if (!d.eval(none)) e.known = false;
    loop::KernelCost k = loop::estimate_cost(f, p.kg, none);
    e.run_ms += std::max(k.flops / (kNominalGflops * 1e6), k.bytes / (kNominalGbps * 1e6));
  }
  double t = std::max(1, threads);
  for (auto& e : est) {
    double slowdown = e.contraction ? kQuickSlowdownMatmul : kQuickSlowdown;
    e.quick = mode == "all" || (e.known && (slowdown - 1) * e.run_ms < (1 - kQuickCompileShare) * e.compile_ms / t);
  }
  return est;
}

}  // namespace lathe::llvmjit
