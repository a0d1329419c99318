// lower_nn.cpp — ONNX MatMul, Gemm, Conv, ConvTranspose, MaxPool, AveragePool,
// GlobalAveragePool, GlobalMaxPool, for any number of spatial dims (1-D, 2-D, 3-D …).
//
// Convolution and pooling windows are one strided View of the padded input ("im2col
// without a copy"): [N, C, O1..Ok, K1..Kk] with strides (stride·s, dilation·s) per spatial
// dim. Conv multiplies that by the broadcast weight and reduces over (C/group, K…);
// pooling reduces over K…. ConvTranspose is a stride-1 convolution of the zero-upsampled
// input with the flipped, regrouped weight, except where its kernel equals its stride (a 1×1
// convolution plus a depth-to-space permute: conv_transpose_by_tiles). ONNX specifics handled here: auto_pad
// (SAME_UPPER / SAME_LOWER / VALID), pads layout [begins…, ends…], ceil_mode,
// count_include_pad, output_padding / output_shape, Gemm's transA/transB/alpha/beta.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, out;
};

std::vector<int64_t> spatial_dims(const NodeCtx& c, const Tensor& x) {
  if (x.rank() < 3) c.fail("input must be [N, C, spatial…], got " + x.describe());
  std::vector<int64_t> s;
  for (int d = 2; d < x.rank(); ++d) {
    if (!x.shape()[d].is_const()) c.unsupported("symbolic spatial dim " + x.shape()[d].to_string());
    s.push_back(x.shape()[d].value());
  }
  return s;
}

std::vector<int64_t> per_dim(const NodeCtx& c, const char* name, size_t k, int64_t def) {
  std::vector<int64_t> v = c.attr_ints(name);
  if (v.empty()) v.assign(k, def);
  if (v.size() != k) c.fail(std::string(name) + " has " + std::to_string(v.size()) + " entries for " + std::to_string(k) + " spatial dims");
  for (int64_t e : v) if (e <= 0 || e > (int64_t(1) << 31)) c.fail(std::string(name) + " entries must be positive (and sane)");
  return v;
}

// Output sizes and pads of a sliding window (Conv, pools). ceil_mode pools extend the end
// pad so that the last window stays inside the padded input.
Window plan_window(const NodeCtx& c, const std::vector<int64_t>& in, std::vector<int64_t> kernel, bool ceil_mode) {
  size_t k = in.size();
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != k) c.fail("kernel has " + std::to_string(w.kernel.size()) + " dims for " + std::to_string(k) + " spatial dims");
  for (int64_t e : w.kernel) if (e <= 0 || e > (int64_t(1) << 31)) c.fail("kernel sizes must be positive (and sane)");
  w.strides = per_dim(c, "strides", k, 1);
  w.dilations = per_dim(c, "dilations", k, 1);
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.empty()) pads.assign(2 * k, 0);
  if (pads.size() != 2 * k) c.fail("pads has " + std::to_string(pads.size()) + " entries, expected " + std::to_string(2 * k));
  for (int64_t p : pads) if (p < 0 || p > (int64_t(1) << 31)) c.fail("pads must be non-negative (and sane)");
  for (size_t i = 0; i < k; ++i) {
    int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t pb = pads[i], pe = pads[i + k], o;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * w.strides[i] + eff - in[i]);
      pb = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
    } else {
      if (auto_pad == "VALID") pb = pe = 0;
      else if (auto_pad != "NOTSET") c.fail("unknown auto_pad '" + auto_pad + "'");
      int64_t span = in[i] + pb + pe - eff;
      if (span < 0) c.fail("the kernel (" + std::to_string(eff) + ") is larger than the padded input (" + std::to_string(in[i] + pb + pe) + ")");
      o = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
      if (ceil_mode && (o - 1) * w.strides[i] >= in[i] + pb) --o;  // last window must start inside
    }
    w.out.push_back(o);
    w.pad_begin.push_back(pb);
    w.pad_end.push_back(pe);
  }
  return w;
}

