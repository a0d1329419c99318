// rnn_op.cpp — the fused recurrence Extern: its attributes, checks and activations (rnn_op.h).
#include "core/ir/rnn_op.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/ir/attr_bits.h"
#include "core/ir/build.h"

namespace lathe {

namespace {

constexpr size_t kInts = 18;  // 19 with the projection (its I last)

// the flags word's bits
constexpr int64_t kH0 = 1, kC0 = 2, kPeep = 4, kLens = 8, kRbh = 16, kInputForget = 32, kLbr = 64, kClip = 128,
                  kProj = 256, kXb = 512, kAllFlags = 1023;

const char* const kActNames[] = {"Sigmoid", "Tanh", "Relu", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
                                 "HardSigmoid", "Elu", "Softsign", "Softplus", "Affine"};

}  // namespace

std::vector<int64_t> rnn_ints(const RnnSpec& s) {
  int64_t flags = (s.has_h0 ? kH0 : 0) | (s.has_c0 ? kC0 : 0) | (s.has_peep ? kPeep : 0) | (s.has_lens ? kLens : 0) |
                  (s.has_rbh ? kRbh : 0) | (s.input_forget ? kInputForget : 0) | (s.lbr ? kLbr : 0) |
                  (s.has_clip ? kClip : 0) | (s.has_proj ? kProj : 0) | (s.has_xb ? kXb : 0);
  std::vector<int64_t> v{static_cast<int64_t>(s.kind), s.T, s.B, s.H, s.XW, s.col0, s.reverse ? 1 : 0, flags, f32_attr_bits(s.clip)};
  for (const RnnAct& a : s.act) {
    v.push_back(static_cast<int64_t>(a.kind));
    v.push_back(f32_attr_bits(a.alpha));
    v.push_back(f32_attr_bits(a.beta));
  }
  if (s.has_proj) v.push_back(s.I);
  return v;
}

std::optional<RnnSpec> rnn_spec_of_ints(const std::vector<int64_t>& v) {
  if (v.size() < kInts || v[0] < 0 || v[0] > 2 || v[6] < 0 || v[6] > 1 || v[7] < 0 || (v[7] & ~int64_t(kAllFlags)))
    return std::nullopt;
  if (v.size() != ((v[7] & kProj) ? kInts + 1 : kInts)) return std::nullopt;
  for (size_t i = 8; i < kInts; ++i)
    if (v[i] < INT32_MIN || v[i] > INT32_MAX) return std::nullopt;
  RnnSpec s;
  s.kind = static_cast<RnnKind>(v[0]);
  s.T = v[1], s.B = v[2], s.H = v[3], s.XW = v[4], s.col0 = v[5];
  s.reverse = v[6] != 0;
  int64_t f = v[7];
  s.has_h0 = f & kH0, s.has_c0 = f & kC0, s.has_peep = f & kPeep, s.has_lens = f & kLens, s.has_rbh = f & kRbh;
  s.input_forget = f & kInputForget, s.lbr = f & kLbr, s.has_clip = f & kClip;
  s.has_proj = f & kProj, s.has_xb = f & kXb;
  if (s.has_proj) s.I = v[kInts];
  s.clip = f32_of_attr_bits(v[8]);
  for (int i = 0; i < 3; ++i) {
    int64_t k = v[9 + 3 * i];
    if (k < 0 || k >= static_cast<int64_t>(RnnActKind::Count)) return std::nullopt;
    s.act[i] = {static_cast<RnnActKind>(k), f32_of_attr_bits(v[10 + 3 * i]), f32_of_attr_bits(v[11 + 3 * i])};
  }
  return s;
}

std::optional<RnnSpec> rnn_spec(NodeRef n) {
  if (!n || n->op != Op::Extern || n->attrs.name != "rnn") return std::nullopt;
  return rnn_spec_of_ints(n->attrs.ints);
}

std::string check_rnn(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints) {
  auto sp = rnn_spec_of_ints(ints);
  if (!sp)
    return "Extern rnn takes 18 ints {kind (0 RNN, 1 GRU, 2 LSTM), T, B, H, XW, col0, reverse, flags, clip bits, "
           "then 3 × (activation, alpha bits, beta bits)}, and I after them when flags has the projection (256)";
  const RnnSpec& s = *sp;
  const int64_t G = s.gates();
  // every size the kernels index with (T·B·XW, (T + 2)·B·H, H·G·H) must fit an int64
  constexpr int64_t kMax = int64_t(1) << 40;
  int64_t tb = 0, txw = 0, hgh = 0;
  if (s.T < 1 || s.B < 1 || s.H < 1 || s.XW < 1 || s.T > kMax || s.B > kMax || s.H > (int64_t(1) << 20) || s.XW > kMax ||
      __builtin_mul_overflow(s.T + 2, s.B, &tb) || tb > kMax || __builtin_mul_overflow(tb, std::max(s.XW, s.H), &txw) ||
      __builtin_mul_overflow(s.H * G, s.H, &hgh))
    return "Extern rnn: T, B, H, XW must be positive and their products below 2^63 (T=" + std::to_string(s.T) +
           ", B=" + std::to_string(s.B) + ", H=" + std::to_string(s.H) + ", XW=" + std::to_string(s.XW) + ")";
  int64_t tbi = 0, ixw = 0;
  if (s.has_proj && (s.I < 1 || s.I > kMax || __builtin_mul_overflow(tb, s.I, &tbi) || __builtin_mul_overflow(s.I, s.XW, &ixw)))
    return "Extern rnn: I must be positive and T·B·I, I·XW below 2^63 (I=" + std::to_string(s.I) + ")";
  if (s.has_xb && !s.has_proj) return "Extern rnn: xb is for the projection only";
  if (s.col0 < 0 || s.col0 > s.XW || s.XW - s.col0 < G * s.H) return "Extern rnn: the gate columns [col0, col0 + G·H) exceed XW";
  if (s.has_c0 && s.kind != RnnKind::Lstm) return "Extern rnn: only LSTM has a cell state";
  if (s.has_peep && s.kind != RnnKind::Lstm) return "Extern rnn: only LSTM has peepholes";
  if (s.input_forget && s.kind != RnnKind::Lstm) return "Extern rnn: input_forget is LSTM's";
  if ((s.lbr || s.has_rbh) && s.kind != RnnKind::Gru) return "Extern rnn: linear_before_reset is GRU's";
  if (s.has_rbh && !s.lbr) return "Extern rnn: rbh is for linear_before_reset only";
  if (s.has_clip && !(s.clip > 0)) return "Extern rnn: clip must be positive";
  if (static_cast<int>(in.size()) != s.num_inputs())
    return "Extern rnn: flags call for " + std::to_string(s.num_inputs()) + " inputs, got " + std::to_string(in.size());
  if (dt != DType::F32) return "Extern rnn is f32 only";
  auto numel_is = [](NodeRef x, int64_t n) { return shape_numel(x->shape) == SymInt(n); };
  auto f32 = [](NodeRef x) { return x->dtype == DType::F32; };
  if (s.has_proj) {
    if (!f32(in[0]) || !numel_is(in[0], s.T * s.B * s.I)) return "Extern rnn: X must be f32 [T·B, I]";
    if (!f32(in[s.in_wt()]) || !numel_is(in[s.in_wt()], s.I * s.XW)) return "Extern rnn: WT must be f32 [I, XW]";
    if (s.has_xb && (!f32(in[s.in_xb()]) || !numel_is(in[s.in_xb()], s.XW))) return "Extern rnn: xb must be f32 [XW]";
  } else if (!f32(in[0]) || !numel_is(in[0], s.T * s.B * s.XW)) {
    return "Extern rnn: XP must be f32 [T·B, XW]";
  }
  if (!f32(in[1]) || !numel_is(in[1], s.H * G * s.H)) return "Extern rnn: RT must be f32 [H, G·H]";
  if (s.has_h0 && (!f32(in[s.in_h0()]) || !numel_is(in[s.in_h0()], s.B * s.H))) return "Extern rnn: h0 must be f32 [B, H]";
  if (s.has_c0 && (!f32(in[s.in_c0()]) || !numel_is(in[s.in_c0()], s.B * s.H))) return "Extern rnn: c0 must be f32 [B, H]";
  if (s.has_peep && (!f32(in[s.in_peep()]) || !numel_is(in[s.in_peep()], 3 * s.H))) return "Extern rnn: P must be f32 [3H]";
  if (s.has_lens && (in[s.in_lens()]->dtype != DType::I32 || !numel_is(in[s.in_lens()], s.B)))
    return "Extern rnn: lens must be i32 [B]";
  if (s.has_rbh && (!f32(in[s.in_rbh()]) || !numel_is(in[s.in_rbh()], s.H))) return "Extern rnn: rbh must be f32 [H]";
  if (shape != Shape{SymInt(s.T + s.state_rows()), SymInt(s.B), SymInt(s.H)})
    return "Extern rnn: result shape must be [T + " + std::to_string(s.state_rows()) + ", B, H]";
  return "";
}

NodeRef rnn_call(const RnnSpec& s, NodeRef xp, NodeRef rt, NodeRef h0, NodeRef c0, NodeRef peep, NodeRef lens, NodeRef rbh,
                 NodeRef wt, NodeRef xb) {
  std::vector<NodeRef> in{xp, rt};
  for (NodeRef x : {h0, c0, peep, lens, rbh, wt, xb})
    if (x) in.push_back(x);
  return prim::extern_call("rnn", in, DType::F32, {SymInt(s.T + s.state_rows()), SymInt(s.B), SymInt(s.H)}, rnn_ints(s));
}

std::optional<RnnAct> rnn_act_named(const std::string& raw) {
  std::string b = raw;
  for (auto& ch : b) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (int k = 0; k < static_cast<int>(RnnActKind::Count); ++k) {
    std::string a = kActNames[k];
    for (auto& ch : a) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (a != b) continue;
    RnnAct r{static_cast<RnnActKind>(k), 0, 0};
    switch (r.kind) {
      case RnnActKind::LeakyRelu: r.alpha = 0.01f; break;
      case RnnActKind::ThresholdedRelu: case RnnActKind::Elu: r.alpha = 1.0f; break;
      case RnnActKind::HardSigmoid: r.alpha = 0.2f, r.beta = 0.5f; break;
      case RnnActKind::ScaledTanh: case RnnActKind::Affine: r.alpha = 1.0f, r.beta = 1.0f; break;
      default: break;
    }
    return r;
  }
  return std::nullopt;
}

bool rnn_act_takes_alpha(RnnActKind k) {
  return k == RnnActKind::LeakyRelu || k == RnnActKind::ThresholdedRelu || k == RnnActKind::ScaledTanh ||
         k == RnnActKind::HardSigmoid || k == RnnActKind::Elu || k == RnnActKind::Affine;
}
bool rnn_act_takes_beta(RnnActKind k) {
  return k == RnnActKind::ScaledTanh || k == RnnActKind::HardSigmoid || k == RnnActKind::Affine;
}
const char* rnn_act_name(RnnActKind k) {
  int i = static_cast<int>(k);
  return i >= 0 && i < static_cast<int>(RnnActKind::Count) ? kActNames[i] : "?";
}

double rnn_activate(const RnnAct& a, double x) {
  const double al = a.alpha, be = a.beta;
  switch (a.kind) {
    case RnnActKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case RnnActKind::Tanh: return std::tanh(x);
    case RnnActKind::Relu: return x < 0 ? 0.0 : x;
    case RnnActKind::LeakyRelu: return x < 0 ? x * al : x;
    case RnnActKind::ThresholdedRelu: return x > al ? x : 0.0;
    case RnnActKind::ScaledTanh: return std::tanh(x * be) * al;
    case RnnActKind::HardSigmoid: return std::min(1.0, std::max(0.0, x * al + be));
    case RnnActKind::Elu: return x < 0 ? (std::exp(x) - 1.0) * al : x;
    case RnnActKind::Softsign: return x / (std::abs(x) + 1.0);
    case RnnActKind::Softplus: return std::log(std::exp(x) + 1.0);
    case RnnActKind::Affine: return x * al + be;
    case RnnActKind::Count: break;
  }
  return x;
}

}  // namespace lathe
