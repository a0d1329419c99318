// lower_resize.cpp — ONNX Resize (opsets 10–19), Upsample (7–9), GridSample (16+) and
// RoiAlign (10+).
//
// Resize is separable: each resized axis is interpolated on its own. Since shapes are
// constant at import time, the taps of every output position are computed on the host,
// exactly as the ONNX reference does it (coordinate transformation → the n input
// positions nearest to x_ori, edge-clamped → coefficients for nearest / linear / cubic,
// renormalized with exclude_outside). Each tap becomes one Take along the axis with a
// constant index vector, times a constant weight vector; nearest is a single Take with no
// weights. Along the innermost axis, taps that repeat with a period of P outputs per Q inputs
// (P, Q <= 8) become P phases of strided slices instead, interleaved (resize_axis_phases;
// LATHE_RESIZE_PHASES=0: the Take form), and that axis is resized first. tf_crop_and_resize positions that fall outside the input take
// extrapolation_value through one Where over the outer product of the per-axis masks.
//
// Output sizes come from `scales` (floor(in · scale)) or `sizes` (with opset-18
// keep_aspect_ratio_policy and axes). A size of zero, a non-positive or non-finite scale,
// or an output larger than the element cap is an error naming the node.
//
// GridSample follows PyTorch's grid_sample (which produced the ONNX reference outputs):
// grid coordinates are unnormalized (align_corners), border / reflection padding moves the
// sampling coordinate into the image, and each of the 1 / 4 / 16 taps (nearest / bilinear
// / bicubic) is a Take over the flattened H·W plane with a run-time index; taps outside
// the image read 0 (zeros padding).
//
// RoiAlign samples a fixed grid of sampling_ratio² points per output bin (computed from
// the run-time rois), bilinearly, with ONNX Runtime's clamping rules, and averages them
// (or, mode max, takes ORT's max of the weighted corners). sampling_ratio 0 (adaptive:
// the grid depends on each roi's size) needs constant rois.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

struct ResizeAttrs {
  std::string mode = "nearest";            // nearest | linear | cubic
  std::string coord = "half_pixel";        // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// One output position of one axis: input indices (clamped) with weights; `inside` is false
// where tf_crop_and_resize extrapolates.
struct Taps {
  std::vector<int64_t> idx;
  std::vector<double> w;
  bool inside = true;
};

std::vector<double> cubic_coeffs(double r, double A) {
  auto far = [A](double t) { return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A; };  // 1 <= t <= 2
  auto near = [A](double t) { return ((A + 2) * t - (A + 3)) * t * t + 1; };      // 0 <= t <= 1
  return {far(r + 1), near(r), near(1 - r), far(2 - r)};
}

std::vector<double> nearest_coeffs(const NodeCtx& c, double r, const std::string& mode) {
  if (r == 1.0) return {0, 1};
  if (mode == "round_prefer_floor") return {r <= 0.5 ? 1.0 : 0.0, r > 0.5 ? 1.0 : 0.0};
  if (mode == "round_prefer_ceil") return {r < 0.5 ? 1.0 : 0.0, r >= 0.5 ? 1.0 : 0.0};
  if (mode == "floor") return {1, 0};
  if (mode == "ceil") return {0, 1};
  c.fail("unknown nearest_mode '" + mode + "'");
}

// The taps for output position x of an axis of `in` elements resized to `out` with scale
// `scale` (roi_lo/roi_hi for tf_crop_and_resize), following the ONNX reference.
Taps taps_for(const NodeCtx& c, const ResizeAttrs& a, int64_t x, int64_t in, int64_t out, double scale,
              double roi_lo, double roi_hi) {
  Taps t;
  double out_w = scale * static_cast<double>(in);
  double xo = 0, xd = static_cast<double>(x), ind = static_cast<double>(in);
  const std::string& m = a.coord;
  if (m == "align_corners") {
    xo = out_w == 1 ? 0.0 : xd * (ind - 1) / (out_w - 1);
  } else if (m == "asymmetric") {
    xo = xd / scale;
  } else if (m == "tf_crop_and_resize") {
    xo = out == 1 ? (roi_hi - roi_lo) * (ind - 1) / 2 : xd * (roi_hi - roi_lo) * (ind - 1) / (out_w - 1);
    xo += roi_lo * (ind - 1);
    if (xo < 0 || xo > ind - 1) { t.inside = false; return t; }
  } else if (m == "pytorch_half_pixel") {
    xo = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (m == "half_pixel") {
    xo = (xd + 0.5) / scale - 0.5;
  } else if (m == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out) / out_w;
    double offset = ind / 2 * (1 - adjustment);
    xo = offset + (xd + 0.5) / scale - 0.5;
  } else if (m == "tf_half_pixel_for_nn") {
    xo = (xd + 0.5) / scale;
  } else {
    c.fail("unknown coordinate_transformation_mode '" + m + "'");
  }
  double fl = std::floor(xo);
  double ratio = xo == fl ? 1.0 : xo - fl;
  std::vector<double> coeffs = a.mode == "nearest" ? nearest_coeffs(c, ratio, a.nearest)
                               : a.mode == "linear" ? std::vector<double>{1 - ratio, ratio}
                                                    : cubic_coeffs(ratio, a.cubic_a);
  int64_t n = static_cast<int64_t>(coeffs.size()), pad = (n + 1) / 2;
  // the n positions of the edge-padded axis [-pad, in + pad) nearest to xo (ties: lower)
  int64_t base = static_cast<int64_t>(fl);
  std::vector<int64_t> cand;
  for (int64_t k = base - n; k <= base + n; ++k)
    if (k >= -pad && k < in + pad) cand.push_back(k);
  std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) {
    double dp = std::fabs(xo - static_cast<double>(p)), dq = std::fabs(xo - static_cast<double>(q));
    return dp != dq ? dp < dq : p < q;
  });
  if (static_cast<int64_t>(cand.size()) < n) c.fail("internal: too few resize neighbours");
  cand.resize(static_cast<size_t>(n));
  std::sort(cand.begin(), cand.end());
  if (a.exclude_outside) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (cand[i] < 0 || cand[i] >= in) coeffs[i] = 0;
      s += coeffs[i];
    }
    if (s != 0) for (auto& v : coeffs) v /= s;
  }
  for (int64_t i = 0; i < n; ++i) {
    t.idx.push_back(std::clamp<int64_t>(cand[i], 0, in - 1));
    t.w.push_back(coeffs[i]);
  }
  return t;
}

