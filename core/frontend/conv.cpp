// conv.cpp — convolution and pooling as strided Views ("im2col without a copy") followed by
// a broadcast Mul + Reduce add (conv) or a Reduce max / add (pooling).
//
// For a padded input xp [N, C, Hp, Wp] (contiguous strides [C·Hp·Wp, Hp·Wp, Wp, 1]) the
// window element (oh, ow, r, s) is xp[n, c, oh·sh + r·dh, ow·sw + s·dw], so the patches are
// one View with strides (.., sh·Wp, sw, .., dh·Wp, dw): overlapping windows share memory.
#include <climits>
#include <cmath>
#include <limits>

#include "core/frontend/nn.h"
#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

namespace {

std::pair<int64_t, int64_t> pair_of(const std::vector<int64_t>& v, const char* op, const char* what, int64_t dflt) {
  if (v.empty()) return {dflt, dflt};
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  fail(op, std::string(what) + " needs 1 or 2 values, got " + std::to_string(v.size()));
}

SymInt out_size(const SymInt& padded, int64_t k, int64_t stride, int64_t dil, const char* op, const Tensor& x) {
  SymInt span = padded - SymInt(dil * (k - 1) + 1);
  if (span.is_const() && span.value() < 0)
    fail(op, "the (dilated) kernel of size " + std::to_string(dil * (k - 1) + 1) + " is larger than the padded input " +
                 padded.to_string() + " of " + x.describe());
  return floordiv(span, SymInt(stride)) + SymInt(1);
}

struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

Window window_of(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                 const std::vector<int64_t>& dilation, const char* op) {
  auto [kh, kw] = pair_of(kernel, op, "kernel", 1);
  auto [sh, sw] = pair_of(stride.empty() ? kernel : stride, op, "stride", 1);
  auto [ph, pw] = pair_of(padding, op, "padding", 0);
  auto [dh, dw] = pair_of(dilation, op, "dilation", 1);
  if (kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || ph < 0 || pw < 0)
    fail(op, "kernel, stride and dilation must be positive and padding non-negative");
  return {kh, kw, sh, sw, ph, pw, dh, dw};
}

}  // namespace

