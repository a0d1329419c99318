// lower_signal.cpp — ONNX DFT, STFT and MelWeightMatrix.
//
// DFT is a matmul against a constant basis built at import time: the transformed axis is
// moved next to the complex axis (last), the two are flattened to [.., N·C] (C = 1 for a
// real signal, 2 for complex) and multiplied by W [N·C, 2·K], whose column 2k / 2k + 1 is
// the real / imaginary part of bin k (K = N, or N/2 + 1 when onesided). The angles are
// taken from n·k mod N so long transforms keep full precision. This is O(N²) per signal,
// fine for the sizes models use it at (spectrograms of a few hundred points); a length
// whose basis exceeds kMaxBasis elements is unsupported rather than a huge constant.
// dft_length truncates or zero-pads the axis; inverse uses e^{+iθ} and divides by N.
//
// STFT gathers the frames (frame f = samples f·step … f·step + length - 1) with one
// index_select, multiplies them by the window and takes the DFT of each frame along its
// own axis. MelWeightMatrix is folded to a constant, as the ONNX reference computes it
// (triangular filters between mel-spaced bin indices).
#include <cmath>
#include <cstdio>
#include <string>

#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMaxBasis = int64_t(1) << 24;  // elements of one DFT basis

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// An integer scalar input (0-D or one element).
int64_t int_scalar(const NodeCtx& c, size_t i, const char* what) {
  std::vector<int64_t> v = c.ints_in(i);
  if (v.size() != 1) c.fail(std::string(what) + " must be one integer, got " + std::to_string(v.size()) + " values");
  return v[0];
}

// The DFT of x along axis `ax` (x: [.., L, .., C], C = 1 or 2, ax != rank - 1), of length
// n (truncating or zero-padding the axis), forward or inverse, all N bins or N/2 + 1.
Tensor dft(const NodeCtx& c, Tensor x, int ax, int64_t n, bool inverse, bool onesided) {
  int r = x.rank();
  DType out_dt = x.dtype();
  DType dt = out_dt == DType::F64 ? DType::F64 : DType::F32;
  if (!x.shape()[r - 1].is_const() || (x.shape()[r - 1].value() != 1 && x.shape()[r - 1].value() != 2))
    c.fail("the last dim holds the real / imaginary parts and must be 1 or 2, got " + x.describe());
  const int64_t cc = x.shape()[r - 1].value();
  if (onesided && cc == 2) c.fail("onesided output needs a real signal (last dim 1), got " + x.describe());
  if (!x.shape()[ax].is_const()) c.unsupported("a DFT along a symbolic dim");
  if (n <= 0 || n > c.max_elements())
    c.fail("dft_length must be in [1, " + std::to_string(c.max_elements()) + "], got " + std::to_string(n));
  const int64_t len = x.shape()[ax].value();
  const int64_t k_bins = onesided ? n / 2 + 1 : n;
  if (n * cc > kMaxBasis / (2 * k_bins))
    c.unsupported("a DFT of length " + std::to_string(n) + " (its dense basis would hold " + std::to_string(n * cc) +
                  " x " + std::to_string(2 * k_bins) + " values; Lathe's DFT is a matmul)");
  // [others.., ax, last]
  std::vector<int> perm;
  for (int d = 0; d < r - 1; ++d) if (d != ax) perm.push_back(d);
  perm.push_back(ax);
  perm.push_back(r - 1);
  x = permute(to(x, dt), perm);
  if (n < len) x = narrow(x, r - 2, 0, n);
  if (n > len) {
    std::vector<std::pair<SymInt, SymInt>> pads(static_cast<size_t>(r), {SymInt(0), SymInt(0)});
    pads[static_cast<size_t>(r - 2)] = {SymInt(0), SymInt(n - len)};
    x = pad(x, pads, Scalar(0));
  }
  Shape lead(x.shape().begin(), x.shape().end() - 2);
  Tensor flat = reshape(x, {shape_numel(lead), SymInt(n * cc)});
  HostTensor w(dt, {n * cc, 2 * k_bins});
  const double sgn = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < k_bins; ++k) {
      // e^{sgn·iθ}, θ = 2π·(i·k mod n)/n; (xr + i·xi)(cos θ + i·sgn·sin θ)
      double th = 2 * kPi * static_cast<double>((i * k) % n) / static_cast<double>(n);
      double co = std::cos(th) * scale, si = sgn * std::sin(th) * scale;
      int64_t row = i * cc, col = 2 * k;
      w.set_f64(row * 2 * k_bins + col, co);        // xr -> real
      w.set_f64(row * 2 * k_bins + col + 1, si);    // xr -> imag
      if (cc == 2) {
        w.set_f64((row + 1) * 2 * k_bins + col, -si);     // xi -> real
        w.set_f64((row + 1) * 2 * k_bins + col + 1, co);  // xi -> imag
      }
    }
  Tensor y = matmul(flat, from_host(w));
  Shape ys = lead;
  ys.push_back(SymInt(k_bins));
  ys.push_back(SymInt(2));
  y = reshape(y, ys);
  std::vector<int> inv(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) inv[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
  return to(permute(y, inv), out_dt);
}