// Reshapes a per-position vector [O] so it lines up with `axis` of a rank-r tensor.
Shape along(int rank, int axis, int64_t n) {
  Shape s(rank, SymInt(1));
  s[axis] = n;
  return s;
}

// Periodic taps (LATHE_RESIZE_PHASES, default on): when output position P·i + p reads
// input Q·i + off[p][k] (edge-clamped) with weight w[p][k] for every i — an integer or
// rational scale P/Q with a coordinate mapping affine in x (every mode but align_corners'
// long periods) — the axis is P phases, each a sum of strided slices of the edge-padded
// input times scalar weights, interleaved by a stack on a new axis after `ax`. Along the
// innermost axis this replaces the vector gathers of the Take form (a constant index per
// output element) by contiguous loads and interleaved stores. The padded input is
// materialized (a Copy) so that the phase loads carry no border conditions. Returns an
// undefined tensor where the taps are not periodic with P, Q <= 8 (the Take form is used).
Tensor resize_axis_phases(const Tensor& x, int ax, int64_t out, const std::vector<Taps>& taps, size_t n) {
  int64_t in = x.shape()[ax].value();
  DType dt = x.dtype();
  auto same_w = [dt](double a, double b) {
    return dt == DType::F64 ? a == b : static_cast<float>(a) == static_cast<float>(b);
  };
  for (int64_t P = 1; P <= 8; ++P) {
    int64_t m = (out + P - 1) / P;
    if (m < 3) continue;
    int64_t mid = m / 2;
    if (mid * P + P - 1 >= out) continue;
    for (int64_t Q = 1; Q <= 8; ++Q) {
      // offsets from the middle period; verified for every output position
      std::vector<std::vector<int64_t>> off(static_cast<size_t>(P), std::vector<int64_t>(n));
      std::vector<std::vector<double>> w(static_cast<size_t>(P), std::vector<double>(n));
      for (int64_t p = 0; p < P; ++p)
        for (size_t k = 0; k < n; ++k) {
          const Taps& t = taps[static_cast<size_t>(mid * P + p)];
          off[p][k] = t.idx[k] - Q * mid;
          w[p][k] = t.w[k];
        }
      bool ok = true;
      for (int64_t o = 0; o < out && ok; ++o) {
        const Taps& t = taps[static_cast<size_t>(o)];
        if (!t.inside) { ok = false; break; }
        int64_t i = o / P, p = o % P;
        for (size_t k = 0; k < n && ok; ++k) {
          if (!same_w(t.w[k], w[p][k])) ok = false;
          else if (w[p][k] != 0 && t.idx[k] != std::clamp<int64_t>(Q * i + off[p][k], 0, in - 1)) ok = false;
        }
      }
      if (!ok) continue;
      if (P == 1 && Q == 1) return Tensor();  // nothing periodic to gain (an identity-like axis)
      int64_t lo = 0, hi = in - 1;
      for (int64_t p = 0; p < P; ++p)
        for (size_t k = 0; k < n; ++k) {
          if (w[p][k] == 0) continue;
          lo = std::min(lo, off[p][k]);
          hi = std::max(hi, Q * (m - 1) + off[p][k]);
        }
      int64_t L = -lo, R = hi - (in - 1);
      // the edge-padded input: one copy through a Take with the clamped positions (a gather
      // over the input's size only; unet's 64 x 32 x 34: 20 us one thread where a concat of
      // the edge columns, a masked load per element, took 54)
      Tensor xp = x;
      if (L > 0 || R > 0) {
        int64_t np = in + L + R;
        HostTensor h(DType::I64, {np});
        for (int64_t j = 0; j < np; ++j) h.set_i64(j, std::clamp<int64_t>(j - L, 0, in - 1));
        Shape ps = x.shape();
        ps[ax] = np;
        Tensor iv = expand(reshape(from_host(h), along(x.rank(), ax, np)), ps);
        xp = Tensor(prim::copy(prim::take(x.node(), iv.node(), ax)));
      }
      std::vector<Tensor> phases;
      for (int64_t p = 0; p < P; ++p) {
        Tensor acc;
        for (size_t k = 0; k < n; ++k) {
          if (w[p][k] == 0) continue;
          int64_t start = off[p][k] + L;
          Tensor s = slice(xp, ax, start, start + Q * (m - 1) + 1, Q);
          Tensor term = w[p][k] == 1 ? s : s * scalar(Scalar(w[p][k]), dt);
          acc = acc.defined() ? acc + term : term;
        }
        if (!acc.defined()) {
          Shape s = x.shape();
          s[ax] = m;
          acc = zeros(s, dt);
        }
        phases.push_back(to(acc, dt));
      }
      Tensor y = P == 1 ? phases[0] : stack(phases, ax + 1);
      Shape os = x.shape();
      os[ax] = m * P;
      y = reshape(y, os);
      if (m * P != out) y = narrow(y, ax, 0, out);
      return y;
    }
  }
  return Tensor();
}

