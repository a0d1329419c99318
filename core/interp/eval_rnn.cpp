// eval_rnn.cpp — the reference of the fused recurrence, Extern "rnn" (core/ir/rnn_op.h): the
// steps one after another, every product summed and every activation taken in double, the
// states rounded to f32 after each step (as the unfused graph stores them).
#include <algorithm>
#include <cstring>

#include "core/interp/kernels.h"
#include "core/ir/rnn_op.h"

namespace lathe::interp {

HostTensor kernel_rnn(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints) {
  auto sp = rnn_spec_of_ints(ints);
  if (!sp) throw UserError("Extern rnn: malformed ints");
  const RnnSpec& s = *sp;
  if (static_cast<int>(in.size()) != s.num_inputs()) throw UserError("Extern rnn: wrong number of inputs");
  const int64_t T = s.T, B = s.B, H = s.H, G = s.gates(), GH = G * H;
  auto f32 = [&](int i, int64_t n) -> const float* {
    if (i < 0) return nullptr;
    if (in[i].dtype() != DType::F32 || in[i].numel() != n) throw UserError("Extern rnn: operand " + std::to_string(i) + " does not match the spec");
    return static_cast<const float*>(in[i].data());
  };
  const float *xp = f32(0, T * B * (s.has_proj ? s.I : s.XW)), *rt = f32(1, H * GH), *h0 = f32(s.in_h0(), B * H), *c0 = f32(s.in_c0(), B * H),
              *peep = f32(s.in_peep(), 3 * H), *rbh = f32(s.in_rbh(), H);
  const int32_t* lens = nullptr;
  if (s.has_lens) {
    if (in[s.in_lens()].dtype() != DType::I32 || in[s.in_lens()].numel() != B) throw UserError("Extern rnn: lens must be i32 [B]");
    lens = static_cast<const int32_t*>(in[s.in_lens()].data());
  }
  // the projections of this direction's columns, each summed in double and rounded to f32 once
  int64_t XW = s.XW, col0 = s.col0;
  std::vector<float> proj;
  if (s.has_proj) {
    const float *x = xp, *wt = f32(s.in_wt(), s.I * s.XW), *xb = f32(s.in_xb(), s.XW);
    proj.resize(static_cast<size_t>(T * B * GH));
    std::vector<double> acc(static_cast<size_t>(GH));
    for (int64_t row = 0; row < T * B; ++row) {
      for (int64_t j = 0; j < GH; ++j) acc[j] = xb ? xb[s.col0 + j] : 0.0;
      for (int64_t i = 0; i < s.I; ++i) {
        const double xi = x[row * s.I + i];
        const float* w = wt + i * s.XW + s.col0;
        for (int64_t j = 0; j < GH; ++j) acc[j] += xi * w[j];
      }
      for (int64_t j = 0; j < GH; ++j) proj[row * GH + j] = static_cast<float>(acc[j]);
    }
    xp = proj.data(), XW = GH, col0 = 0;
  }
  HostTensor out(DType::F32, {T + s.state_rows(), B, H});
  float* o = static_cast<float*>(out.data());
  std::vector<float> h(static_cast<size_t>(B * H), 0.f), c(static_cast<size_t>(B * H), 0.f);
  if (h0) std::memcpy(h.data(), h0, sizeof(float) * h.size());
  if (c0) std::memcpy(c.data(), c0, sizeof(float) * c.size());
  auto clip = [&](double v) { return s.has_clip ? std::min<double>(s.clip, std::max<double>(-s.clip, v)) : v; };
  auto f = [&](double v) { return rnn_activate(s.act[0], clip(v)); };
  auto g = [&](double v) { return rnn_activate(s.act[1], clip(v)); };
  std::vector<double> pre(static_cast<size_t>(GH));
  std::vector<float> rh(static_cast<size_t>(H)), hn(static_cast<size_t>(H));
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = s.reverse ? T - 1 - step : step;
    for (int64_t b = 0; b < B; ++b) {
      float* y = o + (t * B + b) * H;
      const int64_t len = lens ? std::clamp<int64_t>(lens[b], 0, T) : T;
      if (t >= len) {
        std::fill(y, y + H, 0.f);
        continue;
      }
      float* hb = h.data() + b * H;
      float* cb = c.data() + b * H;
      const float* x = xp + (t * B + b) * XW + col0;
      // the recurrent product h·RT over the gates that read h (GRU without linear_before_reset:
      // its candidate gate reads r ⊙ h, below)
      const int64_t direct = s.kind == RnnKind::Gru && !s.lbr ? 2 * H : GH;
      for (int64_t j = 0; j < direct; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < H; ++k) acc += double(hb[k]) * rt[k * GH + j];
        pre[j] = acc;
      }
      if (s.kind == RnnKind::Rnn) {
        for (int64_t j = 0; j < H; ++j) hn[j] = static_cast<float>(f(x[j] + pre[j]));
      } else if (s.kind == RnnKind::Gru) {
        std::vector<double> z(static_cast<size_t>(H)), r(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          z[j] = f(x[j] + pre[j]);
          r[j] = f(x[H + j] + pre[H + j]);
        }
        if (!s.lbr) {
          for (int64_t k = 0; k < H; ++k) rh[k] = static_cast<float>(r[k] * hb[k]);
          for (int64_t j = 0; j < H; ++j) {
            double acc = 0;
            for (int64_t k = 0; k < H; ++k) acc += double(rh[k]) * rt[k * GH + 2 * H + j];
            pre[2 * H + j] = acc;
          }
        }
        for (int64_t j = 0; j < H; ++j) {
          double hh = s.lbr ? g(x[2 * H + j] + r[j] * (pre[2 * H + j] + (rbh ? rbh[j] : 0.0))) : g(x[2 * H + j] + pre[2 * H + j]);
          hn[j] = static_cast<float>((1.0 - z[j]) * hh + z[j] * hb[j]);
        }
      } else {
        for (int64_t j = 0; j < H; ++j) {
          double ai = x[j] + pre[j], ao = x[H + j] + pre[H + j], af = x[2 * H + j] + pre[2 * H + j],
                 ac = x[3 * H + j] + pre[3 * H + j];
          if (peep) ai += double(peep[j]) * cb[j], af += double(peep[2 * H + j]) * cb[j];
          double ig = f(ai);
          double fg = s.input_forget ? 1.0 - ig : f(af);
          double cn = fg * cb[j] + ig * g(ac);
          float cnf = static_cast<float>(cn);
          if (peep) ao += double(peep[H + j]) * cnf;
          hn[j] = static_cast<float>(f(ao) * rnn_activate(s.act[2], cnf));
          cb[j] = cnf;
        }
      }
      std::memcpy(hb, hn.data(), sizeof(float) * H);
      std::memcpy(y, hn.data(), sizeof(float) * H);
    }
  }
  std::memcpy(o + T * B * H, h.data(), sizeof(float) * h.size());
  if (s.kind == RnnKind::Lstm) std::memcpy(o + (T + 1) * B * H, c.data(), sizeof(float) * c.size());
  return out;
}

}  // namespace lathe::interp
