// winograd_import_test.cpp — an ONNX Conv that is 2-D 3x3, stride 1, undilated, one group,
// with constant f32 weights imports as Winograd F(2x2, 3x3) where winograd_pays
// (lower_nn.cpp conv_by_winograd; LATHE_WINOGRAD=all: wherever it applies), with the same
// values as the direct import (LATHE_WINOGRAD=0) on the interpreter; stride 2, dilation,
// groups, input (non-constant) weights and other kernels keep the direct convolution.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <random>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using test::attr_i;
using test::attr_ints;
using test::randt;

struct Case {
  std::vector<int64_t> x;  // [N, C, H, W]
  int64_t M, kernel = 3, stride = 1, dil = 1, group = 1;
  std::vector<int64_t> pads{1, 1, 1, 1};
  bool const_weight = true;
  bool winograd;  // expected to take the Winograd path under LATHE_WINOGRAD=all
};

Graph model(const Case& c, const HostTensor& w, const HostTensor& b) {
  test::OnnxBuilder m(14);
  m.input("x", c.x);
  if (c.const_weight) m.init("w", w);
  else m.input("w", w.shape());
  m.init("b", b);
  auto* n = m.node("Conv", {"x", "w", "b"}, {"y"});
  attr_ints(n, "strides", {c.stride, c.stride});
  attr_ints(n, "dilations", {c.dil, c.dil});
  attr_ints(n, "pads", c.pads);
  attr_i(n, "group", c.group);
  return m.load("winograd.onnx");
}

// the transformed weights U [16, M, C] (provenance cannot tell: nodes are hash-consed, and a
// direct import after a Winograd one shares its first creator's nodes)
bool has_winograd(const Graph& g, const Case& c) {
  const Shape u{16, c.M, c.x[1] / c.group};
  for (NodeRef n : g.toposort())
    if (n->op == Op::Const && n->shape == u) return true;
  return false;
}

TEST(OnnxWinograd, ImportsAsWinogradWhereItApplies) {
  const std::vector<Case> cases = {
      {{1, 7, 13, 11}, 5, 3, 1, 1, 1, {1, 1, 1, 1}, true, true},
      {{3, 5, 7, 7}, 11, 3, 1, 1, 1, {0, 1, 2, 0}, true, true},   // asymmetric pads, batch 3
      {{1, 3, 1, 1}, 2, 3, 1, 1, 1, {1, 1, 1, 1}, true, true},    // a 1x1 map
      {{1, 6, 9, 9}, 4, 3, 2, 1, 1, {1, 1, 1, 1}, true, false},   // stride 2
      {{1, 6, 9, 9}, 4, 3, 1, 2, 1, {2, 2, 2, 2}, true, false},   // dilation 2
      {{1, 6, 9, 9}, 4, 3, 1, 1, 2, {1, 1, 1, 1}, true, false},   // groups 2
      {{1, 6, 9, 9}, 4, 5, 1, 1, 1, {2, 2, 2, 2}, true, false},   // a 5x5 kernel
      {{1, 6, 9, 9}, 4, 3, 1, 1, 1, {1, 1, 1, 1}, false, false},  // input weights
  };
  const char* e = std::getenv("LATHE_WINOGRAD");
  const std::string saved = e ? e : "";
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    HostTensor w = randt({c.M, c.x[1] / c.group, c.kernel, c.kernel}, rng), b = randt({c.M}, rng), x = randt(c.x, rng, 1.0);
    setenv("LATHE_WINOGRAD", "all", 1);
    Graph g = model(c, w, b);
    setenv("LATHE_WINOGRAD", "0", 1);
    Graph direct = model(c, w, b);
    EXPECT_EQ(has_winograd(g, c), c.winograd) << c.x[2] << "x" << c.x[3] << " stride " << c.stride << " dil " << c.dil;
    EXPECT_FALSE(has_winograd(direct, c));
    TensorMap in{{"x", x}};
    if (!c.const_weight) in["w"] = w;
    std::string why;
    EXPECT_TRUE(allclose(interpret(g, in).at("y"), interpret(direct, in).at("y"), 1e-4, 1e-5, &why)) << why;
  }
  if (e) setenv("LATHE_WINOGRAD", saved.c_str(), 1);
  else unsetenv("LATHE_WINOGRAD");
}

// A QDQ model's conv (weights DequantizeLinear of int8, 64 channels: Winograd's size) keeps
// the direct convolution even under LATHE_WINOGRAD=all, for the `qdq` rules' integer
// contraction: the weight folds to a constant, but it is not a literal.
TEST(OnnxWinograd, DequantizedWeightsKeepTheDirectConv) {
  const char* e = std::getenv("LATHE_WINOGRAD");
  const std::string saved = e ? e : "";
  setenv("LATHE_WINOGRAD", "all", 1);
  const int64_t C = 64, M = 64;
  std::mt19937 rng(7);
  HostTensor wq(DType::I8, {M, C, 3, 3});
  for (int64_t i = 0; i < wq.numel(); ++i) wq.set_f64(i, static_cast<double>(static_cast<int>(rng() % 255) - 127));
  HostTensor ws(DType::F32, {}), wz(DType::I8, {});
  ws.set_f64(0, 0.01);
  test::OnnxBuilder m(14);
  m.input("x", {1, C, 14, 14});
  m.init("wq", wq);
  m.init("ws", ws);
  m.init("wz", wz);
  m.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"});
  auto* n = m.node("Conv", {"x", "w"}, {"y"});
  attr_ints(n, "pads", {1, 1, 1, 1});
  Graph g = m.load("winograd_dq.onnx");
  EXPECT_FALSE(has_winograd(g, Case{{1, C, 14, 14}, M, 3, 1, 1, 1, {1, 1, 1, 1}, true, false}));
  HostTensor x = randt({1, C, 14, 14}, rng, 1.0);
  setenv("LATHE_WINOGRAD", "0", 1);
  Graph direct = m.load("winograd_dq.onnx");
  std::string why;
  EXPECT_TRUE(allclose(interpret(g, {{"x", x}}).at("y"), interpret(direct, {{"x", x}}).at("y"), 1e-5, 1e-6, &why)) << why;
  if (e) setenv("LATHE_WINOGRAD", saved.c_str(), 1);
  else unsetenv("LATHE_WINOGRAD");
}

}  // namespace
}  // namespace lathe
