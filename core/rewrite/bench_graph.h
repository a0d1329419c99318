// bench_graph.h — the graph of the `rewrite` benchmark: a long random chain of Add / Mul /
// Neg / Max over one input, sprinkled with x+0, 1*x, Neg(Neg(x)), Max(x, x) and constant
// pairs for the simplify and fold rules to remove. Deterministic for a seed. Used by
// `lathe bench --only rewrite` and tests/bench_rewrite.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/ir/graph.h"

namespace lathe {

// About target_nodes primitive requests (hash-consing shares ~12%: 112k give ~100k nodes).
Graph make_rewrite_benchmark_graph(size_t target_nodes, uint32_t seed);

}  // namespace lathe