void dft_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (!is_float(x.dtype())) c.fail("input must be float, got " + x.describe());
  int r = x.rank();
  if (r < 2) c.fail("input must be [.., signal, 1 or 2], got " + x.describe());
  int64_t a = c.attr_int("axis", 1);  // opset 17 (an input from opset 20, which Lathe does not read yet)
  // accepted: [-r, -2] and [0, r - 2] (the last dim holds the complex parts)
  if (a < -r || a > r - 2 || a == -1)
    c.fail("axis " + std::to_string(a) + " is out of range for an input of rank " + std::to_string(r) +
           " (the last dim holds the real / imaginary parts)");
  int ax = static_cast<int>(a < 0 ? a + r : a);
  if (!x.shape()[ax].is_const()) c.unsupported("a DFT along a symbolic dim");
  int64_t n = c.has(1) ? int_scalar(c, 1, "dft_length") : x.shape()[ax].value();
  bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  c.set(0, dft(c, x, ax, n, inverse, onesided));
}

void stft_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (!is_float(x.dtype())) c.fail("signal must be float, got " + x.describe());
  if (x.rank() != 3) c.fail("signal must be [batch, length, 1 or 2], got " + x.describe());
  if (!x.shape()[1].is_const()) c.unsupported("an STFT of a signal of symbolic length");
  const int64_t len = x.shape()[1].value();
  int64_t step = int_scalar(c, 1, "frame_step");
  std::optional<Tensor> window = c.opt_in(2);
  if (window && (window->rank() != 1 || !window->shape()[0].is_const()))
    c.fail("window must be 1-D with a constant length, got " + window->describe());
  int64_t flen = c.has(3) ? int_scalar(c, 3, "frame_length") : window ? window->shape()[0].value() : -1;
  if (flen < 0) c.fail("needs a window or a frame_length");
  if (window && window->shape()[0].value() != flen)
    c.fail("window has " + std::to_string(window->shape()[0].value()) + " samples but frame_length is " + std::to_string(flen));
  if (step <= 0) c.fail("frame_step must be positive, got " + std::to_string(step));
  if (flen <= 0 || flen > len)
    c.fail("frame_length must be in [1, " + std::to_string(len) + "] (the signal's length), got " + std::to_string(flen));
  bool onesided = c.attr_int("onesided", 1) != 0;
  const int64_t frames = (len - flen) / step + 1;
  if (frames > c.max_elements() / flen) c.fail("too many frames");
  HostTensor idx(DType::I64, {frames * flen});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < flen; ++j) idx.set_i64(f * flen + j, f * step + j);
  Tensor fr = index_select(x, 1, from_host(idx));  // [batch, frames·flen, C]
  fr = reshape(fr, {x.shape()[0], SymInt(frames), SymInt(flen), x.shape()[2]});
  if (window) {
    Tensor wv = *window;
    if (wv.dtype() != x.dtype()) wv = to(wv, x.dtype());
    fr = fr * reshape(wv, {SymInt(1), SymInt(1), SymInt(flen), SymInt(1)});
  }
  c.set(0, dft(c, fr, 2, flen, false, onesided));
}

