// pretty.h — text renderings shared by the REPL, `lathe` commands and Lua __tostring:
// tensors abbreviated like NumPy, graph summaries, node one-liners.
#pragma once
#include <string>

#include "core/ir/graph.h"
#include "core/runtime/host_tensor.h"

namespace lathe::script {

// NumPy-like: "tensor([[1, 2], [3, 4]], f32)"; more than `threshold` elements are
// summarized with `edge` items at each end of every axis ("...").
std::string format_value(const HostTensor& t, int64_t threshold = 1000, int edge = 3);
// One number as the tensor printer writes it (integers without ".0", floats with %g).
std::string format_scalar(double v, DType dt);

// Graph summary: node count by op, inputs and outputs with dtypes and shapes, symbols.
std::string graph_summary(const Graph& g);
// "%12 = Add(%3, %7) f32[4, 3]  (from softmax)".
std::string node_line(NodeRef n);

// ANSI colour helpers; empty strings when colour is off (not a TTY, NO_COLOR set).
struct Colors {
  bool on = false;
  const char* dim() const { return on ? "\x1b[2m" : ""; }
  const char* red() const { return on ? "\x1b[31m" : ""; }
  const char* green() const { return on ? "\x1b[32m" : ""; }
  const char* cyan() const { return on ? "\x1b[36m" : ""; }
  const char* bold() const { return on ? "\x1b[1m" : ""; }
  const char* reset() const { return on ? "\x1b[0m" : ""; }
};

}  // namespace lathe::script
