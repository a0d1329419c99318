// conv_case.h — a 2-D convolution case shared by the tests of convolutions lowered to the
// packed GEMM (conv_shapes, pack_per_panel, conv_window, contraction*): its shape and
// options, a readable label, the conv2d node it builds (constant weights: sin_weights, step
// 0.37) and the one-conv graph.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/graph.h"
#include "test_env.h"

namespace lathe::test {

struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  std::vector<int64_t> stride, pad, dil;
  int64_t groups = 1;
  bool constant = false;  // weights a constant (prepacked) rather than an input
  bool bias = false;      // an input bias "b" of k channels
};

// conv2d of `x` with the case's weights: constant (seeded by k) or the input `wname`
inline Tensor conv_on(Tensor x, const ConvCase& t, const std::string& wname = "w") {
  Conv2dOptions o;
  o.stride = t.stride;
  o.padding = t.pad;
  o.dilation = t.dil;
  o.groups = t.groups;
  std::vector<int64_t> ws{t.k, t.c / t.groups, t.r, t.s};
  Tensor w = t.constant ? from_host(sin_weights(ws, static_cast<double>(t.k), 0.37)) : input(wname, {t.k, t.c / t.groups, t.r, t.s});
  std::optional<Tensor> b;
  if (t.bias) b = input("b", {t.k});
  return conv2d(x, w, b, o);
}

// y = conv2d(x, w[, b]) of the input x
inline Graph conv_graph(const ConvCase& t) {
  return Graph::from_outputs({{"y", conv_on(input("x", {t.n, t.c, t.h, t.w}), t).node()}});
}

inline std::string label(const ConvCase& t) {
  auto v = [](const std::vector<int64_t>& x) { return std::to_string(x[0]) + "," + std::to_string(x[1]); };
  return "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " " + std::to_string(t.h) + "x" + std::to_string(t.w) +
         " k" + std::to_string(t.k) + " " + std::to_string(t.r) + "x" + std::to_string(t.s) + " stride " + v(t.stride) +
         " pad " + v(t.pad) + " dil " + v(t.dil) + " groups " + std::to_string(t.groups) + (t.constant ? " const" : "") +
         (t.bias ? " bias" : "");
}

}  // namespace lathe::test