// Pads x's spatial dims (begin, end + extra so every window is in bounds) with zeros, or
// with the dtype's lowest value (-inf for floats) for max pooling.
Tensor pad_spatial(const Tensor& x, const Window& w, bool lowest, Scalar value = Scalar(0)) {
  std::vector<std::pair<SymInt, SymInt>> pairs{{0, 0}, {0, 0}};
  bool any = false;
  for (size_t i = 0; i < w.out.size(); ++i) {
    int64_t in = x.shape()[2 + i].value();
    int64_t need = (w.out[i] - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t end = std::max(w.pad_end[i], need - in - w.pad_begin[i]);
    pairs.push_back({w.pad_begin[i], end});
    any |= w.pad_begin[i] != 0 || end != 0;
  }
  Tensor xp = pad(x, pairs, value);
  if (!lowest || !any) return xp;
  Tensor inside = pad(ones(x.shape(), DType::Bool), pairs, Scalar(0));
  Tensor fill(is_float(x.dtype()) ? prim::constant(-std::numeric_limits<double>::infinity(), x.dtype())
                                  : prim::constant_int(x.dtype() == DType::U8 ? 0 : -128, x.dtype()));
  return where(inside, xp, fill);
}

// The window view [lead…, O…, K…] of xp, whose first dims are described by lead_shape /
// lead_strides (in elements of xp's contiguous layout).
Tensor window_view(const Tensor& xp, Shape lead_shape, std::vector<SymInt> lead_strides, const Window& w) {
  std::vector<SymInt> cs = contiguous_strides(xp.shape());
  size_t k = w.out.size(), base = xp.shape().size() - k;
  ViewSpec v;
  v.shape = std::move(lead_shape);
  v.strides = std::move(lead_strides);
  for (size_t i = 0; i < k; ++i) { v.shape.push_back(w.out[i]); v.strides.push_back(cs[base + i] * SymInt(w.strides[i])); }
  for (size_t i = 0; i < k; ++i) { v.shape.push_back(w.kernel[i]); v.strides.push_back(cs[base + i] * SymInt(w.dilations[i])); }
  v.offset = 0;
  return Tensor(prim::view(xp.node(), v));
}

// y[n, m, o…] = Σ_{c∈group(m), k…} xpad[n, c, o·s + k·d] · w[m, c, k…] (+ bias[m])
// integer: u8/i8 operands (x padded with pad_value), products widened to i32 and summed in
// i32 (the int8 contraction the scheduler packs), no bias, an i32 result.
Tensor conv_core(const NodeCtx& c, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                 const Window& w, int64_t groups, bool integer = false, int64_t pad_value = 0) {
  size_t k = w.out.size();
  SymInt C = x.shape()[1], M = weight.shape()[0], Cg = weight.shape()[1];
  if (!C.is_const() || !M.is_const() || !Cg.is_const()) c.unsupported("symbolic channel counts");
  if (groups <= 0 || C.value() % groups || M.value() % groups || Cg.value() * groups != C.value())
    c.fail("channels do not match: input " + x.describe() + ", weight " + weight.describe() + ", group " + std::to_string(groups));
  int64_t G = groups, Mg = M.value() / G;
  Tensor xp = integer ? pad_spatial(x, w, false, Scalar(pad_value)) : pad_spatial(x, w, false);
  std::vector<SymInt> cs = contiguous_strides(xp.shape());
  Tensor win = window_view(xp, {x.shape()[0], G, Mg, Cg}, {cs[0], cs[1] * Cg, SymInt(0), cs[1]}, w);
  Shape wshape{1, G, Mg, Cg};
  for (size_t i = 0; i < k; ++i) wshape.push_back(1);
  for (size_t i = 0; i < k; ++i) wshape.push_back(w.kernel[i]);
  Tensor wv = expand(reshape(weight, wshape), win.shape());
  Axes red{3};
  for (size_t i = 0; i < k; ++i) red.push_back(static_cast<int>(4 + k + i));
  Tensor y = integer ? squeeze(Tensor(prim::reduce(ReduceOp::Add, (to(win, DType::I32) * to(wv, DType::I32)).node(), red)), red)
                     : sum(win * wv, red, false);  // [N, G, Mg, O…]
  Shape out{x.shape()[0], M};
  for (int64_t o : w.out) out.push_back(o);
  y = reshape(y, out);
  if (bias) {
    Shape bs{M};
    for (size_t i = 0; i < k; ++i) bs.push_back(1);
    y = y + reshape(*bias, bs);
  }
  return integer ? y : to(y, x.dtype());
}

std::vector<int64_t> kernel_of(const NodeCtx& c, const Tensor& weight, size_t k) {
  std::vector<int64_t> ks = c.attr_ints("kernel_shape");
  if (ks.empty())
    for (size_t i = 0; i < k; ++i) {
      if (2 + i >= static_cast<size_t>(weight.rank()) || !weight.shape()[2 + i].is_const()) c.fail("weight " + weight.describe() + " does not match the input's spatial rank");
      ks.push_back(weight.shape()[2 + i].value());
    }
  return ks;
}

}  // namespace

