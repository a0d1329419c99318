// rnn_grad_test.cpp — grad() through the fused recurrence, Extern "rnn" (core/ir/rnn_op.h):
// the node's gradient is that of its steps unrolled (core/frontend/rnn_unrolled.h). Checked
// three ways on the interpreter: the unrolled expansion computes what the node's reference
// kernel computes; its gradient in f64 matches central differences; and the gradient taken
// through the node (f32) matches directional finite differences of the node itself and the
// f64 gradient. LSTM (peepholes, clip, initial states, input_forget, reverse, sequence
// lengths outside [0, T]), GRU in both reset modes, RNN, non-default activations, odd sizes,
// the projection computed inside the node (X, WT, xb operands).
#include <gtest/gtest.h>

#include <cmath>

#include "core/frontend/autodiff.h"
#include "core/frontend/rnn_unrolled.h"
#include "core/interp/interp.h"
#include "core/ir/build.h"
#include "core/runtime/compare.h"
#include "tests/autodiff/gradcheck.h"

namespace lathe {
namespace {

using testing::randt;

struct Case {
  RnnKind kind = RnnKind::Lstm;
  int64_t T = 4, B = 2, H = 3, extra = 2;  // extra: XP columns besides this direction's (col0 = 1)
  bool reverse = false, h0 = false, c0 = false, peep = false, lens = false, lbr = false, rbh = false, clip = false,
       input_forget = false;
  std::vector<RnnAct> acts = {};
  int64_t I = 0;    // > 0: the node computes its projections from X [T·B, I] and WT [I, XW]
  bool xb = false;  // … plus xb [XW]
};

RnnSpec spec_of(const Case& c) {
  RnnSpec s;
  s.kind = c.kind;
  s.T = c.T, s.B = c.B, s.H = c.H;
  s.XW = s.gates() * c.H + c.extra, s.col0 = c.extra > 0 ? 1 : 0;
  s.reverse = c.reverse;
  s.has_h0 = c.h0, s.has_c0 = c.c0, s.has_peep = c.peep, s.has_lens = c.lens, s.has_rbh = c.rbh;
  s.lbr = c.lbr, s.input_forget = c.input_forget;
  s.has_clip = c.clip, s.clip = 1.3f;
  if (c.kind == RnnKind::Lstm) s.act[0] = {RnnActKind::Sigmoid}, s.act[1] = {RnnActKind::Tanh}, s.act[2] = {RnnActKind::Tanh};
  if (c.kind == RnnKind::Gru) s.act[0] = {RnnActKind::Sigmoid}, s.act[1] = {RnnActKind::Tanh};
  if (c.kind == RnnKind::Rnn) s.act[0] = {RnnActKind::Tanh};
  for (size_t i = 0; i < c.acts.size(); ++i) s.act[i] = c.acts[i];
  s.has_proj = c.I > 0, s.I = c.I, s.has_xb = c.xb;
  return s;
}

std::string label(const Case& c) {
  const char* k[] = {"RNN", "GRU", "LSTM"};
  return std::string(k[static_cast<int>(c.kind)]) + " T" + std::to_string(c.T) + " B" + std::to_string(c.B) + " H" +
         std::to_string(c.H) + (c.reverse ? " reverse" : "") + (c.h0 ? " h0" : "") + (c.c0 ? " c0" : "") +
         (c.peep ? " peep" : "") + (c.lens ? " lens" : "") + (c.lbr ? " lbr" : "") + (c.rbh ? " rbh" : "") +
         (c.clip ? " clip" : "") + (c.input_forget ? " input_forget" : "") + (c.acts.empty() ? "" : " acts") +
         (c.I ? " proj I" + std::to_string(c.I) : "") + (c.xb ? " xb" : "");
}

// The operands' shapes, in the node's order; lens (i32) is the one that takes no gradient.
std::vector<testing::GradInput> operands(const Case& c, DType dt) {
  const RnnSpec s = spec_of(c);
  const int64_t GH = s.gates() * c.H;
  auto scaled = [](double k) { return [k](double v) { return v * k; }; };
  std::vector<testing::GradInput> v;
  v.push_back({{c.T * c.B, c.I > 0 ? c.I : s.XW}, scaled(0.8), true, dt});
  v.push_back({{c.H, GH}, scaled(0.5), true, dt});
  if (c.h0) v.push_back({{c.B, c.H}, scaled(0.5), true, dt});
  if (c.c0) v.push_back({{c.B, c.H}, scaled(0.5), true, dt});
  if (c.peep) v.push_back({{3 * c.H}, scaled(0.5), true, dt});
  if (c.lens) {
    testing::GradInput l{{c.B}, {}, false, DType::I32};
    for (int64_t b = 0; b < c.B; ++b) l.fixed.push_back(b % 4 == 0 ? c.T + 3 : b % 4 == 1 ? -2 : double((b * 5) % (c.T + 1)));
    v.push_back(l);
  }
  if (c.rbh) v.push_back({{c.H}, scaled(0.5), true, dt});
  if (c.I > 0) v.push_back({{c.I, s.XW}, scaled(0.5), true, dt});
  if (c.xb) v.push_back({{s.XW}, scaled(0.5), true, dt});
  return v;
}

TensorMap values_of(const std::vector<testing::GradInput>& ops, DType dt, uint64_t seed) {
  TensorMap m;
  for (size_t i = 0; i < ops.size(); ++i) {
    HostTensor r = randt(ops[i].shape, seed * 100 + i, DType::F64);
    HostTensor v(ops[i].dtype == DType::I32 ? DType::I32 : dt, ops[i].shape);
    for (int64_t k = 0; k < v.numel(); ++k) v.set_f64(k, ops[i].fixed.empty() ? ops[i].map(r.get_f64(k)) : ops[i].fixed.at(k));
    m["x" + std::to_string(i)] = v;
  }
  return m;
}

// the unrolled expansion in f64 against central differences
void gradcheck_unrolled(const Case& c) {
  SCOPED_TRACE(label(c));
  const RnnSpec s = spec_of(c);
  testing::gradcheck(label(c), operands(c, DType::F64), [&](const std::vector<Tensor>& in) { return rnn_unrolled(s, in); });
}

// the node (f32): its reference kernel's result is the expansion's; grad() through it matches
// the f64 expansion's gradient and directional finite differences of the node
void check_node(const Case& c) {
  SCOPED_TRACE(label(c));
  const RnnSpec s = spec_of(c);
  std::vector<testing::GradInput> ops = operands(c, DType::F32);
  std::vector<Tensor> in, in64, params, params64;
  for (size_t i = 0; i < ops.size(); ++i) {
    Shape sh;
    for (int64_t d : ops[i].shape) sh.push_back(SymInt(d));
    in.push_back(input("x" + std::to_string(i), sh, ops[i].dtype));
    in64.push_back(ops[i].differentiate ? to(in.back(), DType::F64) : in.back());
    if (ops[i].differentiate) params.push_back(in.back()), params64.push_back(in64.back());
  }
  auto opt = [&](int i) { return i < 0 ? nullptr : in[static_cast<size_t>(i)].node(); };
  Tensor y(rnn_call(s, in[0].node(), in[1].node(), opt(s.in_h0()), opt(s.in_c0()), opt(s.in_peep()), opt(s.in_lens()),
                    opt(s.in_rbh()), opt(s.in_wt()), opt(s.in_xb())));
  Tensor w = input("w", y.shape(), DType::F32);
  Tensor loss = sum(y * w);
  std::vector<Tensor> g = grad(loss, params);
  Tensor y64 = rnn_unrolled(s, in64);
  std::vector<Tensor> g64 = grad(sum(y64 * to(w, DType::F64)), params64);
  std::vector<std::pair<std::string, NodeRef>> outs{{"loss", loss.node()}, {"y", y.node()}, {"y64", y64.node()}};
  for (size_t i = 0; i < g.size(); ++i) {
    outs.push_back({"g" + std::to_string(i), g[i].node()});
    outs.push_back({"h" + std::to_string(i), g64[i].node()});
  }
  Graph graph = Graph::from_outputs(outs);
  int rnn_nodes = 0;
  for (NodeRef n : graph.toposort()) rnn_nodes += rnn_spec(n).has_value();
  EXPECT_EQ(rnn_nodes, 1) << "the forward keeps its fused node";
  TensorMap vals = values_of(ops, DType::F32, 7);
  vals["w"] = randt(shape_values(y.shape()), 77, DType::F32);
  TensorMap got = interpret(graph, vals);
  std::string why;
  EXPECT_TRUE(allclose(got.at("y"), got.at("y64"), 1e-5, 1e-6, &why)) << "forward: " << why;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_TRUE(allclose(got.at("g" + std::to_string(i)), got.at("h" + std::to_string(i)), 1e-4, 1e-5, &why))
        << "gradient " << i << " against the f64 expansion: " << why;
  }
  // directional differences of the node itself: (L(x + e·d) - L(x - e·d)) / 2e ≈ <dL/dx, d>
  Graph loss_only = Graph::from_outputs({{"loss", loss.node()}});
  size_t p = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].differentiate) continue;
    const std::string name = "x" + std::to_string(i);
    const HostTensor& gi = got.at("g" + std::to_string(p++));
    HostTensor d = randt(ops[i].shape, 500 + i, DType::F32);
    double analytic = 0;
    for (int64_t k = 0; k < d.numel(); ++k) analytic += gi.get_f64(k) * d.get_f64(k);
    const double e = 2e-3;  // small: a step across a clip bound would bend the difference
    TensorMap plus = vals, minus = vals;
    plus[name] = vals[name].clone(), minus[name] = vals[name].clone();
    for (int64_t k = 0; k < d.numel(); ++k) {
      plus[name].set_f64(k, vals[name].get_f64(k) + e * d.get_f64(k));
      minus[name].set_f64(k, vals[name].get_f64(k) - e * d.get_f64(k));
    }
    double numeric = (interpret(loss_only, plus).at("loss").get_f64(0) - interpret(loss_only, minus).at("loss").get_f64(0)) / (2 * e);
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "directional derivative along operand " << i;
  }
}

