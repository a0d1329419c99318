// rnn_grad.cpp — the fused recurrence unrolled into Tensor operations, and its gradient
// (rnn_unrolled.h).
#include <string>

#include "core/frontend/autodiff.h"
#include "core/frontend/detail.h"
#include "core/frontend/nn.h"
#include "core/frontend/rnn_unrolled.h"

namespace lathe {

namespace {

Tensor activate(const RnnAct& a, const Tensor& x) {
  const double al = a.alpha, be = a.beta;
  switch (a.kind) {
    case RnnActKind::Sigmoid: return sigmoid(x);
    case RnnActKind::Tanh: return tanh(x);
    case RnnActKind::Relu: return relu(x);
    case RnnActKind::LeakyRelu: return where(lt(x, 0), x * al, x);
    case RnnActKind::ThresholdedRelu: return where(gt(x, al), x, zeros_like(x));
    case RnnActKind::ScaledTanh: return tanh(x * be) * al;
    case RnnActKind::HardSigmoid: return clamp(x * al + be, Scalar(0.0), Scalar(1.0));
    case RnnActKind::Elu: return where(lt(x, 0), (exp(x) - 1.0) * al, x);
    case RnnActKind::Softsign: return x / (abs(x) + 1.0);
    case RnnActKind::Softplus: return log(exp(x) + 1.0);
    case RnnActKind::Affine: return x * al + be;
    case RnnActKind::Count: break;
  }
  detail::fail("rnn", std::string("unknown activation ") + rnn_act_name(a.kind));
}

}  // namespace

Tensor rnn_unrolled(const RnnSpec& s, const std::vector<Tensor>& in) {
  if (static_cast<int>(in.size()) != s.num_inputs())
    detail::fail("rnn", "expected " + std::to_string(s.num_inputs()) + " operands, got " + std::to_string(in.size()));
  if (s.T > kRnnUnrolledMaxSteps)
    detail::fail("grad", "the gradient of Extern rnn unrolls its " + std::to_string(s.T) + " steps; at most " +
                             std::to_string(kRnnUnrolledMaxSteps));
  const int64_t T = s.T, B = s.B, H = s.H, G = s.gates();
  const DType dt = in[0].dtype();
  auto opt = [&](int i) { return i < 0 ? Tensor() : in[static_cast<size_t>(i)]; };
  Tensor xp0 = in[0];
  if (s.has_proj) {  // X · WT (+ xb): [T·B, XW]
    xp0 = matmul(reshape(in[0], {SymInt(T * B), SymInt(s.I)}), reshape(opt(s.in_wt()), {SymInt(s.I), SymInt(s.XW)}));
    if (s.has_xb) xp0 = xp0 + reshape(opt(s.in_xb()), {SymInt(s.XW)});
  }
  Tensor xp = slice(reshape(xp0, {SymInt(T), SymInt(B), SymInt(s.XW)}), 2, s.col0, s.col0 + G * H);  // [T, B, G·H]
  Tensor rt = reshape(in[1], {SymInt(H), SymInt(G * H)});
  Tensor h = s.has_h0 ? reshape(opt(s.in_h0()), {SymInt(B), SymInt(H)}) : zeros({SymInt(B), SymInt(H)}, dt);
  Tensor c = s.has_c0 ? reshape(opt(s.in_c0()), {SymInt(B), SymInt(H)}) : zeros({SymInt(B), SymInt(H)}, dt);
  Tensor peep = s.has_peep ? reshape(opt(s.in_peep()), {SymInt(3 * H)}) : Tensor();
  Tensor lens = s.has_lens ? reshape(opt(s.in_lens()), {SymInt(B)}) : Tensor();
  Tensor rbh = s.has_rbh ? reshape(opt(s.in_rbh()), {SymInt(H)}) : Tensor();
  auto clip = [&](const Tensor& x) { return s.has_clip ? clamp(x, Scalar(-double(s.clip)), Scalar(double(s.clip))) : x; };
  auto f = [&](const Tensor& x) { return activate(s.act[0], clip(x)); };
  auto gf = [&](const Tensor& x) { return activate(s.act[1], clip(x)); };
  auto part = [&](const Tensor& x, int64_t k) { return slice(x, 1, k * H, (k + 1) * H); };
  std::vector<Tensor> ys(static_cast<size_t>(T));
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = s.reverse ? T - 1 - step : step;
    ProvenanceScope ps("step" + std::to_string(t));
    Tensor x = select(xp, 0, t);  // [B, G·H]
    Tensor hn, cn;
    if (s.kind == RnnKind::Rnn) {
      hn = f(x + matmul(h, rt));
    } else if (s.kind == RnnKind::Gru) {
      Tensor rzr = matmul(h, slice(rt, 1, 0, 2 * H));
      Tensor z = f(part(x, 0) + part(rzr, 0)), r = f(part(x, 1) + part(rzr, 1));
      Tensor rth = slice(rt, 1, 2 * H, 3 * H), hh;
      if (s.lbr) {
        Tensor rec = matmul(h, rth);
        if (rbh.defined()) rec = rec + rbh;
        hh = gf(part(x, 2) + r * rec);
      } else {
        hh = gf(part(x, 2) + matmul(r * h, rth));
      }
      hn = (1.0 - z) * hh + z * h;
    } else {
      Tensor all = x + matmul(h, rt);
      Tensor ai = part(all, 0), ao = part(all, 1), af = part(all, 2), ac = part(all, 3);
      if (peep.defined()) {
        ai = ai + slice(peep, 0, 0, H) * c;
        af = af + slice(peep, 0, 2 * H, 3 * H) * c;
      }
      Tensor ig = f(ai);
      Tensor fg = s.input_forget ? 1.0 - ig : f(af);
      cn = fg * c + ig * gf(ac);
      if (peep.defined()) ao = ao + slice(peep, 0, H, 2 * H) * cn;
      hn = f(ao) * activate(s.act[2], cn);
    }
    if (lens.defined()) {  // steps at or past lens[b] keep entry b's state and output zeros
      Tensor m = unsqueeze(gt(lens, Scalar(t)), 1);  // [B, 1]
      ys[static_cast<size_t>(t)] = where(m, hn, zeros({}, dt));
      h = where(m, hn, h);
      if (cn.defined()) c = where(m, cn, c);
    } else {
      ys[static_cast<size_t>(t)] = hn;
      h = hn;
      if (cn.defined()) c = cn;
    }
  }
  ys.push_back(h);
  if (s.kind == RnnKind::Lstm) ys.push_back(c);
  return stack(ys, 0);
}

std::vector<Tensor> rnn_backward(NodeRef n, const Tensor& g) {
  auto sp = rnn_spec(n);
  if (!sp) detail::fail("grad", "not an rnn node");
  std::vector<Tensor> ins, params;
  std::vector<int> which;  // the operands that carry a gradient
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    ins.emplace_back(n->inputs[i]);
    if (!is_float(n->inputs[i]->dtype)) continue;
    // a Copy as the operand the expansion reads: an operand that is a View (the layer's X
    // reshaped, under the projection) would otherwise fold into the expansion's own reshapes,
    // which then read its source around it, and its gradient would come out zero
    if (n->inputs[i]->op == Op::View) ins.back() = Tensor(prim::copy(n->inputs[i]));
    params.push_back(ins.back()), which.push_back(static_cast<int>(i));
  }
  Tensor y = rnn_unrolled(*sp, ins);
  std::vector<Tensor> gp = grad(y, params, to(g, y.dtype()));
  std::vector<Tensor> out(n->inputs.size());
  for (size_t k = 0; k < which.size(); ++k) out[static_cast<size_t>(which[k])] = gp[k];
  return out;
}

}  // namespace lathe