Tensor conv_integer(const NodeCtx& c, const Tensor& x, const Tensor& weight, int64_t pad_value) {
  auto in = spatial_dims(c, x);
  if (weight.rank() != x.rank()) c.fail("weight " + weight.describe() + " must have the input's rank");
  Window w = plan_window(c, in, kernel_of(c, weight, in.size()), false);
  return conv_core(c, x, weight, std::nullopt, w, c.attr_int("group", 1), true, pad_value);
}

namespace {

// A 1×1 convolution (stride 1, no padding, one group) of an upsampled tensor: the
// resampling (Resize nearest / linear over the spatial axes, Folder::resamplings) mixes
// positions with weights summing to 1 and the convolution mixes channels at each position,
// so they commute, bias included. Convolving at the input resolution costs 1 / (the area
// ratio) of the products (4× fewer for a 2× upsampling) and resamples M channels instead of
// C (a UNet's Upsample + 1×1 conv: 128 -> 64 channels). Only when the resampling enlarges
// the spatial size (never shrinks an axis) and C >= 4. nullopt: not that case.
std::optional<Tensor> pointwise_before_upsampling(const NodeCtx& c, const Tensor& x, const Tensor& weight, const Window& w) {
  if (c.attr_int("group", 1) != 1) return std::nullopt;
  auto it = c.folder().resamplings.find(x.node());
  if (it == c.folder().resamplings.end()) return std::nullopt;
  const Tensor& u = it->second.input;
  const size_t k = w.out.size();
  if (u.rank() != x.rank() || !weight.shape()[1].is_const() || weight.shape()[1].value() < 4) return std::nullopt;
  int64_t in_area = 1, out_area = 1;
  for (size_t i = 0; i < k; ++i) {
    if (w.kernel[i] != 1 || w.strides[i] != 1 || w.pad_begin[i] != 0 || w.pad_end[i] != 0) return std::nullopt;
    if (!u.shape()[2 + i].is_const() || u.shape()[2 + i].value() > w.out[i]) return std::nullopt;
    in_area *= u.shape()[2 + i].value();
    out_area *= w.out[i];
  }
  if (in_area >= out_area) return std::nullopt;
  Window low = w;
  for (size_t i = 0; i < k; ++i) low.out[i] = u.shape()[2 + i].value();
  Tensor z = conv_core(c, u, weight, c.opt_in(2), low, 1);
  return it->second.apply(c, z);
}

// A 2-D 3×3 convolution, stride 1, no dilation, one group, constant f32 weights, where
// winograd_pays (LATHE_WINOGRAD): Winograd F(2×2, 3×3) (frontend winograd.cpp). nullopt:
// not that case.
std::optional<Tensor> conv_by_winograd(const NodeCtx& c, const Tensor& x, const Tensor& weight, const Window& w) {
  if (w.out.size() != 2 || c.attr_int("group", 1) != 1 || x.dtype() != DType::F32) return std::nullopt;
  for (size_t i = 0; i < 2; ++i)
    if (w.kernel[i] != 3 || w.strides[i] != 1 || w.dilations[i] != 1 || w.pad_begin[i] > 2 || w.pad_end[i] > 2)
      return std::nullopt;
  if (weight.rank() != 4 || !weight.shape()[0].is_const() || !weight.shape()[1].is_const() ||
      weight.shape()[2] != SymInt(3) || weight.shape()[3] != SymInt(3) || x.shape()[1] != weight.shape()[1])
    return std::nullopt;
  if (!winograd_pays(weight.shape()[1].value(), weight.shape()[0].value(), w.out[0], w.out[1])) return std::nullopt;
  // only a weight that is a literal: a computed one (a QDQ model's DequantizeLinear of int8
  // weights) folds too, but its conv is the `qdq` rules' integer contraction, not Winograd's
  if (weight.node()->op != Op::Const || !weight.node()->attrs.data) return std::nullopt;
  auto wv = c.fold(weight);
  if (!wv) return std::nullopt;
  return conv2d_winograd(x, *wv, c.opt_in(2), {w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1]});
}