bool resize_phases_on() {
  const char* e = std::getenv("LATHE_RESIZE_PHASES");
  return !(e && std::string(e) == "0");
}

// Interpolates axis `ax` of x to `out` positions.
Tensor resize_axis(const NodeCtx& c, const ResizeAttrs& a, const Tensor& x, int ax, int64_t out, double scale,
                   double roi_lo, double roi_hi, std::vector<Tensor>& masks) {
  int64_t in = x.shape()[ax].value();
  std::vector<Taps> taps;
  taps.reserve(static_cast<size_t>(out));
  bool all_inside = true;
  for (int64_t o = 0; o < out; ++o) {
    taps.push_back(taps_for(c, a, o, in, out, scale, roi_lo, roi_hi));
    all_inside &= taps.back().inside;
  }
  size_t n = 0;
  for (auto& t : taps) n = std::max(n, t.idx.size());
  for (auto& t : taps) {  // outside positions: any in-range index, weight 0 (masked later)
    t.idx.resize(n, 0);
    t.w.resize(n, 0);
  }
  Shape oshape = x.shape();
  oshape[ax] = out;
  Tensor y;
  // Merge taps that read the same index (nearest's 0/1 pairs collapse to one Take).
  bool one_hot = true;
  for (auto& t : taps) {
    int hits = 0;
    for (double w : t.w) { if (w != 0 && w != 1) one_hot = false; hits += w == 1; }
    if (hits > 1) one_hot = false;
  }
  int r = x.rank();
  bool innermost = true;  // the phase form pays along the innermost non-unit axis only
  for (int d = ax + 1; d < r; ++d) innermost &= x.shape()[d] == SymInt(1);
  if (innermost && all_inside && n > 0 && resize_phases_on() && (one_hot || is_float(x.dtype()))) {
    std::vector<Taps> eff = taps;
    bool hit_all = true;
    if (one_hot) {  // nearest: the one tap of weight 1
      for (auto& t : eff) {
        size_t j = t.w.size();
        for (size_t k = 0; k < t.w.size(); ++k) if (t.w[k] == 1) j = k;
        hit_all &= j < t.w.size();
        if (j < t.w.size()) t = Taps{{t.idx[j]}, {1.0}, true};
      }
    }
    Tensor z = hit_all ? resize_axis_phases(x, ax, out, eff, one_hot ? 1 : n) : Tensor();
    if (z.defined()) return z;
  }
  auto take_with = [&](const std::vector<int64_t>& idx) {
    HostTensor h(DType::I64, {out});
    for (int64_t o = 0; o < out; ++o) h.set_i64(o, idx[static_cast<size_t>(o)]);
    Tensor iv = expand(reshape(from_host(h), along(r, ax, out)), oshape);
    return Tensor(prim::take(x.node(), iv.node(), ax));
  };
  if (one_hot || n == 0) {
    std::vector<int64_t> idx(static_cast<size_t>(out), 0);
    for (int64_t o = 0; o < out; ++o) {
      auto& t = taps[static_cast<size_t>(o)];
      for (size_t k = 0; k < t.w.size(); ++k) if (t.w[k] == 1) idx[static_cast<size_t>(o)] = t.idx[k];
    }
    y = take_with(idx);
  } else {
    if (!is_float(x.dtype())) c.unsupported(a.mode + " Resize of a " + std::string(dtype_name(x.dtype())) + " tensor");
    for (size_t k = 0; k < n; ++k) {
      std::vector<int64_t> idx(static_cast<size_t>(out));
      HostTensor w(x.dtype(), {out});
      bool any = false;
      for (int64_t o = 0; o < out; ++o) {
        idx[static_cast<size_t>(o)] = taps[static_cast<size_t>(o)].idx[k];
        double wv = taps[static_cast<size_t>(o)].w[k];
        w.set_f64(o, wv);
        any |= wv != 0;
      }
      if (!any) continue;
      Tensor term = take_with(idx) * reshape(from_host(w), along(r, ax, out));
      y = y.defined() ? y + term : term;
    }
    if (!y.defined()) y = zeros(oshape, x.dtype());
    y = to(y, x.dtype());
  }
  if (!all_inside) {
    HostTensor m(DType::Bool, {out});
    for (int64_t o = 0; o < out; ++o) m.set_i64(o, taps[static_cast<size_t>(o)].inside ? 1 : 0);
    masks.push_back(reshape(from_host(m), along(r, ax, out)));
  }
  return y;
}