// As the ONNX reference: num_mel_bins + 2 points evenly spaced in mel between the edges,
// mapped back to hertz and to DFT bin indices floor((dft_length + 1)·hz / sample_rate);
// filter i rises from point i to point i + 1 and falls to point i + 2. The edges' mel
// values and the step are computed in f32 as the reference does with f32 inputs.
void mel_weight_matrix_op(NodeCtx& c) {
  c.only_outputs(1);
  int64_t mels = int_scalar(c, 0, "num_mel_bins"), dft_len = int_scalar(c, 1, "dft_length"),
          rate = int_scalar(c, 2, "sample_rate");
  double lo = c.scalar_in(3), hi = c.scalar_in(4);
  if (mels <= 0) c.fail("num_mel_bins must be positive, got " + std::to_string(mels));
  if (dft_len <= 0) c.fail("dft_length must be positive, got " + std::to_string(dft_len));
  if (rate <= 0) c.fail("sample_rate must be positive, got " + std::to_string(rate));
  if (!(lo >= 0) || !(hi >= lo)) c.fail("the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz");
  const int64_t bins = dft_len / 2 + 1;
  if (mels > c.max_elements() / bins) c.fail("the matrix is too large");
  DType dt = require_dtype(static_cast<int>(c.attr_int("output_datatype", 1)), c.where() + " output_datatype");
  auto mel = [](double hz) {
    float f = static_cast<float>(hz);
    return 2595.0f * std::log10(1.0f + f / 700.0f);
  };
  float lo_mel = mel(lo), hi_mel = mel(hi);
  float step = (hi_mel - lo_mel) / static_cast<float>(mels + 2);
  std::vector<int64_t> pt(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    double m = static_cast<double>(i) * static_cast<double>(step) + static_cast<double>(lo_mel);
    double hz = 700.0 * (std::pow(10.0, m / 2595.0) - 1.0);
    double b = std::floor(static_cast<double>(dft_len + 1) * hz / static_cast<double>(rate));
    // points 0 … mels are written (left and center of a filter); the last one only bounds
    // the last filter's falling edge (exclusive)
    double limit = static_cast<double>(i == mels + 1 ? bins : bins - 1);
    if (!(b >= 0) || b > limit)
      c.fail("upper_edge_hertz " + fmt_g(hi) + " maps past the last DFT bin (" + std::to_string(bins - 1) +
             "); it must be at most about sample_rate / 2 = " + fmt_g(static_cast<double>(rate) / 2));
    pt[static_cast<size_t>(i)] = static_cast<int64_t>(b);
  }
  HostTensor out(DType::F64, {bins, mels});
  for (int64_t i = 0; i < mels; ++i) {
    int64_t l = pt[i], m = pt[i + 1], h = pt[i + 2];
    if (m == l) {
      out.set_f64(m * mels + i, 1.0);
    } else {
      for (int64_t j = l; j <= m; ++j) out.set_f64(j * mels + i, static_cast<double>(j - l) / static_cast<double>(m - l));
    }
    for (int64_t j = m; j < h; ++j) out.set_f64(j * mels + i, static_cast<double>(h - j) / static_cast<double>(h - m));
  }
  c.set(0, to(from_host(out), dt));
}

}  // namespace

void add_signal_ops(OpTable& t) {
  t["DFT"] = dft_op;
  t["STFT"] = stft_op;
  t["MelWeightMatrix"] = mel_weight_matrix_op;
}

}  // namespace lathe::onnx_import