void conv_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), weight = c.in(1);
  require_same_dtype(c, x, weight);
  if (!is_float(x.dtype())) c.unsupported("Conv of " + x.describe());
  auto in = spatial_dims(c, x);
  if (weight.rank() != x.rank()) c.fail("weight " + weight.describe() + " must have the input's rank");
  Window w = plan_window(c, in, kernel_of(c, weight, in.size()), false);
  if (auto y = pointwise_before_upsampling(c, x, weight, w)) {
    c.set(0, *y);
    return;
  }
  if (auto y = conv_by_winograd(c, x, weight, w)) {
    c.set(0, *y);
    return;
  }
  c.set(0, conv_core(c, x, weight, c.opt_in(2), w, c.attr_int("group", 1)));
}

// Inserts stride-1 zeros between elements of each spatial dim.
Tensor upsample_zeros(const Tensor& x, const std::vector<int64_t>& strides) {
  Tensor y = x;
  for (size_t i = 0; i < strides.size(); ++i) {
    int64_t s = strides[i];
    if (s == 1) continue;
    int d = static_cast<int>(2 + i);
    int64_t n = y.shape()[d].value();
    y = unsqueeze(y, d + 1);
    std::vector<std::pair<SymInt, SymInt>> pairs(y.rank(), {0, 0});
    pairs[d + 1] = {0, s - 1};
    y = flatten(pad(y, pairs, Scalar(0)), d, d + 1);
    y = narrow(y, d, 0, (n - 1) * s + 1);
  }
  return y;
}