std::vector<double> floats_in(const NodeCtx& c, size_t i) {
  HostTensor t = c.const_in(i);
  if (t.rank() > 1) c.fail("input " + std::to_string(i) + " must be 1-D, got shape " + t.shape_string());
  std::vector<double> r;
  for (int64_t k = 0; k < t.numel(); ++k) r.push_back(t.get_f64(k));
  return r;
}

void resize_common(NodeCtx& c, const Tensor& x, ResizeAttrs a, std::vector<double> scales, std::vector<int64_t> sizes,
                   std::vector<double> roi, std::vector<int64_t> axes) {
  int r = x.rank();
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic") c.fail("unknown mode '" + a.mode + "'");
  std::vector<int64_t> in(static_cast<size_t>(r));
  for (int d = 0; d < r; ++d) {
    if (!x.shape()[d].is_const()) c.unsupported("Resize of a symbolic dim " + x.shape()[d].to_string());
    in[d] = x.shape()[d].value();
  }
  std::vector<int> ax;
  if (axes.empty()) {
    for (int d = 0; d < r; ++d) ax.push_back(d);
  } else {
    for (int64_t v : axes) {
      int d = c.axis(v, r);
      if (std::find(ax.begin(), ax.end(), d) != ax.end()) c.fail("axes repeats axis " + std::to_string(d));
      ax.push_back(d);
    }
  }
  size_t k = ax.size();
  if (!scales.empty() && !sizes.empty()) c.fail("only one of 'scales' and 'sizes' may be given");
  if (scales.empty() && sizes.empty()) c.fail("one of 'scales' and 'sizes' is required");
  std::vector<double> sc(r, 1.0), lo(r, 0.0), hi(r, 1.0);
  std::vector<int64_t> out = in;
  if (!roi.empty()) {
    if (roi.size() != 2 * k) c.fail("roi has " + std::to_string(roi.size()) + " values, expected " + std::to_string(2 * k));
    for (size_t i = 0; i < k; ++i) { lo[ax[i]] = roi[i]; hi[ax[i]] = roi[i + k]; }
  }
  const int64_t cap = c.max_elements();
  if (!scales.empty()) {
    if (scales.size() != k) c.fail("scales has " + std::to_string(scales.size()) + " values for " + std::to_string(k) + " axes");
    for (size_t i = 0; i < k; ++i) {
      double s = scales[i];
      if (!(s > 0) || !std::isfinite(s)) c.fail("scales must be positive and finite, got " + std::to_string(s));
      double o = std::floor(static_cast<double>(in[ax[i]]) * s);
      if (o > static_cast<double>(cap)) c.fail("output size along axis " + std::to_string(ax[i]) + " is too large");
      sc[ax[i]] = s;
      out[ax[i]] = static_cast<int64_t>(o);
    }
  } else {
    if (sizes.size() != k) c.fail("sizes has " + std::to_string(sizes.size()) + " values for " + std::to_string(k) + " axes");
    std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      c.fail("unknown keep_aspect_ratio_policy '" + policy + "'");
    for (size_t i = 0; i < k; ++i)
      if (sizes[i] <= 0 || sizes[i] > cap) c.fail("sizes must be positive (and within the element cap), got " + std::to_string(sizes[i]));
    if (policy == "stretch") {
      for (size_t i = 0; i < k; ++i) {
        if (in[ax[i]] == 0) c.fail("cannot resize an empty axis " + std::to_string(ax[i]));
        out[ax[i]] = sizes[i];
        sc[ax[i]] = static_cast<double>(sizes[i]) / static_cast<double>(in[ax[i]]);
      }
    } else {
      double s = policy == "not_larger" ? 1e300 : 0;
      for (size_t i = 0; i < k; ++i) {
        double v = static_cast<double>(sizes[i]) / static_cast<double>(in[ax[i]]);
        s = policy == "not_larger" ? std::min(s, v) : std::max(s, v);
      }
      for (size_t i = 0; i < k; ++i) {
        sc[ax[i]] = s;
        out[ax[i]] = static_cast<int64_t>(std::llround(s * static_cast<double>(in[ax[i]])));
      }
    }
  }
  int64_t numel = 1;
  for (int d = 0; d < r; ++d) {
    if (out[d] <= 0) c.fail("output size along axis " + std::to_string(d) + " is " + std::to_string(out[d]) + " (must be positive)");
    if (numel > cap / out[d]) c.fail("the output would have more than " + std::to_string(cap) + " elements");
    numel *= out[d];
  }
  Tensor y = x;
  std::vector<Tensor> masks;
  auto identity = [&](int d) { return out[d] == in[d] && sc[d] == 1.0 && a.coord != "tf_crop_and_resize"; };
  // The phase form resizes the innermost axis first: its padded copy then reads the input
  // itself (not an outer axis' Take fused into it), and the outer axes' Takes (one index
  // per row) fuse into the consumer.
  bool phases = resize_phases_on();
  for (int i = 0; i < r; ++i) {
    int d = phases ? r - 1 - i : i;
    if (identity(d)) continue;
    y = resize_axis(c, a, y, d, out[d], sc[d], lo[d], hi[d], masks);
  }
  // A spatial resampling whose taps sum to 1 commutes with a 1×1 convolution (a per-position
  // linear map of the channels, bias included): remember how to replay it (Folder::resamplings)
  if (masks.empty() && r >= 3 && identity(0) && identity(1) && (a.mode == "nearest" || a.mode == "linear") &&
      is_float(x.dtype())) {
    c.folder().resamplings[y.node()] = {x, [a, out, sc, lo, hi, r, phases](const NodeCtx& cc, const Tensor& t) {
      Tensor z = t;
      std::vector<Tensor> unused;
      for (int i = 2; i < r; ++i)
        if (int d = phases ? r + 1 - i : i; !(out[d] == t.shape()[d].value() && sc[d] == 1.0))
          z = resize_axis(cc, a, z, d, out[d], sc[d], lo[d], hi[d], unused);
      return z;
    }};
  }
  if (!masks.empty()) {
    Tensor m = masks[0];
    for (size_t i = 1; i < masks.size(); ++i) m = logical_and(m, masks[i]);
    y = where(m, y, scalar(Scalar(a.extrapolation), y.dtype()));
    y = to(y, x.dtype());
  }
  c.set(0, y);
}

