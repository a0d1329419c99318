// random.h — seeded, counter-based random tensors (same seed, same values, everywhere).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/ir/graph.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

// Floats: standard normal. Integers: uniform in [0, 10). Bool: fair coin.
HostTensor random_tensor(DType dt, const std::vector<int64_t>& shape, uint64_t seed);
// One tensor per graph input, seeded by (seed, input position); symbolic dims take their
// value from `bindings` (UserError naming the dim when missing).
std::map<std::string, HostTensor> random_inputs(const Graph& g, uint64_t seed, const Bindings& bindings = {});

}  // namespace lathe