// A ConvTranspose whose kernel equals its stride in every spatial dim (no padding, no
// output padding, no dilation, one group: UNet / FCN decoders' 2×2 stride-2 up-convolution)
// writes each output position from exactly one input position and one kernel tap:
//   y[n, m, i·s + a] = Σ_c x[n, c, i] · w[c, m, a] (+ bias[m])
// That is a 1×1 convolution into M·A channels (A = Π kernel), [N, M, a…, i…], followed by a
// depth-to-space permute to [N, M, (i, a)…] (one copy, with the bias added). The general
// path (the zero-upsampled input convolved with the flipped weight) multiplies A times as
// many products, most of them by inserted zeros. nullopt: not that case.
std::optional<Tensor> conv_transpose_by_tiles(const NodeCtx& c, const Tensor& x, const Tensor& weight,
                                              const std::optional<Tensor>& bias, const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                              const std::vector<int64_t>& dil, const std::vector<int64_t>& pads,
                                              const std::vector<int64_t>& outpad, int64_t G) {
  const size_t k = in.size();
  if (G != 1 || weight.rank() != static_cast<int>(k + 2) || !weight.shape()[1].is_const()) return std::nullopt;
  for (size_t i = 0; i < k; ++i)
    if (kernel[i] != strides[i] || dil[i] != 1 || pads[i] != 0 || pads[i + k] != 0 || outpad[i] != 0 ||
        weight.shape()[2 + i] != SymInt(kernel[i]))
      return std::nullopt;
  const int64_t C = weight.shape()[0].value(), M = weight.shape()[1].value();
  int64_t A = 1;
  for (int64_t kk : kernel) A *= kk;
  if (bias && (bias->rank() != 1 || bias->shape()[0] != SymInt(M))) c.fail("bias " + bias->describe() + " must be [" + std::to_string(M) + "]");
  // weight [C, M, a…] -> [M·A, C, 1…]
  Shape ws{SymInt(M * A), SymInt(C)};
  for (size_t i = 0; i < k; ++i) ws.push_back(1);
  Tensor w1 = reshape(transpose(reshape(weight, {SymInt(C), SymInt(M * A)}), 0, 1), ws);
  Window w;
  w.kernel.assign(k, 1);
  w.strides.assign(k, 1);
  w.dilations.assign(k, 1);
  w.pad_begin.assign(k, 0);
  w.pad_end.assign(k, 0);
  w.out = in;
  Tensor z = conv_core(c, x, w1, std::nullopt, w, 1);  // [N, M·A, i…]
  Shape zs{x.shape()[0], SymInt(M)}, ys{x.shape()[0], SymInt(M)};
  for (size_t i = 0; i < k; ++i) zs.push_back(kernel[i]);
  for (size_t i = 0; i < k; ++i) zs.push_back(in[i]);
  std::vector<int> perm{0, 1};
  for (size_t i = 0; i < k; ++i) {
    perm.push_back(static_cast<int>(2 + k + i));  // i
    perm.push_back(static_cast<int>(2 + i));      // a
    ys.push_back(in[i] * kernel[i]);
  }
  Tensor y = reshape(permute(reshape(z, zs), perm), ys);
  if (!bias) return y;
  Shape bs{SymInt(M)};
  for (size_t i = 0; i < k; ++i) bs.push_back(1);
  return y + reshape(*bias, bs);  // after the permute: fused into its copy, no [M, A] bias table
}

