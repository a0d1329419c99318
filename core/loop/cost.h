// cost.h — FLOPs and bytes of a kernel, estimated from its loop IR, for the profiler's
// GFLOP/s, GB/s and roofline columns.
//
// FLOPs: every arithmetic op on non-index values (× lanes), times the trip count of the
// loops around it (extents evaluated with the run's dim values). Matmul kernels count
// exactly 2·M·N·K, and so do extern sgemm calls (from their M, N, K) and integer (int8)
// contractions, GEMM or plain reduction, saturating pairs (qdq-sat16) or not: 2 per u8/i8
// multiply-add, as `lathe bench`'s matmul-int8 counts its GOP/s. Bytes: each buffer the kernel touches, once (SPEC.md's convention).
#pragma once
#include <cstdint>

#include "core/ir/symbolic.h"
#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

struct KernelCost {
  double flops = 0;
  double bytes = 0;
};

KernelCost estimate_cost(const LoopFunc& f, const KernelGraph& kg, const Bindings& dims);

// Evaluates an i64 expression given values for its variables; false if one is unknown.
bool eval_index(const ExprRef& e, const std::map<std::string, int64_t, std::less<>>& env, int64_t& out);

}  // namespace lathe::loop