void resize_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  ResizeAttrs a;
  a.mode = c.attr_string("mode", "nearest");
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes, axes;
  if (c.opset() < 11) {
    a.coord = "asymmetric";
    a.nearest = "floor";
    scales = floats_in(c, 1);
  } else {
    a.coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
    a.nearest = c.attr_string("nearest_mode", "round_prefer_floor");
    a.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
    a.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    a.extrapolation = c.attr_float("extrapolation_value", 0.0);
    if (c.attr_int("antialias", 0) != 0) c.unsupported("Resize with antialias=1");
    axes = c.attr_ints("axes");
    if (c.has(1) && a.coord == "tf_crop_and_resize") roi = floats_in(c, 1);
    if (c.has(2)) scales = floats_in(c, 2);
    if (c.has(3)) sizes = c.ints_in(3);
    if (c.opset() < 13 && !sizes.empty()) scales.clear();  // opset 11: scales is required but may be empty
  }
  int64_t rank = x.rank();
  if (axes.empty() && !roi.empty() && static_cast<int64_t>(roi.size()) != 2 * rank)
    c.fail("roi has " + std::to_string(roi.size()) + " values for rank " + std::to_string(rank));
  resize_common(c, x, a, scales, sizes, roi, axes);
}

void upsample_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  ResizeAttrs a;
  a.mode = c.attr_string("mode", "nearest");
  if (a.mode == "bilinear") a.mode = "linear";
  if (a.mode == "cubic") c.unsupported("Upsample with mode cubic");
  a.coord = "asymmetric";
  a.nearest = "floor";
  std::vector<double> scales;
  if (c.opset() >= 9) {
    scales = floats_in(c, 1);
  } else {
    for (float f : c.attr_floats("scales")) scales.push_back(f);
    if (scales.empty() && c.has_attr("height_scale")) {  // opset 1
      scales = {1.0, 1.0, c.attr_float("height_scale", 1), c.attr_float("width_scale", 1)};
    }
  }
  if (static_cast<int>(scales.size()) != x.rank())
    c.fail("scales has " + std::to_string(scales.size()) + " values for rank " + std::to_string(x.rank()));
  for (double s : scales) if (!(s >= 1) || !std::isfinite(s)) c.fail("Upsample scales must be >= 1 and finite");
  resize_common(c, x, a, scales, {}, {}, {});
}

