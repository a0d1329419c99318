// attention_layout.h — how the fused attention kernels (lower_attention.cpp, and the backward's
// lower_attention_bwd.cpp) address their operands.
#pragma once
#include <string>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

// Where an operand's elements are: its buffer, an offset and a stride per dim (0 on size-1
// dims, which broadcast). A materialized operand is row-major; a View the scheduler left
// unmaterialized (a head split or transpose of a buffer: schedule.cpp) is read in place.
struct Layout {
  int buffer = -1;
  ExprRef offset;
  std::vector<ExprRef> strides;
};

Layout attention_layout(const KernelGraph& kg, NodeRef n);

// The layouts of a fused attention kernel's operands (root->inputs) and the buffer parameter
// each reads: a buffer not yet in f.buffers is added as an input named names[i]; two views of
// one buffer share its parameter.
struct AttentionOperands {
  std::vector<Layout> lay;
  std::vector<int> param;
};
AttentionOperands attention_operands(const KernelGraph& kg, LoopFunc& f, const std::vector<NodeRef>& inputs,
                                     const std::vector<std::string>& names);

// K/V's index along a batch dim for Q's index c: c, or c / G when G = qd / kd query heads share
// each K/V head (grouped heads; a size-1 dim has stride 0 and needs none).
inline ExprRef kv_index(ExprRef c, const SymInt& qd, const SymInt& kd) {
  if (kd.is_const() && qd.is_const() && kd.value() > 1 && kd.value() != qd.value())
    return binary(Op::IDiv, c, const_int(qd.value() / kd.value()));
  return c;
}

// What a hand-written fused attention kernel (the CUDA backend's shared-memory FlashAttention,
// backends/cuda/render_attention.cpp) needs of a forward attention kernel: where Q, K, V and
// the mask live, as parameters of the LoopFunc lower_attention_kernel gives (its buffers and
// dims) and i64 expressions over the var "bh" (batch·head) and the runtime dims.
struct AttentionDesc {
  bool causal = false, has_mask = false, stats = false;
  float scale = 1;
  int64_t E = 0, Ev = 0;             // head dims (constant)
  ExprRef B, L, S;                   // batch·heads, query and key lengths
  int q = -1, k = -1, v = -1, mask = -1;  // buffer parameters (0 is the output)
  ExprRef qoff, koff, voff, moff;    // element offsets of bh's matrices
  ExprRef qsL, qsE, ksS, ksE, vsS, vsC, msL, msS;  // row and column strides
  // the backward (attention_bwd_desc): its part, and OS (the stats forward's [.., Ev+1]) and dO
  int part = -1;
  int os = -1, dout = -1;
  ExprRef ooff, goff, osL, osC, gsL, gsC;
};
AttentionDesc attention_desc(const KernelGraph& kg, int kernel);
// What attention_desc and attention_bwd_desc share: fills d's sizes (E, Ev, B, L, S), the parameters, offsets
// (over the var "bh") and strides of Q, K, V and the mask (d.has_mask set first); returns every operand's layout,
// parameter and offset for the backward's further operands. `what` names the kernel in errors.
struct AttentionDescOperands {
  std::vector<Layout> lay;
  std::vector<int> param;
  std::vector<ExprRef> off;
};
AttentionDescOperands describe_attention_operands(const KernelGraph& kg, const Kernel& k, AttentionDesc& d,
                                                  const char* what);
// The same for a fused attention backward kernel (kind "attention_bwd"), its parameters as
// lower_attention_bwd_kernel numbers them (lower_attention_bwd.cpp).
AttentionDesc attention_bwd_desc(const KernelGraph& kg, int kernel);

}  // namespace lathe::loop
