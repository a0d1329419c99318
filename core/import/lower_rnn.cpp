// lower_rnn.cpp — ONNX RNN, GRU and LSTM (opsets 7–14, layout 0 and 1).
//
// Design. The input projections of every step are one GEMM, [T·B, I] × [I, G·H] (G gates)
// per direction, plus the input and recurrent biases folded in once. Constant weights are
// stored transposed when imported (W as [I, D·G·H], R as [H, G·H] per direction), so products
// read their B operand along contiguous rows.
//
// The layer is one Extern "rnn" kernel per direction (core/ir/rnn_op.h) that computes its
// direction's projections and then runs the T steps in a loop inside, reading the layer's
// input X directly (a layer's X is often the last one's output, a view of its result): the
// interpreter's reference (core/interp/eval_rnn.cpp), the
// CPU library kernel of c and llvm (backends/library_rnn.cpp), the cuda rendering
// (backends/cuda/render_rnn.cpp). Its result [T + 1 or 2, B, H] holds Y's rows and the last
// states, which Y, Y_h and Y_c view. This covers f32 layers whose batch size is a constant.
//
// Otherwise (f64 / f16, a symbolic batch, or LATHE_RNN=unrolled) the sequence length must be
// a constant and the recurrence is unrolled into the one graph, so the whole layer is still
// one compiled program (no trip through the host per step): the projections one GEMM kernel
// over all steps and directions, [T·B, I] × [I, D·G·H]. Each step then adds one
// [B, H] × [H, G·H] GEMM of the hidden state (GRU without linear_before_reset: two, the
// candidate gate's after the reset gate) and the fused gate arithmetic. Y is stacked along T
// with a balanced tree of two-part concatenations (log₂ T levels rather than one T-way sum of
// padded pieces). At batch 1 the step's product is a row reduction (a vector of G·H
// accumulators gains h[k] times one contiguous row of Rᵀ per k) rather than G·H dot products
// over strided rows. A step reads its row of the projections (and, with sequence_lens, its
// step number) at an offset the launch supplies (core/loop/base_offsets.h), so all steps
// after the first are the same kernels and compile once.
//
// Attributes: direction (forward / reverse / bidirectional), activations with
// activation_alpha / activation_beta (consumed in order by the activations that take
// them), clip (on the gate pre-activations), hidden_size, input_forget (LSTM),
// linear_before_reset (GRU), layout. Inputs: sequence_lens (steps at or past a batch
// entry's length keep its state and output zeros; the reverse direction therefore starts
// at that entry's last step), initial_h, initial_c, peepholes P. All outputs.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"
#include "core/ir/rnn_op.h"

