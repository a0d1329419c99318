// new_ops_test.cpp — Resize, the recurrent layers and the scatter family on models built
// here: LSTM / GRU / RNN against a straightforward host reference for what the node tests
// do not cover (bidirectional, sequence_lens, initial states, peepholes, clip, layout 1),
// and hostile values (a Resize to size 0 or 2^40, a scatter index out of range) that must
// be errors naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <random>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using Builder = test::OnnxBuilder;
using test::attr_f;
using test::attr_i;
using test::attr_s;
using test::randt;

double sigm(double x) { return 1 / (1 + std::exp(-x)); }

// Host LSTM reference: X [T, B, I], W [D, 4H, I], R [D, 4H, H], Bias [D, 8H], P [D, 3H],
// h0/c0 [D, B, H], lens [B]; returns Y [T, D, B, H], Y_h, Y_c.
struct Ref { HostTensor y, yh, yc; };
Ref lstm_ref(const HostTensor& X, const HostTensor& W, const HostTensor& R, const HostTensor& Bi, const HostTensor& P,
             const HostTensor& h0, const HostTensor& c0, const std::vector<int64_t>& lens, int D, double clip) {
  int64_t T = X.shape()[0], B = X.shape()[1], I = X.shape()[2], H = R.shape()[2];
  Ref r{HostTensor(DType::F32, {T, D, B, H}), HostTensor(DType::F32, {D, B, H}), HostTensor(DType::F32, {D, B, H})};
  auto cl = [&](double v) { return clip > 0 ? std::max(-clip, std::min(clip, v)) : v; };
  for (int d = 0; d < D; ++d)
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(H), c(H);
      for (int64_t j = 0; j < H; ++j) { h[j] = h0.get_f64((d * B + b) * H + j); c[j] = c0.get_f64((d * B + b) * H + j); }
      for (int64_t s = 0; s < lens[b]; ++s) {
        int64_t t = d == 1 ? lens[b] - 1 - s : s;
        std::vector<double> g(4 * H);
        for (int64_t k = 0; k < 4 * H; ++k) {
          double v = Bi.get_f64(d * 8 * H + k) + Bi.get_f64(d * 8 * H + 4 * H + k);
          for (int64_t i = 0; i < I; ++i) v += X.get_f64((t * B + b) * I + i) * W.get_f64((d * 4 * H + k) * I + i);
          for (int64_t j = 0; j < H; ++j) v += h[j] * R.get_f64((d * 4 * H + k) * H + j);
          g[k] = v;
        }
        std::vector<double> hn(H), cn(H);
        for (int64_t j = 0; j < H; ++j) {
          double pi = P.get_f64(d * 3 * H + j), po = P.get_f64(d * 3 * H + H + j), pf = P.get_f64(d * 3 * H + 2 * H + j);
          double ig = sigm(cl(g[j] + pi * c[j])), fg = sigm(cl(g[2 * H + j] + pf * c[j])), cc = std::tanh(cl(g[3 * H + j]));
          cn[j] = fg * c[j] + ig * cc;
          double og = sigm(cl(g[H + j] + po * cn[j]));
          hn[j] = og * std::tanh(cn[j]);
        }
        h = hn;
        c = cn;
        for (int64_t j = 0; j < H; ++j) r.y.set_f64(((t * D + d) * B + b) * H + j, h[j]);
      }
      for (int64_t j = 0; j < H; ++j) { r.yh.set_f64((d * B + b) * H + j, h[j]); r.yc.set_f64((d * B + b) * H + j, c[j]); }
    }
  return r;
}