namespace {

// integer: operands keep their dtypes (padding with pad_value), products widened to i32
// (Cast(View(operand)), the int8 contraction of match_matmul).
Tensor conv2d_impl(const Tensor& x_in, const Tensor& w_in, const std::optional<Tensor>& bias, const Conv2dOptions& opt,
                   bool integer, int64_t pad_value) {
  if (x_in.rank() != 4) fail("conv2d", "input must be [N, C, H, W], got " + x_in.describe());
  if (w_in.rank() != 4) fail("conv2d", "weight must be [K, C/groups, R, S], got " + w_in.describe());
  ProvenanceScope ps("conv2d");
  if (integer && (!is_int(x_in.dtype()) || !is_int(w_in.dtype())))
    fail("conv2d_integer", "operands must be integer tensors, got " + x_in.describe() + " and " + w_in.describe());
  DType dt = to_float(promote(x_in.dtype(), w_in.dtype()));
  Tensor x = integer ? x_in : to(x_in, dt), w = integer ? w_in : to(w_in, dt);
  int64_t G = opt.groups;
  int64_t C = detail::const_dim(x.dim(1), "conv2d", "channel count C");
  int64_t K = detail::const_dim(w.dim(0), "conv2d", "output channels K");
  int64_t Cg = detail::const_dim(w.dim(1), "conv2d", "weight dim 1");
  int64_t R = detail::const_dim(w.dim(2), "conv2d", "kernel height");
  int64_t S = detail::const_dim(w.dim(3), "conv2d", "kernel width");
  if (G <= 0 || C % G || K % G || C / G != Cg)
    fail("conv2d", "channels do not match groups=" + std::to_string(G) + ": input " + x_in.describe() + ", weight " +
                       w_in.describe() + " (expected C divisible by groups, weight dim 1 = C/groups, K divisible by groups)");
  Window win = window_of({R, S}, opt.stride, opt.padding, opt.dilation, "conv2d");
  int64_t Kg = K / G;
  Tensor xp = pad(x, {{0, 0}, {0, 0}, {win.ph, win.ph}, {win.pw, win.pw}}, integer ? Scalar(pad_value) : Scalar(0));
  SymInt N = x.dim(0), Hp = xp.dim(2), Wp = xp.dim(3);
  SymInt OH = out_size(Hp, R, win.sh, win.dh, "conv2d", x_in), OW = out_size(Wp, S, win.sw, win.dw, "conv2d", x_in);
  SymInt plane = Hp * Wp;
  ViewSpec patches;
  patches.shape = {N, G, 1, OH, OW, Cg, R, S};
  patches.strides = {SymInt(C) * plane, SymInt(Cg) * plane, 0, SymInt(win.sh) * Wp, SymInt(win.sw),
                     plane, SymInt(win.dh) * Wp, SymInt(win.dw)};
  Tensor p(prim::view(xp.node(), patches));
  Shape full{N, G, Kg, OH, OW, Cg, R, S};
  Tensor pe = expand(p, full);
  Tensor we = expand(reshape(w, {1, G, Kg, 1, 1, Cg, R, S}), full);
  Tensor prod = integer ? to(pe, DType::I32) * to(we, DType::I32) : pe * we;
  Tensor y(prim::reduce(ReduceOp::Add, prod.node(), {5, 6, 7}));
  Tensor out = reshape(y, {N, K, OH, OW});
  if (bias) {
    if (bias->rank() != 1 || bias->dim(0) != SymInt(K))
      fail("conv2d", "bias must be [" + std::to_string(K) + "], got " + bias->describe());
    out = out + reshape(*bias, {K, 1, 1});
  }
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, const Conv2dOptions& opt) {
  return conv2d_impl(x, w, bias, opt, false, 0);
}

Tensor conv2d_integer(const Tensor& x, const Tensor& w, const Conv2dOptions& opt, int64_t pad_value) {
  return conv2d_impl(x, w, std::nullopt, opt, true, pad_value);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  if (x.rank() != 3) fail("conv1d", "input must be [N, C, L], got " + x.describe());
  if (weight.rank() != 3) fail("conv1d", "weight must be [K, C/groups, R], got " + weight.describe());
  ProvenanceScope ps("conv1d");
  Conv2dOptions o;
  o.stride = {1, stride};
  o.padding = {0, padding};
  o.dilation = {1, dilation};
  o.groups = groups;
  return squeeze(conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, o), {2});
}

// Windows [N, C, OH, OW, R, S] of a padded [N, C, Hp, Wp] tensor.
static Tensor pool_windows(const Tensor& xp, const Window& win, const SymInt& OH, const SymInt& OW) {
  SymInt Hp = xp.dim(2), Wp = xp.dim(3);
  ViewSpec v;
  v.shape = {xp.dim(0), xp.dim(1), OH, OW, win.kh, win.kw};
  v.strides = {xp.dim(1) * Hp * Wp, Hp * Wp, SymInt(win.sh) * Wp, SymInt(win.sw), SymInt(win.dh) * Wp, SymInt(win.dw)};
  return Tensor(prim::view(xp.node(), v));
}

// The padding value of max pooling: -inf, or the integer type's minimum.
static Scalar lowest_value(DType dt) {
  switch (dt) {
    case DType::I8: return Scalar(-128);
    case DType::I16: return Scalar(-32768);
    case DType::I32: return Scalar(static_cast<int64_t>(INT32_MIN));
    case DType::I64: return Scalar(std::numeric_limits<int64_t>::min());
    case DType::U8: case DType::U16: case DType::U32: case DType::U64: case DType::Bool: return Scalar(0);
    default: return Scalar(-INFINITY);
  }
}

