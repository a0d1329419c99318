// attention_layout.h — how the fused attention kernels (lower_attention.cpp, and the backward's
// lower_attention_bwd.cpp) address their operands.
#pragma once
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

}  // namespace lathe::loop