TEST(OnnxRecurrent, BidirectionalLstmWithLengthsStatesPeepholesClip) {
  std::mt19937 rng(7);
  const int64_t T = 5, B = 3, I = 4, H = 6;
  const int D = 2;
  HostTensor X = randt({T, B, I}, rng, 1.0), W = randt({D, 4 * H, I}, rng), R = randt({D, 4 * H, H}, rng),
             Bi = randt({D, 8 * H}, rng), P = randt({D, 3 * H}, rng), h0 = randt({D, B, H}, rng), c0 = randt({D, B, H}, rng);
  std::vector<int64_t> lens{5, 2, 4};
  HostTensor L(DType::I32, {B});
  for (int64_t b = 0; b < B; ++b) L.set_i64(b, lens[b]);
  Builder m(14);
  m.input("X", {T, B, I});
  m.init("W", W); m.init("R", R); m.init("B", Bi); m.init("L", L); m.init("h0", h0); m.init("c0", c0); m.init("P", P);
  auto* n = m.node("LSTM", {"X", "W", "R", "B", "L", "h0", "c0", "P"}, {"Y", "Yh", "Yc"});
  attr_s(n, "direction", "bidirectional");
  attr_i(n, "hidden_size", H);
  attr_f(n, "clip", 0.9f);
  Graph g = m.load();
  TensorMap out = interpret(g, {{"X", X}});
  Ref ref = lstm_ref(X, W, R, Bi, P, h0, c0, lens, D, 0.9);
  std::string why;
  EXPECT_TRUE(allclose(out.at("Y"), ref.y, 1e-4, 1e-5, &why)) << why;
  EXPECT_TRUE(allclose(out.at("Yh"), ref.yh, 1e-4, 1e-5, &why)) << why;
  EXPECT_TRUE(allclose(out.at("Yc"), ref.yc, 1e-4, 1e-5, &why)) << why;
}

TEST(OnnxRecurrent, LayoutOneMatchesLayoutZero) {
  std::mt19937 rng(3);
  const int64_t T = 4, B = 2, I = 3, H = 5;
  HostTensor X = randt({T, B, I}, rng, 1.0), W = randt({1, 3 * H, I}, rng), R = randt({1, 3 * H, H}, rng),
             Bi = randt({1, 6 * H}, rng);
  TensorMap res[2];
  for (int layout = 0; layout < 2; ++layout) {
    Builder m(14);
    m.input("X", layout ? std::vector<int64_t>{B, T, I} : std::vector<int64_t>{T, B, I});
    m.init("W", W); m.init("R", R); m.init("B", Bi);
    auto* n = m.node("GRU", {"X", "W", "R", "B"}, {"Y", "Yh"});
    attr_i(n, "layout", layout);
    attr_i(n, "linear_before_reset", 1);
    attr_s(n, "direction", "reverse");
    HostTensor x = X;
    if (layout) {  // [T, B, I] -> [B, T, I]
      x = HostTensor(DType::F32, {B, T, I});
      for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < I; ++i) x.set_f64((b * T + t) * I + i, X.get_f64((t * B + b) * I + i));
    }
    res[layout] = interpret(m.load(), {{"X", x}});
  }
  // Y: [T, 1, B, H] vs [B, T, 1, H]
  const HostTensor &y0 = res[0].at("Y"), &y1 = res[1].at("Y");
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j)
        EXPECT_NEAR(y0.get_f64((t * B + b) * H + j), y1.get_f64((b * T + t) * H + j), 1e-6);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j)  // reverse: the final state is step 0's output
      EXPECT_NEAR(res[0].at("Yh").get_f64(b * H + j), y0.get_f64(b * H + j), 1e-6);
}

// ---- hostile values ------------------------------------------------------------------------