static Tensor pool2d(const Tensor& x_in, const Pool2dOptions& opt, bool is_max, const char* op) {
  if (x_in.rank() != 4 && x_in.rank() != 3) fail(op, "input must be [N, C, H, W] or [C, H, W], got " + x_in.describe());
  ProvenanceScope ps(op);
  Tensor x = x_in.rank() == 3 ? unsqueeze(x_in, 0) : x_in;
  if (!is_max) x = detail::as_float(x);
  Window win = window_of(opt.kernel, opt.stride, opt.padding, is_max ? opt.dilation : std::vector<int64_t>{1, 1}, op);
  if (win.ph * 2 > win.kh || win.pw * 2 > win.kw)
    fail(op, "padding must be at most half the kernel size (kernel " + std::to_string(win.kh) + "x" +
                 std::to_string(win.kw) + ")");
  std::vector<std::pair<SymInt, SymInt>> pads{{0, 0}, {0, 0}, {win.ph, win.ph}, {win.pw, win.pw}};
  Scalar fill = is_max ? lowest_value(x.dtype()) : Scalar(0);
  Tensor xp = pad(x, pads, fill);
  SymInt OH = out_size(xp.dim(2), win.kh, win.sh, win.dh, op, x_in), OW = out_size(xp.dim(3), win.kw, win.sw, win.dw, op, x_in);
  Tensor windows = pool_windows(xp, win, OH, OW);
  Tensor y(prim::reduce(is_max ? ReduceOp::Max : ReduceOp::Add, windows.node(), {4, 5}));
  y = reshape(y, {x.dim(0), x.dim(1), OH, OW});
  if (!is_max) {
    if (opt.count_include_pad || (win.ph == 0 && win.pw == 0)) {
      y = y * (1.0 / static_cast<double>(win.kh * win.kw));
    } else {
      Tensor ones_p = pad(ones(x.shape(), x.dtype()), pads);
      Tensor cnt(prim::reduce(ReduceOp::Add, pool_windows(ones_p, win, OH, OW).node(), {4, 5}));
      y = y / reshape(cnt, {x.dim(0), x.dim(1), OH, OW});
    }
  }
  return x_in.rank() == 3 ? squeeze(y, {0}) : y;
}

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& opt) { return pool2d(x, opt, true, "max_pool2d"); }
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& opt) { return pool2d(x, opt, false, "avg_pool2d"); }

// Row i of the matrix averages input positions [floor(i*in/out), ceil((i+1)*in/out)).
static Tensor adaptive_matrix(int64_t out, int64_t in, DType dt) {
  HostTensor m(DType::F64, {out, in});
  for (int64_t i = 0; i < out; ++i) {
    int64_t lo = (i * in) / out, hi = ((i + 1) * in + out - 1) / out;
    for (int64_t j = lo; j < hi; ++j) m.set_f64(i * in + j, 1.0 / static_cast<double>(hi - lo));
  }
  return to(from_host(m), dt);
}

Tensor adaptive_avg_pool2d(const Tensor& x_in, int64_t out_h, int64_t out_w) {
  if (x_in.rank() != 4) fail("adaptive_avg_pool2d", "input must be [N, C, H, W], got " + x_in.describe());
  if (out_h <= 0 || out_w <= 0) fail("adaptive_avg_pool2d", "output size must be positive");
  ProvenanceScope ps("adaptive_avg_pool2d");
  Tensor x = detail::as_float(x_in);
  int64_t H = detail::const_dim(x.dim(2), "adaptive_avg_pool2d", "H");
  int64_t W = detail::const_dim(x.dim(3), "adaptive_avg_pool2d", "W");
  if (H % out_h == 0 && W % out_w == 0) {
    Pool2dOptions o;
    o.kernel = {H / out_h, W / out_w};
    return avg_pool2d(x, o);
  }
  Tensor ph = adaptive_matrix(out_h, H, x.dtype()), pw = adaptive_matrix(out_w, W, x.dtype());
  return matmul(matmul(ph, x), transpose(pw, 0, 1));
}

Tensor global_avg_pool2d(const Tensor& x) {
  if (x.rank() != 4) fail("global_avg_pool2d", "input must be [N, C, H, W], got " + x.describe());
  ProvenanceScope ps("global_avg_pool2d");
  return mean(x, {2, 3}, true);
}

}  // namespace lathe
