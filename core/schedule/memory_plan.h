// memory_plan.h — where each intermediate buffer lives in one arena, reused by lifetime.
//
// Intermediates whose lifetimes (producing kernel .. last reading kernel) do not overlap
// share memory; an elementwise kernel that reads an intermediate for the last time, only at
// the position it writes, writes its result in place over it; a concat operand placed inside
// the concat's output (operand_place.h) lives at its slice. Inputs, outputs and tensor
// constants live outside the arena. The arena is allocated once per program and reused
// across runs.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe {

struct MemoryPlan {
  std::vector<int64_t> offset;   // per buffer: byte offset in the arena, -1 = not in it
  std::vector<int64_t> bytes;    // per buffer: size in bytes
  std::vector<int> in_place_of;  // per buffer: the buffer it overwrites in place, or -1
  int64_t arena_bytes = 0;       // the arena (peak intermediate memory)
  int64_t unshared_bytes = 0;    // what the intermediates would take without reuse
  int64_t io_bytes = 0;          // inputs + outputs + constants
  std::string summary() const;   // "intermediates 12.0 MiB in a 4.0 MiB arena (…); peak 20.0 MiB"
};

MemoryPlan plan_memory(const KernelGraph& kg, const std::vector<loop::LoopFunc>& funcs, const Bindings& dims);

// LATHE_ARENA_STAGGER=1 (default off): large intermediates start at staggered phases
// so that buffers of power-of-two sizes do not share cache sets (memory_plan.cpp).
bool arena_stagger();
// For the n-th staggered buffer of `bytes` (n counted in `count`): {period, phase}.
std::pair<int64_t, int64_t> stagger_of(int64_t bytes, int& count);

}  // namespace lathe