std::string load_error(Builder& m) {
  try {
    m.load();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void resize_to(Builder& m, std::vector<int64_t> sizes) {
  m.input("x", {1, 1, 4, 4});
  HostTensor s(DType::I64, {4});
  for (int i = 0; i < 4; ++i) s.set_i64(i, sizes[i]);
  m.init("sizes", s);
  m.node("Resize", {"x", "", "", "sizes"}, {"y"});
}

TEST(OnnxHostileOps, ResizeToZeroOrHugeNamesTheNode) {
  Builder a(13), b(13);
  resize_to(a, {1, 1, 0, 4});
  resize_to(b, {1, 1, int64_t(1) << 40, 4});
  for (Builder* m : {&a, &b}) {
    std::string e = load_error(*m);
    EXPECT_NE(e.find("the_Resize"), std::string::npos) << e;
    EXPECT_NE(e.find("sizes must be positive"), std::string::npos) << e;
  }
  Builder c(13);  // a scale that multiplies up past the element cap
  c.input("x", {1, 1, 4, 4});
  HostTensor sc(DType::F32, {4});
  for (int i = 0; i < 4; ++i) sc.set_f64(i, i < 2 ? 1.0 : 1e12);
  c.init("scales", sc);
  c.node("Resize", {"x", "", "scales"}, {"y"});
  std::string e = load_error(c);
  EXPECT_NE(e.find("the_Resize"), std::string::npos) << e;
}

TEST(OnnxHostileOps, ScatterIndexOutOfRangeNamesTheNode) {
  Builder m(16);
  m.input("x", {3, 4});
  HostTensor idx(DType::I64, {1, 2}), upd(DType::F32, {1, 2});
  idx.set_i64(0, 1);
  idx.set_i64(1, 7);
  m.init("i", idx);
  m.init("u", upd);
  m.node("ScatterElements", {"x", "i", "u"}, {"y"});
  std::string e = load_error(m);
  EXPECT_NE(e.find("the_ScatterElements"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(OnnxNewOps, ScatterElementsReductionsAndResizeLinear) {
  // ScatterElements with duplicates: add sums, none keeps the last
  for (std::string red : {"add", "none", "max"}) {
    Builder m(16);
    m.input("x", {1, 5});
    HostTensor idx(DType::I64, {1, 3}), upd(DType::F32, {1, 3});
    idx.set_i64(0, 1); idx.set_i64(1, 3); idx.set_i64(2, -4);  // -4 is 1 again
    upd.set_f64(0, 1.5); upd.set_f64(1, 2); upd.set_f64(2, 4);
    m.init("i", idx);
    m.init("u", upd);
    auto* n = m.node("ScatterElements", {"x", "i", "u"}, {"y"});
    attr_i(n, "axis", 1);
    attr_s(n, "reduction", red);
    HostTensor x(DType::F32, {1, 5});
    for (int k = 0; k < 5; ++k) x.set_f64(k, 10 + k);
    HostTensor y = interpret(m.load(), {{"x", x}}).at("y");
    double want1 = red == "add" ? 11 + 1.5 + 4 : red == "none" ? 4 : 11;
    double want3 = red == "add" ? 13 + 2 : red == "none" ? 2 : 13;
    EXPECT_EQ(y.get_f64(1), want1) << red;
    EXPECT_EQ(y.get_f64(3), want3) << red;
    EXPECT_EQ(y.get_f64(0), 10) << red;
  }
  // Resize linear, align_corners: 2 -> 3 gives the midpoint
  Builder m(13);
  m.input("x", {1, 2});
  HostTensor s(DType::I64, {2});
  s.set_i64(0, 1);
  s.set_i64(1, 3);
  m.init("sizes", s);
  auto* n = m.node("Resize", {"x", "", "", "sizes"}, {"y"});
  attr_s(n, "mode", "linear");
  attr_s(n, "coordinate_transformation_mode", "align_corners");
  HostTensor x(DType::F32, {1, 2});
  x.set_f64(0, 2);
  x.set_f64(1, 6);
  HostTensor y = interpret(m.load(), {{"x", x}}).at("y");
  ASSERT_EQ(y.numel(), 3);
  EXPECT_NEAR(y.get_f64(0), 2, 1e-6);
  EXPECT_NEAR(y.get_f64(1), 4, 1e-6);
  EXPECT_NEAR(y.get_f64(2), 6, 1e-6);
}

// ---- control flow ---------------------------------------------------------------------------

// Loop(M, cond, acc): body (i, cond, acc) -> (cond, acc + x * i, acc); x from the outer scope.
Builder loop_model(int64_t trip) {
  Builder m(13);
  m.input("x", {3});
  HostTensor M(DType::I64, {}), cond(DType::Bool, {}), acc0(DType::F32, {3});
  M.set_i64(0, trip);
  cond.set_i64(0, 1);
  m.init("M", M);
  auto* cp = m.g()->add_initializer();
  cp->set_name("cond");
  cp->set_data_type(onnx::TensorProto::BOOL);
  cp->add_int32_data(1);
  m.init("acc0", acc0);
  auto* n = m.node("Loop", {"M", "cond", "acc0"}, {"acc", "accs"});
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* b = a->mutable_g();
  b->set_name("body");
  for (const char* in : {"i", "c_in", "a_in"}) b->add_input()->set_name(in);
  auto add = [&](const std::string& op, std::vector<std::string> ins, const std::string& out) {
    auto* k = b->add_node();
    k->set_op_type(op);
    k->set_name("inner_" + op);
    for (auto& i : ins) k->add_input(i);
    k->add_output(out);
  };
  add("Identity", {"c_in"}, "c_out");
  add("Cast", {"i"}, "fi");
  auto* cast = b->mutable_node(1)->add_attribute();
  cast->set_name("to");
  cast->set_type(onnx::AttributeProto::INT);
  cast->set_i(onnx::TensorProto::FLOAT);
  add("Mul", {"x", "fi"}, "xi");
  add("Add", {"a_in", "xi"}, "a_out");
  add("Identity", {"a_out"}, "scan_out");
  for (const char* o : {"c_out", "a_out", "scan_out"}) b->add_output()->set_name(o);
  return m;
}

TEST(OnnxControlFlow, LoopUnrollsWithOuterScopeAndScanOutputs) {
  Builder m = loop_model(4);
  HostTensor x(DType::F32, {3});
  for (int k = 0; k < 3; ++k) x.set_f64(k, k + 1);
  TensorMap out = interpret(m.load(), {{"x", x}});
  // acc = x * (0 + 1 + 2 + 3)
  for (int k = 0; k < 3; ++k) EXPECT_EQ(out.at("acc").get_f64(k), 6.0 * (k + 1));
  ASSERT_EQ(out.at("accs").shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(out.at("accs").get_f64(1 * 3 + 2), 3.0);  // after i = 0, 1: x * 1
}

TEST(OnnxHostileOps, LoopTripCountNegativeOrHugeNamesTheNode) {
  for (int64_t trip : {int64_t(-5), int64_t(1) << 40}) {
    Builder m = loop_model(trip);
    std::string e = load_error(m);
    EXPECT_NE(e.find("the_Loop"), std::string::npos) << e;
    EXPECT_NE(e.find(trip < 0 ? "negative" : "iterations"), std::string::npos) << e;
  }
}

TEST(OnnxHostileOps, SequencePositionOutOfRangeNamesTheNode) {
  Builder m(13);
  m.input("x", {2});
  HostTensor pos(DType::I64, {});
  pos.set_i64(0, 3);
  m.init("pos", pos);
  auto* n = m.g()->add_node();
  n->set_op_type("SequenceConstruct");
  n->add_input("x");
  n->add_input("x");
  n->add_output("s");
  m.node("SequenceAt", {"s", "pos"}, {"y"});
  std::string e = load_error(m);
  EXPECT_NE(e.find("the_SequenceAt"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(OnnxControlFlow, IfOnARunTimeConditionSelects) {
  Builder m(13);
  m.input("c", {}, onnx::TensorProto::BOOL);
  m.input("x", {2});
  auto* n = m.node("If", {"c"}, {"y"});
  const char* ops[2] = {"Neg", "Abs"};
  const char* names[2] = {"then_branch", "else_branch"};
  for (int k = 0; k < 2; ++k) {
    auto* a = n->add_attribute();
    a->set_name(names[k]);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* b = a->mutable_g();
    auto* in = b->add_node();
    in->set_op_type(ops[k]);
    in->add_input("x");
    in->add_output(std::string("out") + ops[k]);
    b->add_output()->set_name(std::string("out") + ops[k]);
  }
  Graph g = m.load();
  HostTensor x(DType::F32, {2}), t(DType::Bool, {}), f(DType::Bool, {});
  x.set_f64(0, -3);
  x.set_f64(1, 2);
  t.set_i64(0, 1);
  EXPECT_EQ(interpret(g, {{"c", t}, {"x", x}}).at("y").get_f64(0), 3.0);  // Neg
  EXPECT_EQ(interpret(g, {{"c", f}, {"x", x}}).at("y").get_f64(1), 2.0);  // Abs
  EXPECT_EQ(interpret(g, {{"c", f}, {"x", x}}).at("y").get_f64(0), 3.0);
  EXPECT_EQ(interpret(g, {{"c", t}, {"x", x}}).at("y").get_f64(1), -2.0);
}

}  // namespace
}  // namespace lathe