void conv_transpose_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), weight = c.in(1);
  require_same_dtype(c, x, weight);
  if (!is_float(x.dtype())) c.unsupported("ConvTranspose of " + x.describe());
  auto in = spatial_dims(c, x);
  size_t k = in.size();
  if (weight.rank() != x.rank()) c.fail("weight " + weight.describe() + " must have the input's rank");
  int64_t G = c.attr_int("group", 1);
  std::vector<int64_t> kernel = kernel_of(c, weight, k);
  std::vector<int64_t> strides = per_dim(c, "strides", k, 1), dil = per_dim(c, "dilations", k, 1);
  std::vector<int64_t> outpad = c.attr_ints("output_padding"), out_shape = c.attr_ints("output_shape");
  if (outpad.empty()) outpad.assign(k, 0);
  if (outpad.size() != k) c.fail("output_padding must have one entry per spatial dim");
  for (int64_t p : outpad) if (p < 0 || p > (int64_t(1) << 31)) c.fail("output_padding entries must be non-negative (and sane)");
  for (int64_t kk : kernel) if (kk <= 0 || kk > (int64_t(1) << 31)) c.fail("kernel sizes must be positive (and sane)");
  std::vector<int64_t> pads = c.attr_ints("pads");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (pads.empty()) pads.assign(2 * k, 0);
  if (pads.size() != 2 * k) c.fail("pads must have two entries per spatial dim");
  for (int64_t p : pads) if (p < 0 || p > (int64_t(1) << 31)) c.fail("pads must be non-negative (and sane)");
  for (int64_t o : out_shape) if (o < 0 || o > (int64_t(1) << 31)) c.fail("output_shape entries must be non-negative (and sane)");
  if (!out_shape.empty()) {
    if (out_shape.size() == k + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    if (out_shape.size() != k) c.fail("output_shape must have one entry per spatial dim");
  }
  for (size_t i = 0; i < k; ++i) {
    int64_t full = strides[i] * (in[i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t target = out_shape.empty() ? in[i] * strides[i] : out_shape[i];
      int64_t total = full - target;
      bool upper = auto_pad != "SAME_LOWER";
      if (total >= 0) {
        pads[i] = upper ? total / 2 : total - total / 2;
        pads[i + k] = total - pads[i];
      } else {  // a larger output_shape is extra output padding at the end
        pads[i] = pads[i + k] = 0;
        outpad[i] += -total;
      }
    } else if (auto_pad == "VALID") {
      pads[i] = pads[i + k] = 0;
    }
  }
  // weight [C, M/G, K…] -> [M, C/G, K…], flipped spatially
  SymInt C = weight.shape()[0], Mg = weight.shape()[1];
  if (!C.is_const() || C.value() % G || x.shape()[1] != C) c.fail("weight " + weight.describe() + " does not match input " + x.describe() + " with group " + std::to_string(G));
  if (auto y = conv_transpose_by_tiles(c, x, weight, c.opt_in(2), in, kernel, strides, dil, pads, outpad, G)) {
    c.set(0, *y);
    return;
  }
  int64_t Cg = C.value() / G;
  Shape s1{G, Cg, Mg};
  for (int64_t kk : kernel) s1.push_back(kk);
  std::vector<int> perm{0, 2, 1};
  for (size_t i = 0; i < k; ++i) perm.push_back(static_cast<int>(3 + i));
  Shape s2{SymInt(G) * Mg, Cg};
  for (int64_t kk : kernel) s2.push_back(kk);
  Axes spatial;
  for (size_t i = 0; i < k; ++i) spatial.push_back(static_cast<int>(2 + i));
  Tensor wt = flip(reshape(permute(reshape(weight, s1), perm), s2), spatial);
  // stride-1 conv of the upsampled input, padded by (K-1)·d - pad (negative crops)
  Tensor up = upsample_zeros(x, strides);
  std::vector<std::pair<SymInt, SymInt>> pairs{{0, 0}, {0, 0}};
  for (size_t i = 0; i < k; ++i) {
    int64_t e = (kernel[i] - 1) * dil[i];
    pairs.push_back({e - pads[i], e - pads[i + k] + outpad[i]});
  }
  Tensor xp = pad(up, pairs, Scalar(0));
  Window w;
  w.kernel = kernel;
  w.strides.assign(k, 1);
  w.dilations = dil;
  w.pad_begin.assign(k, 0);
  w.pad_end.assign(k, 0);
  for (size_t i = 0; i < k; ++i) {
    int64_t o = xp.shape()[2 + i].value() - (kernel[i] - 1) * dil[i];
    if (o <= 0) c.fail("the output would be empty");
    w.out.push_back(o);
  }
  c.set(0, conv_core(c, xp, wt, c.opt_in(2), w, G));
}

void pool_op(NodeCtx& c, bool is_max) {
  Tensor x = c.in(0);
  c.only_outputs(is_max ? 2 : 1);
  auto in = spatial_dims(c, x);
  size_t k = in.size();
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) c.fail("attribute 'kernel_shape' is required");
  Window w = plan_window(c, in, kernel, c.attr_int("ceil_mode", 0) != 0);
  Axes red;
  for (size_t i = 0; i < k; ++i) red.push_back(static_cast<int>(2 + k + i));
  if (is_max) {
    if (!is_float(x.dtype()) && x.dtype() != DType::U8 && x.dtype() != DType::I8) c.unsupported("MaxPool of " + x.describe());
    Tensor xp = pad_spatial(x, w, true);
    std::vector<SymInt> cs = contiguous_strides(xp.shape());
    Tensor win = window_view(xp, {x.shape()[0], x.shape()[1]}, {cs[0], cs[1]}, w);
    c.set(0, max(win, red, false));
    if (c.wants(1)) {
      // Indices: the flat position (row-major over N, C and the spatial dims; storage_order
      // 1 makes the spatial part column-major) of each window's first maximum.
      bool col_major = c.attr_int("storage_order", 0) != 0;
      Tensor pos = zeros({}, DType::I64);
      SymInt stride = 1;
      std::vector<int> order;
      for (int d = x.rank() - 1; d >= 2; --d) order.push_back(d);
      if (col_major) std::reverse(order.begin(), order.end());
      order.push_back(1);
      order.push_back(0);
      for (int d : order) {
        if (!stride.is_const()) c.unsupported("MaxPool indices with symbolic dims");
        pos = pos + Tensor(prim::index(DType::I64, x.shape(), d)) * stride.value();
        stride = stride * x.shape()[d];
      }
      Tensor pp = pad_spatial(expand(pos, x.shape()), w, false);
      Tensor pwin = window_view(pp, {x.shape()[0], x.shape()[1]}, {cs[0], cs[1]}, w);
      Tensor hit = eq(win, max(win, red, true));
      c.set(1, min(where(hit, pwin, full({}, std::numeric_limits<int64_t>::max(), DType::I64)), red, false));
    }
    return;
  }
  if (!is_float(x.dtype())) c.unsupported("AveragePool of " + x.describe());
  bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  Tensor xp = pad_spatial(x, w, false);
  std::vector<SymInt> cs = contiguous_strides(xp.shape());
  Tensor win = window_view(xp, {x.shape()[0], x.shape()[1]}, {cs[0], cs[1]}, w);
  Tensor s = sum(win, red, false);
  // element counts per window: separable, so an outer product of per-dim counts
  std::vector<int64_t> oshape(w.out.begin(), w.out.end());
  HostTensor count(DType::F64, oshape);
  int64_t total = count.numel();
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat, n = 1;
    for (size_t i = k; i-- > 0;) {
      int64_t o = rem % w.out[i];
      rem /= w.out[i];
      int64_t lo = include_pad ? -w.pad_begin[i] : 0, hi = include_pad ? in[i] + w.pad_end[i] : in[i], cnt = 0;
      for (int64_t j = 0; j < w.kernel[i]; ++j) {
        int64_t p = o * w.strides[i] + j * w.dilations[i] - w.pad_begin[i];
        cnt += p >= lo && p < hi;
      }
      n *= cnt;
    }
    count.set_f64(flat, n ? static_cast<double>(n) : 1.0);
  }
  c.set(0, s / to(from_host(count), x.dtype()));
}

