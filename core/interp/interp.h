// interp.h — the reference interpreter: the oracle every backend, pass and rewrite is
// tested against. Runs any graph on host memory for every dtype, exactly as ops.def says
// (conventions in core/interp/README.md). Favors clarity and exactness over speed, but a
// 4096×4096 softmax finishes in seconds.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

using TensorMap = std::map<std::string, HostTensor>;

// Runs g. `inputs` are keyed by Input name; symbolic dims are bound from their shapes
// (UserError on a missing input, a dtype mismatch or inconsistent dims). Returns the
// outputs keyed by output name. Assign outputs also appear in *updated (keyed by the
// target Input's name) when updated != nullptr.
TensorMap interpret(const Graph& g, const TensorMap& inputs, TensorMap* updated = nullptr);

// Per-node timing, for `lathe run --backend interp --profile/--trace`.
struct NodeTiming {
  NodeRef node;
  double start_us, dur_us;  // from the start of interpret()
};
struct InterpOptions {
  Bindings bindings;                        // symbols bound up front (`lathe run --bind B=4`);
                                            // dims the inputs imply must agree with them
  TensorMap* updated = nullptr;             // as above
  std::vector<NodeTiming>* timings = nullptr;  // filled in evaluation order when given
};
TensorMap interpret(const Graph& g, const TensorMap& inputs, const InterpOptions& options);

// Binds the graph's symbolic dims from the given input tensors (UserError on conflicts).
Bindings bind_symbols(const Graph& g, const TensorMap& inputs);
Bindings bind_symbols(const Graph& g, const TensorMap& inputs, const Bindings& given);

// Evaluates one node from its input values (used by constant folding and tests).
HostTensor eval_node(NodeRef n, const std::vector<HostTensor>& inputs, const Bindings& b = {});

// Converts a tensor to another dtype exactly as the Cast op does (a copy when equal).
HostTensor cast_tensor(const HostTensor& t, DType to);

}  // namespace lathe