// PyTorch's reflect_coordinates: reflect x into [lo2/2, hi2/2].
Tensor reflect(const Tensor& x, double lo2, double hi2) {
  if (lo2 == hi2) return zeros_like(x);
  double mn = lo2 / 2, span = (hi2 - lo2) / 2;
  Tensor a = abs(x - mn);
  Tensor flips = floor(a / span);
  Tensor extra = a - flips * span;
  Tensor even = eq(fmod(flips, full_like(flips, 2.0)), 0.0);
  return where(even, extra + mn, (span - extra) + mn);
}

// The padding mode's coordinate for a size-n axis (identity for zeros).
Tensor pad_coord(const Tensor& x, int64_t n, const std::string& padding, bool align) {
  double hi = static_cast<double>(n - 1);
  if (padding == "border") return clamp(x, Scalar(0.0), Scalar(hi));
  if (padding == "reflection") {
    Tensor r = align ? reflect(x, 0, 2 * hi) : reflect(x, -1, 2 * static_cast<double>(n) - 1);
    return clamp(r, Scalar(0.0), Scalar(hi));
  }
  return x;
}

void grid_sample_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), grid = c.in(1);
  if (x.rank() != 4) c.unsupported("GridSample of a rank-" + std::to_string(x.rank()) + " input (only 4-D)");
  if (grid.rank() != 4 || grid.shape()[3] != SymInt(2) || grid.shape()[0] != x.shape()[0])
    c.fail("grid " + grid.describe() + " must be [N, H_out, W_out, 2] for input " + x.describe());
  if (!is_float(x.dtype()) || !is_float(grid.dtype())) c.fail("input and grid must be float");
  for (auto& d : x.shape()) if (!d.is_const()) c.unsupported("GridSample with symbolic dims");
  std::string mode = c.attr_string("mode", c.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") c.fail("unknown mode '" + mode + "'");
  std::string padding = c.attr_string("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection") c.fail("unknown padding_mode '" + padding + "'");
  bool align = c.attr_int("align_corners", 0) != 0;
  SymInt N = x.shape()[0], C = x.shape()[1], Ho = grid.shape()[1], Wo = grid.shape()[2];
  int64_t H = x.shape()[2].value(), W = x.shape()[3].value();
  Tensor g = to(grid, DType::F32);
  Tensor gx = squeeze(narrow(g, 3, 0, 1), {3}), gy = squeeze(narrow(g, 3, 1, 1), {3});  // [N, Ho, Wo]
  auto unnorm = [&](const Tensor& v, int64_t n) {
    return align ? (v + 1.0) * (0.5 * static_cast<double>(n - 1)) : ((v + 1.0) * static_cast<double>(n) - 1.0) * 0.5;
  };
  Tensor fx = unnorm(gx, W), fy = unnorm(gy, H);
  Tensor plane = reshape(x, {N, C, SymInt(H * W)});
  SymInt P = Ho * Wo;
  // the value at integer positions (iy, ix) [N, Ho, Wo] (as floats), 0 outside the image
  auto tap = [&](const Tensor& iy, const Tensor& ix) {
    Tensor inside = logical_and(logical_and(ge(ix, 0.0), le(ix, static_cast<double>(W - 1))),
                                logical_and(ge(iy, 0.0), le(iy, static_cast<double>(H - 1))));
    Tensor li = to(iy, DType::I64) * W + to(ix, DType::I64);
    li = where(inside, li, full({}, H * W, DType::I64));  // past the end: Take reads 0
    Tensor idx = expand(reshape(li, {N, SymInt(1), P}), {N, C, P});
    return Tensor(prim::take(plane.node(), idx.node(), 2));  // [N, C, P]
  };
  auto w_of = [&](const Tensor& w) { return reshape(w, {N, SymInt(1), P}); };
  Tensor y;
  if (mode == "nearest") {
    Tensor px = round(pad_coord(fx, W, padding, align)), py = round(pad_coord(fy, H, padding, align));
    y = tap(py, px);
  } else if (mode == "bilinear") {
    Tensor px = pad_coord(fx, W, padding, align), py = pad_coord(fy, H, padding, align);
    Tensor x0 = floor(px), y0 = floor(py);
    Tensor tx = px - x0, ty = py - y0;
    y = tap(y0, x0) * w_of((1.0 - tx) * (1.0 - ty)) + tap(y0, x0 + 1.0) * w_of(tx * (1.0 - ty)) +
        tap(y0 + 1.0, x0) * w_of((1.0 - tx) * ty) + tap(y0 + 1.0, x0 + 1.0) * w_of(tx * ty);
  } else {
    const double A = -0.75;
    auto coeffs = [A](const Tensor& t) {
      auto cc1 = [A](const Tensor& v) { return ((v * (A + 2)) - (A + 3)) * v * v + 1.0; };
      auto cc2 = [A](const Tensor& v) { return ((v * A - 5 * A) * v + 8 * A) * v - 4 * A; };
      return std::vector<Tensor>{cc2(t + 1.0), cc1(t), cc1(1.0 - t), cc2(2.0 - t)};
    };
    Tensor x0 = floor(fx), y0 = floor(fy);
    std::vector<Tensor> cx = coeffs(fx - x0), cy = coeffs(fy - y0);
    for (int i = 0; i < 4; ++i) {
      Tensor iy = pad_coord(y0 + static_cast<double>(i - 1), H, padding, align);
      for (int j = 0; j < 4; ++j) {
        Tensor ix = pad_coord(x0 + static_cast<double>(j - 1), W, padding, align);
        Tensor term = tap(iy, ix) * w_of(cy[i] * cx[j]);
        y = y.defined() ? y + term : term;
      }
    }
  }
  c.set(0, to(reshape(y, {N, C, Ho, Wo}), x.dtype()));
}