void global_pool_op(NodeCtx& c, bool is_max) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (x.rank() < 3) c.fail("input must be [N, C, spatial…], got " + x.describe());
  Axes red;
  for (int d = 2; d < x.rank(); ++d) red.push_back(d);
  c.set(0, is_max ? max(x, red, true) : mean(x, red, true));
}

void gemm_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor a = c.in(0), b = c.in(1);
  require_same_dtype(c, a, b);
  if (a.rank() != 2 || b.rank() != 2) c.fail("A and B must be 2-D, got " + a.describe() + " and " + b.describe());
  if (c.attr_int("transA", 0)) a = transpose(a, 0, 1);
  if (c.attr_int("transB", 0)) b = transpose(b, 0, 1);
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Tensor y = matmul(a, b);
  if (alpha != 1.0) y = y * alpha;
  if (auto cc = c.opt_in(2); cc && beta != 0.0) {
    require_same_dtype(c, a, *cc);
    y = y + (beta != 1.0 ? *cc * beta : *cc);
  }
  c.set(0, to(y, c.in(0).dtype()));
}

}  // namespace

void add_nn_ops(OpTable& t) {
  t["MatMul"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor a = c.in(0), b = c.in(1);
    require_same_dtype(c, a, b);
    c.set(0, to(matmul(a, b), a.dtype()));
  };
  t["Gemm"] = gemm_op;
  t["Conv"] = conv_op;
  t["ConvTranspose"] = conv_transpose_op;
  t["MaxPool"] = [](NodeCtx& c) { pool_op(c, true); };
  t["AveragePool"] = [](NodeCtx& c) { pool_op(c, false); };
  t["GlobalAveragePool"] = [](NodeCtx& c) { global_pool_op(c, false); };
  t["GlobalMaxPool"] = [](NodeCtx& c) { global_pool_op(c, true); };
}

}  // namespace lathe::onnx_import