namespace lathe::onnx_import {
namespace {

enum class Kind { Rnn, Gru, Lstm };

constexpr int64_t kMaxSteps = 4096;  // per direction

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

bool takes_alpha(const std::string& n) {
  return n == "LeakyRelu" || n == "ThresholdedRelu" || n == "ScaledTanh" || n == "HardSigmoid" || n == "Elu" ||
         n == "Affine";
}
bool takes_beta(const std::string& n) { return n == "ScaledTanh" || n == "HardSigmoid" || n == "Affine"; }

Tensor apply(const NodeCtx& c, const Act& a, const Tensor& x) {
  const std::string& n = a.name;
  if (n == "Sigmoid") return sigmoid(x);
  if (n == "Tanh") return tanh(x);
  if (n == "Relu") return relu(x);
  if (n == "LeakyRelu") return where(lt(x, 0), x * a.alpha, x);
  if (n == "ThresholdedRelu") return where(gt(x, a.alpha), x, zeros_like(x));
  if (n == "ScaledTanh") return tanh(x * a.beta) * a.alpha;
  if (n == "HardSigmoid") return clamp(x * a.alpha + a.beta, Scalar(0.0), Scalar(1.0));
  if (n == "Elu") return where(lt(x, 0), (exp(x) - 1.0) * a.alpha, x);
  if (n == "Softsign") return x / (abs(x) + 1.0);
  if (n == "Softplus") return log(exp(x) + 1.0);
  if (n == "Affine") return x * a.alpha + a.beta;
  c.unsupported("recurrent activation '" + n + "'");
}

// Default alpha/beta of an activation (those of the matching ONNX operator).
Act make_act(const std::string& raw) {
  std::string n = raw;
  // ONNX names are case-insensitive here in practice ("tanh" appears in exported models)
  static const char* names[] = {"Sigmoid", "Tanh", "Relu", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
                                "HardSigmoid", "Elu", "Softsign", "Softplus", "Affine"};
  for (const char* k : names) {
    std::string a = k, b = raw;
    for (auto& ch : a) ch = static_cast<char>(std::tolower(ch));
    for (auto& ch : b) ch = static_cast<char>(std::tolower(ch));
    if (a == b) n = k;
  }
  Act r{n};
  if (n == "LeakyRelu") r.alpha = 0.01;
  else if (n == "ThresholdedRelu" || n == "Elu") r.alpha = 1.0;
  else if (n == "HardSigmoid") { r.alpha = 0.2; r.beta = 0.5; }
  else if (n == "ScaledTanh" || n == "Affine") { r.alpha = 1.0; r.beta = 1.0; }
  return r;
}

// Rows [lo, hi) of R[d] ([G·H, H]) transposed to a contiguous [H, hi - lo]: the step's product
// h × Rᵀ then reads the weight row by row along its output (the row-reduction lowering:
// a vector of outputs accumulates h[k] × one contiguous row per k) instead of one dot product
// per output over a strided row. A constant R is transposed here, once; any other R by a
// copy kernel that runs once per run, before the steps.
// src [D, N, K] (a weight as ONNX stores it) -> [K, (d1 - d0)·(hi - lo)]: rows [lo, hi) of
// src[d0], then of src[d0 + 1], …, each transposed into columns.
HostTensor transposed_rows(const HostTensor& src, int64_t d0, int64_t d1, int64_t lo, int64_t hi) {
  const int64_t N = src.shape()[1], K = src.shape()[2], n = hi - lo, cols = (d1 - d0) * n;
  const size_t es = dtype_size(src.dtype());
  HostTensor out(src.dtype(), {K, cols});
  const std::byte* s = static_cast<const std::byte*>(src.data());
  std::byte* o = static_cast<std::byte*>(out.data());
  for (int64_t d = d0; d < d1; ++d)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < K; ++k)
        std::memcpy(o + (k * cols + (d - d0) * n + j) * es, s + ((d * N + lo + j) * K + k) * es, es);
  return out;
}

// The fused recurrence (core/ir/rnn_op.h: one kernel per direction that loops over the
// steps) covers f32 layers of a constant batch size; anything else, or LATHE_RNN=unrolled,
// takes the unrolled graph below.
bool fused_applies(const Tensor& x, const SymInt& batch) {
  const char* e = std::getenv("LATHE_RNN");
  if (e && std::string(e) == "unrolled") return false;
  return x.dtype() == DType::F32 && batch.is_const() && batch.value() > 0;
}

std::optional<HostTensor> constant_input(const NodeCtx& c, size_t i) {
  try {
    return c.const_in(i);
  } catch (const OnnxUnsupported&) {
    return std::nullopt;
  }
}

Tensor recurrent_weight(const std::optional<HostTensor>& rc, const Tensor& r, int d, int64_t lo, int64_t hi) {
  if (!rc) return Tensor(prim::copy(t(slice(select(r, 0, d), 0, lo, hi)).node()));
  return from_host(transposed_rows(*rc, d, d + 1, lo, hi));
}

// A balanced tree of two-part concatenations of unsqueezed pieces along `axis`.
Tensor stack_tree(const std::vector<Tensor>& parts, size_t lo, size_t hi, int axis) {
  if (hi - lo == 1) return unsqueeze(parts[lo], axis);
  size_t mid = lo + (hi - lo) / 2;
  // each level is its own small kernel: fused, the levels would read every piece
  // through T masked views per element
  return Tensor(prim::copy(concat({stack_tree(parts, lo, mid, axis), stack_tree(parts, mid, hi, axis)}, axis).node()));
}

void recurrent_op(NodeCtx& c, Kind kind) {
  const int G = kind == Kind::Lstm ? 4 : kind == Kind::Gru ? 3 : 1;
  c.only_outputs(kind == Kind::Lstm ? 3 : 2);
  Tensor x = c.in(0), w = c.in(1), r = c.in(2);
  if (!is_float(x.dtype())) c.fail("X must be a float tensor, got " + x.describe());
  require_same_dtype(c, x, w);
  require_same_dtype(c, x, r);
  int layout = static_cast<int>(c.attr_int("layout", 0));
  if (layout != 0 && layout != 1) c.fail("layout must be 0 or 1");
  if (x.rank() != 3) c.fail("X must be 3-D, got " + x.describe());
  if (layout == 1) x = permute(x, {1, 0, 2});  // -> [T, B, I]
  if (!x.shape()[0].is_const()) c.unsupported("a symbolic sequence length " + x.shape()[0].to_string());
  const int64_t T = x.shape()[0].value();
  const SymInt B = x.shape()[1], I = x.shape()[2];
  if (T <= 0) c.fail("the sequence length must be positive");
  if (T > kMaxSteps && !fused_applies(x, B)) c.unsupported("a sequence of " + std::to_string(T) + " steps (the recurrence is unrolled; at most " + std::to_string(kMaxSteps) + ")");
  std::string dir = c.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.fail("unknown direction '" + dir + "'");
  const int D = dir == "bidirectional" ? 2 : 1;
  if (w.rank() != 3 || r.rank() != 3) c.fail("W and R must be 3-D, got " + w.describe() + " and " + r.describe());
  if (!r.shape()[2].is_const()) c.unsupported("a symbolic hidden size");
  const int64_t H = r.shape()[2].value();
  if (c.has_attr("hidden_size") && c.attr_int("hidden_size", 0) != H)
    c.fail("hidden_size " + std::to_string(c.attr_int("hidden_size", 0)) + " disagrees with R " + r.describe());
  if (w.shape() != Shape{D, G * H, I}) c.fail("W " + w.describe() + " must be [" + std::to_string(D) + ", " + std::to_string(G * H) + ", input_size]");
  if (r.shape() != Shape{D, G * H, H}) c.fail("R " + r.describe() + " must be [" + std::to_string(D) + ", " + std::to_string(G * H) + ", " + std::to_string(H) + "]");
  std::optional<Tensor> bias = c.opt_in(3), seq = c.opt_in(4), h0 = c.opt_in(5), c0, peep;
  if (bias && bias->shape() != Shape{D, 2 * G * H}) c.fail("B " + bias->describe() + " must be [" + std::to_string(D) + ", " + std::to_string(2 * G * H) + "]");
  if (kind == Kind::Lstm) {
    c0 = c.opt_in(6);
    peep = c.opt_in(7);
    if (peep && peep->shape() != Shape{D, 3 * H}) c.fail("P " + peep->describe() + " must be [" + std::to_string(D) + ", " + std::to_string(3 * H) + "]");
  }
  auto state_in = [&](std::optional<Tensor>& s, const char* what) {
    if (!s) return;
    if (s->rank() == 3 && layout == 1) s = permute(*s, {1, 0, 2});
    if (s->shape() != Shape{D, B, H}) c.fail(std::string(what) + " " + s->describe() + " must be [num_directions, batch, hidden]");
    s = to(*s, x.dtype());
  };
  state_in(h0, "initial_h");
  state_in(c0, "initial_c");
  if (seq) {
    if (!is_int(seq->dtype()) || seq->shape() != Shape{B}) c.fail("sequence_lens must be an int32 [batch], got " + seq->describe());
    if (auto lens = [&]() -> std::optional<HostTensor> { try { return c.const_in(4); } catch (const OnnxUnsupported&) { return std::nullopt; } }()) {
      for (int64_t k = 0; k < lens->numel(); ++k)
        if (lens->get_i64(k) < 0 || lens->get_i64(k) > T)
          c.fail("sequence_lens[" + std::to_string(k) + "] = " + std::to_string(lens->get_i64(k)) + " is outside [0, " + std::to_string(T) + "]");
    }
  }
  double clip = c.attr_float("clip", 0);
  bool has_clip = c.has_attr("clip");
  if (has_clip && !(clip > 0)) c.fail("clip must be positive");
  bool input_forget = kind == Kind::Lstm && c.attr_int("input_forget", 0) != 0;
  bool lbr = kind == Kind::Gru && c.attr_int("linear_before_reset", 0) != 0;

  // activations per direction: RNN f; GRU f, g; LSTM f, g, h
  const size_t per = kind == Kind::Rnn ? 1 : kind == Kind::Gru ? 2 : 3;
  std::vector<std::string> names;
  if (const auto* a = c.find_attr("activations")) for (const auto& s : a->strings()) names.push_back(s);
  if (names.empty()) {
    for (int d = 0; d < D; ++d) {
      if (kind == Kind::Rnn) names.push_back("Tanh");
      else if (kind == Kind::Gru) { names.push_back("Sigmoid"); names.push_back("Tanh"); }
      else { names.push_back("Sigmoid"); names.push_back("Tanh"); names.push_back("Tanh"); }
    }
  }
  if (names.size() == per && D == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per * D) c.fail("activations lists " + std::to_string(names.size()) + " functions, expected " + std::to_string(per * D));
  std::vector<float> alphas = c.attr_floats("activation_alpha"), betas = c.attr_floats("activation_beta");
  std::vector<Act> acts;
  size_t ia = 0, ib = 0;
  for (auto& n : names) {
    Act a = make_act(n);
    if (takes_alpha(a.name) && ia < alphas.size()) a.alpha = alphas[ia++];
    if (takes_beta(a.name) && ib < betas.size()) a.beta = betas[ib++];
    acts.push_back(a);
  }

  auto clipped = [&](const Tensor& t) { return has_clip ? clamp(t, Scalar(-clip), Scalar(clip)) : t; };
  // All input projections at once: [T·B, I] × [I, D·G·H] (+ the input biases, and the
  // recurrent ones too except GRU's candidate gate under linear_before_reset).
  // (a constant W is stored transposed, [I, D·G·H], so the GEMM reads B along its rows)
  std::optional<HostTensor> w_const = constant_input(c, 1);
  Tensor wt = w_const ? from_host(transposed_rows(*w_const, 0, D, 0, G * H)) : t(reshape(w, {SymInt(D * G * H), I}));
  Tensor xin = reshape(x, {SymInt(T) * B, I});
  Tensor rb_h;  // GRU candidate recurrent bias [D, H] when it cannot be folded
  Tensor xbias;  // the biases folded into the projections, [D·G·H]
  if (bias) {
    Tensor wb = slice(*bias, 1, 0, G * H), rb = slice(*bias, 1, G * H, 2 * G * H);
    Tensor fold = wb + rb;
    if (kind == Kind::Gru && lbr) {
      fold = concat({slice(wb + rb, 1, 0, 2 * H), slice(wb, 1, 2 * H, 3 * H)}, 1);
      rb_h = slice(rb, 1, 2 * H, 3 * H);
    } else if (kind == Kind::Gru) {
      fold = wb + rb;  // r ⊙ (H·Rh) + Rbh: the bias is outside the product, so it folds
    }
    xbias = reshape(fold, {SymInt(D * G * H)});
  }
  std::optional<HostTensor> r_const = constant_input(c, 2);
  if (fused_applies(x, B)) {
    // one Extern "rnn" per direction: the loop over the steps runs inside the kernel, and so
    // do the input projections of its direction (the `proj` form of rnn_op.h: no GEMM kernel
    // and no [T·B, D·G·H] buffer of projections between the layers)
    std::vector<RnnAct> racts;
    for (const Act& a : acts) {
      auto k = rnn_act_named(a.name);
      if (!k) c.unsupported("recurrent activation '" + a.name + "'");
      racts.push_back({k->kind, static_cast<float>(a.alpha), static_cast<float>(a.beta)});
    }
    std::vector<Tensor> outs;
    if (!I.is_const()) c.unsupported("a symbolic input size " + I.to_string());
    // a W known only at run time is transposed by a copy kernel once per run (the kernel
    // reads WT row by row)
    Tensor wt_op = w_const ? wt : Tensor(prim::copy(wt.node()));
    std::optional<Tensor> xb;  // the same for both directions
    for (int d = 0; d < D; ++d) {
      RnnSpec sp;
      sp.kind = kind == Kind::Lstm ? RnnKind::Lstm : kind == Kind::Gru ? RnnKind::Gru : RnnKind::Rnn;
      sp.T = T, sp.B = B.value(), sp.H = H, sp.XW = D * G * H, sp.col0 = d * G * H;
      sp.reverse = dir == "reverse" || d == 1;
      sp.input_forget = input_forget, sp.lbr = lbr;
      sp.has_clip = has_clip, sp.clip = static_cast<float>(clip);
      for (size_t i = 0; i < per; ++i) sp.act[i] = racts[static_cast<size_t>(d) * per + i];
      auto node = [](const std::optional<Tensor>& t) { return t ? t->node() : nullptr; };
      // an operand known at import time becomes a constant of its own (no copy kernel per
      // run), and is left out when it is all zeros (the kernel's default)
      auto operand = [&](const Tensor& v) -> std::optional<Tensor> {
        std::optional<HostTensor> k = c.fold(v);
        if (!k) return v;
        for (int64_t i = 0; i < k->numel(); ++i)
          if (k->get_f64(i) != 0.0) return from_host(*k);
        return std::nullopt;
      };
      std::optional<Tensor> h0d, c0d, pd, lens, rbh;
      if (h0) h0d = operand(select(*h0, 0, d));
      if (c0) c0d = operand(select(*c0, 0, d));
      if (peep) pd = operand(to(select(*peep, 0, d), DType::F32));
      if (seq) lens = to(*seq, DType::I32);
      if (rb_h.defined()) rbh = operand(to(select(rb_h, 0, d), DType::F32));
      sp.has_h0 = h0d.has_value(), sp.has_c0 = c0d.has_value(), sp.has_peep = pd.has_value(), sp.has_lens = lens.has_value();
      sp.has_rbh = rbh.has_value();
      sp.has_proj = true, sp.I = I.value();
      if (d == 0 && xbias.defined()) xb = operand(to(xbias, DType::F32));
      sp.has_xb = xb.has_value();
      Tensor rt = recurrent_weight(r_const, r, d, 0, G * H);
      outs.push_back(Tensor(rnn_call(sp, xin.node(), rt.node(), node(h0d), node(c0d), node(pd), node(lens), node(rbh),
                                     wt_op.node(), node(xb))));
    }
    // [T + S, B, H] per direction: Y's rows, then the last h (and c)
    auto stack_dirs = [&](int64_t lo, int64_t hi) {  // rows [lo, hi) of each direction -> [hi - lo, D, B, H]
      std::vector<Tensor> v;
      for (auto& o : outs) v.push_back(unsqueeze(slice(o, 0, lo, hi), 1));
      return D == 1 ? v[0] : concat(v, 1);
    };
    if (c.wants(0)) {
      Tensor y = stack_dirs(0, T);  // [T, D, B, H]
      c.set(0, layout == 1 ? permute(y, {2, 0, 1, 3}) : y);
    }
    auto state_out = [&](int64_t row) {
      Tensor st = select(stack_dirs(row, row + 1), 0, 0);  // [D, B, H]
      return layout == 1 ? permute(st, {1, 0, 2}) : st;
    };
    if (c.wants(1)) c.set(1, state_out(T));
    if (kind == Kind::Lstm && c.wants(2)) c.set(2, state_out(T + 1));
    return;
  }
  Tensor xp = matmul(xin, wt);
  if (xbias.defined()) xp = xp + xbias;
  xp = reshape(xp, {SymInt(T), B, SymInt(D * G * H)});

  // The step numbers as a tensor in memory, for the sequence_lens masks: a step reads its
  // number from there rather than as a constant in its code, so every step is the same
  // kernel at another launch offset (core/loop/base_offsets.h) and is compiled once.
  Tensor step_no;
  if (seq) {
    HostTensor steps(seq->dtype(), {T});
    for (int64_t s = 0; s < T; ++s) steps.set_i64(s, s);
    step_no = from_host(steps);
  }
  std::vector<std::vector<Tensor>> ys(static_cast<size_t>(D), std::vector<Tensor>(static_cast<size_t>(T)));
  std::vector<Tensor> hs, cs;
  for (int d = 0; d < D; ++d) {
    bool rev = dir == "reverse" || d == 1;
    const Act* act = &acts[static_cast<size_t>(d) * per];
    Tensor rt, rt_zr, rt_h;  // [H, G·H], contiguous
    if (kind == Kind::Gru && !lbr) {
      rt_zr = recurrent_weight(r_const, r, d, 0, 2 * H);
      rt_h = recurrent_weight(r_const, r, d, 2 * H, 3 * H);
    } else {
      rt = recurrent_weight(r_const, r, d, 0, G * H);
    }
    Tensor h = h0 ? select(*h0, 0, d) : zeros({B, SymInt(H)}, x.dtype());
    Tensor cell = c0 ? select(*c0, 0, d) : zeros({B, SymInt(H)}, x.dtype());
    Tensor pi, po, pf;
    if (peep) {
      Tensor p = select(*peep, 0, d);
      pi = slice(p, 0, 0, H);
      po = slice(p, 0, H, 2 * H);
      pf = slice(p, 0, 2 * H, 3 * H);
    }
    for (int64_t s = 0; s < T; ++s) {
      int64_t step = rev ? T - 1 - s : s;
      ProvenanceScope ps("step" + std::to_string(step));
      Tensor g = slice(select(xp, 0, step), 1, d * G * H, (d + 1) * G * H);  // [B, G·H]
      auto gate = [&](const Tensor& all, int k) { return slice(all, 1, k * H, (k + 1) * H); };
      Tensor hn, cn;
      if (kind == Kind::Rnn) {
        hn = apply(c, act[0], clipped(g + matmul(h, rt)));
      } else if (kind == Kind::Gru) {
        Tensor z, rr, hh;
        if (lbr) {
          Tensor hr = matmul(h, rt);
          z = apply(c, act[0], clipped(gate(g, 0) + gate(hr, 0)));
          rr = apply(c, act[0], clipped(gate(g, 1) + gate(hr, 1)));
          Tensor rec = gate(hr, 2);
          if (rb_h.defined()) rec = rec + select(rb_h, 0, d);
          hh = apply(c, act[1], clipped(gate(g, 2) + rr * rec));
        } else {
          Tensor hr = matmul(h, rt_zr);
          z = apply(c, act[0], clipped(gate(g, 0) + gate(hr, 0)));
          rr = apply(c, act[0], clipped(gate(g, 1) + gate(hr, 1)));
          hh = apply(c, act[1], clipped(gate(g, 2) + matmul(rr * h, rt_h)));
        }
        hn = (1.0 - z) * hh + z * h;
      } else {
        Tensor all = g + matmul(h, rt);
        Tensor ai = gate(all, 0), ao = gate(all, 1), af = gate(all, 2), ac = gate(all, 3);
        if (peep) { ai = ai + pi * cell; af = af + pf * cell; }
        Tensor ig = apply(c, act[0], clipped(ai));
        Tensor fg = input_forget ? 1.0 - ig : apply(c, act[0], clipped(af));
        Tensor cc = apply(c, act[1], clipped(ac));
        cn = fg * cell + ig * cc;
        if (peep) ao = ao + po * cn;
        Tensor og = apply(c, act[0], clipped(ao));
        hn = og * apply(c, act[2], cn);
      }
      // Materialize the state: without a buffer here every later step's kernel would
      // recompute the whole chain of earlier gates (a batch-1 step is a GEMV, which
      // the scheduler fuses into its consumers rather than buffering as a GEMM).
      hn = Tensor(prim::copy(to(hn, x.dtype()).node()));
      if (cn.defined()) cn = Tensor(prim::copy(to(cn, x.dtype()).node()));
      if (seq) {
        Tensor m = unsqueeze(lt(select(step_no, 0, step), *seq), 1);  // [B, 1]
        ys[d][static_cast<size_t>(step)] = where(m, hn, zeros({}, x.dtype()));
        h = where(m, hn, h);
        if (cn.defined()) cell = where(m, to(cn, x.dtype()), cell);
      } else {
        ys[d][static_cast<size_t>(step)] = hn;
        h = hn;
        if (cn.defined()) cell = to(cn, x.dtype());
      }
    }
    hs.push_back(h);
    cs.push_back(cell);
  }
  auto stack_dirs = [&](const std::vector<Tensor>& v) { return stack_tree(v, 0, v.size(), 0); };  // [D, B, H]
  if (c.wants(0)) {
    std::vector<Tensor> per_t;
    for (int64_t s = 0; s < T; ++s) {
      std::vector<Tensor> dd;
      for (int d = 0; d < D; ++d) dd.push_back(ys[d][static_cast<size_t>(s)]);
      per_t.push_back(stack_dirs(dd));
    }
    Tensor y = stack_tree(per_t, 0, per_t.size(), 0);  // [T, D, B, H]
    c.set(0, layout == 1 ? permute(y, {2, 0, 1, 3}) : y);
  }
  auto state_out = [&](const std::vector<Tensor>& v) {
    Tensor s = stack_dirs(v);
    return layout == 1 ? permute(s, {1, 0, 2}) : s;
  };
  if (c.wants(1)) c.set(1, state_out(hs));
  if (kind == Kind::Lstm && c.wants(2)) c.set(2, state_out(cs));
}

}  // namespace

void add_rnn_ops(OpTable& t) {
  t["RNN"] = [](NodeCtx& c) { recurrent_op(c, Kind::Rnn); };
  t["GRU"] = [](NodeCtx& c) { recurrent_op(c, Kind::Gru); };
  t["LSTM"] = [](NodeCtx& c) { recurrent_op(c, Kind::Lstm); };
}

}  // namespace lathe::onnx_import