void roi_align_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), rois = c.in(1), bidx = c.in(2);
  if (x.rank() != 4 || !is_float(x.dtype())) c.fail("X must be a float [N, C, H, W], got " + x.describe());
  for (auto& d : x.shape()) if (!d.is_const()) c.unsupported("RoiAlign with symbolic dims");
  if (rois.rank() != 2 || rois.shape()[1] != SymInt(4) || !rois.shape()[0].is_const()) c.fail("rois must be [num_rois, 4], got " + rois.describe());
  if (!is_int(bidx.dtype()) || bidx.shape() != Shape{rois.shape()[0]}) c.fail("batch_indices must be an integer [num_rois], got " + bidx.describe());
  std::string mode = c.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail("unknown mode '" + mode + "'");
  int64_t oh = c.attr_int("output_height", 1), ow = c.attr_int("output_width", 1), sr = c.attr_int("sampling_ratio", 0);
  if (oh <= 0 || ow <= 0 || oh > 65536 || ow > 65536) c.fail("output_height / output_width must be positive (and sane)");
  if (sr < 0 || sr > 1024) c.fail("sampling_ratio must be in [0, 1024]");
  double scale = c.attr_float("spatial_scale", 1.0);
  std::string ctm = c.opset() >= 16 ? c.attr_string("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
  if (ctm != "half_pixel" && ctm != "output_half_pixel") c.fail("unknown coordinate_transformation_mode '" + ctm + "'");
  bool half = ctm == "half_pixel";
  int64_t R = rois.shape()[0].value(), N = x.shape()[0].value(), C = x.shape()[1].value(), H = x.shape()[2].value(),
          W = x.shape()[3].value();
  int64_t gh = sr, gw = sr;
  if (sr == 0) {  // adaptive: ceil(roi size / bins), the largest over the (constant) rois
    std::optional<HostTensor> rv = c.fold(rois);
    if (!rv) c.unsupported("dynamic shape input not supported: RoiAlign with sampling_ratio 0 on run-time rois");
    gh = gw = 1;
    for (int64_t r = 0; r < R; ++r) {
      double rw = (rv->get_f64(r * 4 + 2) - rv->get_f64(r * 4)) * scale, rh = (rv->get_f64(r * 4 + 3) - rv->get_f64(r * 4 + 1)) * scale;
      if (!half) { rw = std::max(rw, 1.0); rh = std::max(rh, 1.0); }
      gh = std::max<int64_t>(gh, static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh))));
      gw = std::max<int64_t>(gw, static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow))));
    }
    if (gh != gw || R > 1) {
      // per-roi grids differ: not expressible with one grid
      for (int64_t r = 0; r < R; ++r) {
        double rw = (rv->get_f64(r * 4 + 2) - rv->get_f64(r * 4)) * scale, rh = (rv->get_f64(r * 4 + 3) - rv->get_f64(r * 4 + 1)) * scale;
        if (!half) { rw = std::max(rw, 1.0); rh = std::max(rh, 1.0); }
        if (static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh))) != gh ||
            static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow))) != gw)
          c.unsupported("RoiAlign with sampling_ratio 0 and rois of different sizes");
      }
    }
  }
  int64_t cells = R * oh * gh * ow * gw;
  if (cells > c.max_elements() / std::max<int64_t>(C, 1)) c.fail("the sampling grid is too large");
  Tensor rf = to(rois, DType::F32);
  double off = half ? 0.5 : 0.0;
  auto col = [&](int k) { return squeeze(narrow(rf, 1, k, 1), {1}) * scale - off; };  // [R]
  Tensor x1 = col(0), y1 = col(1), x2 = col(2), y2 = col(3);
  Tensor rw = x2 - x1, rh = y2 - y1;
  if (!half) { rw = maximum(rw, full({}, 1.0, DType::F32)); rh = maximum(rh, full({}, 1.0, DType::F32)); }
  Tensor bw = rw / static_cast<double>(ow), bh = rh / static_cast<double>(oh);
  // sample coordinates on [R, oh, gh, ow, gw]
  Shape gs{R, oh, gh, ow, gw};
  auto idx = [&](int axis) { return to(Tensor(prim::index(DType::I64, gs, axis)), DType::F32); };
  auto per_roi = [&](const Tensor& v) { return reshape(v, {R, 1, 1, 1, 1}); };
  Tensor ys = per_roi(y1) + idx(1) * per_roi(bh) + (idx(2) + 0.5) * per_roi(bh / static_cast<double>(gh));
  Tensor xs = per_roi(x1) + idx(3) * per_roi(bw) + (idx(4) + 0.5) * per_roi(bw / static_cast<double>(gw));
  Tensor outside = logical_or(logical_or(lt(ys, -1.0), gt(ys, static_cast<double>(H))),
                              logical_or(lt(xs, -1.0), gt(xs, static_cast<double>(W))));
  ys = maximum(ys, zeros({}, DType::F32));
  xs = maximum(xs, zeros({}, DType::F32));
  auto corners = [&](const Tensor& v, int64_t n, Tensor* lo, Tensor* hi, Tensor* frac) {
    Tensor l = floor(v);
    Tensor edge = ge(l, static_cast<double>(n - 1));
    Tensor last = full({}, static_cast<double>(n - 1), DType::F32);
    *lo = where(edge, last, l);
    *hi = where(edge, last, l + 1.0);
    *frac = where(edge, zeros({}, DType::F32), v - l);
  };
  Tensor ylo, yhi, ly, xlo, xhi, lx;
  corners(ys, H, &ylo, &yhi, &ly);
  corners(xs, W, &xlo, &xhi, &lx);
  Tensor base = reshape(to(bidx, DType::I64), {R, 1, 1, 1, 1}) * (H * W);
  // X as [C, N·H·W]; each corner is one Take with an index [C, R·oh·gh·ow·gw]
  Tensor plane = reshape(permute(reshape(x, {N, C, H * W}), {1, 0, 2}), {C, N * H * W});
  auto at = [&](const Tensor& yy, const Tensor& xx) {
    Tensor li = base + to(yy, DType::I64) * W + to(xx, DType::I64);
    Tensor ix = expand(reshape(li, {1, cells}), {C, cells});
    return reshape(Tensor(prim::take(plane.node(), ix.node(), 1)), {C, R, oh, gh, ow, gw});
  };
  auto wt = [&](const Tensor& w) { return unsqueeze(where(outside, zeros({}, DType::F32), w), 0); };
  Tensor hy = 1.0 - ly, hx = 1.0 - lx;
  Tensor t1 = at(ylo, xlo) * wt(hy * hx), t2 = at(ylo, xhi) * wt(hy * lx), t3 = at(yhi, xlo) * wt(ly * hx),
         t4 = at(yhi, xhi) * wt(ly * lx);
  Tensor y;
  if (mode == "avg") {
    y = sum(t1 + t2 + t3 + t4, {3, 5}, false) * (1.0 / static_cast<double>(std::max<int64_t>(gh * gw, 1)));
  } else {
    y = max(maximum(maximum(t1, t2), maximum(t3, t4)), {3, 5}, false);
  }
  c.set(0, to(permute(y, {1, 0, 2, 3}), x.dtype()));  // [C, R, oh, ow] -> [R, C, oh, ow]
}

}  // namespace

void add_resize_ops(OpTable& t) {
  t["RoiAlign"] = roi_align_op;
  t["GridSample"] = grid_sample_op;
  t["Resize"] = resize_op;
  t["Upsample"] = upsample_op;
}

}  // namespace lathe::onnx_import
