// quant_info.h — what a quantized graph does around one node, for the inspector and tests.
//
// Quantization has no op of its own in Lathe's primitive set: a dequantize is
// Cast(f32, x_int [− zp]) · scale, a quantize is Cast(int8, clamp(round(v · 1/s) + zp)),
// the quantize pass (quantize.h) and the qdq rules (qdq_rules.cpp) build integer
// contractions whose i32 sums are rescaled the same way. describe_quantization() finds
// those sites near a node and reads their parameters back out of the graph:
//
//   Dequantize  a float Mul whose factors (through Views and float Casts) are an integer
//               value (an 8-bit tensor, or the i32 sums of an integer contraction, with an
//               optional constant zero point subtracted) and scales: constants (per tensor
//               or per channel) or values computed at run time (dynamic quantization's
//               per-row activation scale).
//   Quantize    a Cast to an 8-bit integer type fed by round/clamp/zero-point additions of a
//               float product with a constant (or 1/constant) scale.
//
// Nothing here changes a graph; it is pattern reading over the primitive ops.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace lathe {

struct QuantScale {
  NodeRef node = nullptr;   // the Const (or the node computing it at run time)
  bool constant = false;
  bool inverse = false;     // the graph multiplies by 1/value (a Recip of it)
  int64_t count = 1;        // values (1: per tensor)
  double min = 0, max = 0;  // over its values (constant only)
};

struct QuantSite {
  enum class Kind { Dequantize, Quantize } kind = Kind::Dequantize;
  NodeRef site = nullptr;      // the Mul (dequantize) or the Cast to 8 bits (quantize)
  NodeRef integer = nullptr;   // the integer tensor read (dequantize) or written (quantize)
  bool contraction = false;    // `integer` is the i32 sum of an integer contraction
  std::vector<QuantScale> scales;
  NodeRef zero_point = nullptr;   // a Const, or nullptr (symmetric: 0)
  // One line each, for display: "dequantize at %12: f32 = (u8 %4 [1, 768] - zero point) · scale",
  // "scale %5: 2304 values in [0.0012, 0.0098]", "zero point %6: 128".
  std::vector<std::string> lines() const;
};

// Users of a node in the graph at hand (the inspector has them indexed).
using UsersFn = std::function<std::vector<NodeRef>(NodeRef)>;

// The quantization sites at n, among its inputs up to two ops away and its users up to three
// (Views and Copies on the way do not count),
// nearest first (at most `limit`).
std::vector<QuantSite> describe_quantization(NodeRef n, const UsersFn& users, size_t limit = 3);

}  // namespace lathe