const RnnAct kHardSigmoid{RnnActKind::HardSigmoid, 0.3f, 0.45f}, kSoftsign{RnnActKind::Softsign}, kElu{RnnActKind::Elu, 0.9f},
    kScaledTanh{RnnActKind::ScaledTanh, 1.1f, 0.7f}, kSoftplus{RnnActKind::Softplus}, kAffine{RnnActKind::Affine, 0.6f, 0.1f},
    kLeaky{RnnActKind::LeakyRelu, 0.05f};

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({});
  v.push_back({.T = 5, .B = 1, .H = 5, .extra = 0, .reverse = true, .h0 = true, .c0 = true, .peep = true, .clip = true});
  v.push_back({.T = 6, .B = 5, .H = 2, .lens = true});
  v.push_back({.T = 3, .B = 2, .H = 4, .h0 = true, .peep = true, .input_forget = true,
               .acts = {kHardSigmoid, kSoftsign, kElu}});
  v.push_back({.kind = RnnKind::Gru, .T = 4, .B = 3, .H = 3, .h0 = true});
  v.push_back({.kind = RnnKind::Gru, .T = 5, .B = 2, .H = 4, .reverse = true, .lens = true, .lbr = true, .rbh = true, .clip = true});
  v.push_back({.kind = RnnKind::Gru, .T = 3, .B = 1, .H = 5, .lbr = true, .acts = {kScaledTanh, kAffine}});
  v.push_back({.kind = RnnKind::Rnn, .T = 7, .B = 2, .H = 3, .reverse = true, .h0 = true});
  v.push_back({.kind = RnnKind::Rnn, .T = 4, .B = 4, .H = 2, .lens = true, .acts = {kSoftplus}});
  v.push_back({.kind = RnnKind::Rnn, .T = 3, .B = 1, .H = 4, .clip = true, .acts = {kLeaky}});
  // the projection inside the node: gradients of X, WT and xb too
  v.push_back({.T = 4, .B = 3, .H = 3, .reverse = true, .c0 = true, .peep = true, .lens = true, .I = 5, .xb = true});
  v.push_back({.kind = RnnKind::Gru, .T = 3, .B = 2, .H = 4, .extra = 0, .lbr = true, .rbh = true, .I = 3, .xb = true});
  v.push_back({.kind = RnnKind::Gru, .T = 4, .B = 1, .H = 3, .h0 = true, .I = 2});
  v.push_back({.kind = RnnKind::Rnn, .T = 5, .B = 2, .H = 3, .I = 7});
  return v;
}

TEST(RnnGrad, UnrolledMatchesFiniteDifferences) {
  for (const Case& c : cases()) gradcheck_unrolled(c);
}

TEST(RnnGrad, ThroughTheFusedNode) {
  for (const Case& c : cases()) check_node(c);
}

// the gradient unrolls the steps; past the limit it is a user error naming it, not a hang
TEST(RnnGrad, TooManyStepsIsAUserError) {
  Case c{.T = kRnnUnrolledMaxSteps + 1, .B = 1, .H = 2, .extra = 0};
  RnnSpec s = spec_of(c);
  Tensor xp = input("xp", {SymInt(c.T), SymInt(8)}), rt = input("rt", {SymInt(2), SymInt(8)});
  Tensor y(rnn_call(s, xp.node(), rt.node(), nullptr, nullptr, nullptr, nullptr, nullptr));
  try {
    grad(sum(y), {xp, rt});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 4096"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
