// lower_quant.cpp — ONNX's quantized operators: QuantizeLinear, DequantizeLinear (per
// tensor and per axis), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv.
//
// Rounding and saturation are ONNX's: x / scale rounded half to even (round()), plus the
// zero point, clamped to the output type's range. Integer products are taken in i32 through
// matmul_integer / conv_integer, the u8/i8 contraction the scheduler packs into the int8
// GEMM; zero points are folded out of the product where that keeps the operands 8-bit
// (A·B − a_zp·colsum(B) − b_zp·rowsum(A) + K·a_zp·b_zp, all wrapping i32 like the direct
// form), and the QLinear ops requantize the i32 sum in f32 (acc · s_a·s_b / s_y).
#include <cmath>

#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

std::pair<double, double> int_range(DType t) {
  switch (t) {
    case DType::U8: return {0, 255};
    case DType::I8: return {-128, 127};
    case DType::I32: return {-2147483648.0, 2147483647.0};
    default: return {0, 0};
  }
}

bool quant_type(DType t) { return t == DType::U8 || t == DType::I8; }

// t's value as a literal when it is computable at import time (weight sums, the requant
// multipliers): computed once, not inside every kernel that reads it.
Tensor folded(const NodeCtx& c, const Tensor& t) {
  if (auto v = c.fold(t)) return from_host(*v);
  return t;
}

// A constant tensor that is all zeros (a zero point that can be left out).
bool all_zero(const NodeCtx& c, const std::optional<Tensor>& t) {
  if (!t) return true;
  auto v = c.fold(*t);
  if (!v) return false;
  for (int64_t i = 0; i < v->numel(); ++i)
    if (v->get_f64(i) != 0) return false;
  return true;
}

// A scale must be positive and finite where it is known at import time.
void check_scale(const NodeCtx& c, const Tensor& s, const char* what) {
  if (!is_float(s.dtype())) c.fail(std::string(what) + " must be a float tensor, got " + s.describe());
  auto v = c.fold(s);
  if (!v) return;
  for (int64_t i = 0; i < v->numel(); ++i) {
    double x = v->get_f64(i);
    if (x == 0) c.fail(std::string(what) + " has a zero scale (element " + std::to_string(i) + ")");
    if (!std::isfinite(x)) c.fail(std::string(what) + " has a non-finite scale (element " + std::to_string(i) + ")");
  }
}

// A per-tensor (scalar / one element) or per-axis (1-D of x's dim `axis`) parameter,
// reshaped to broadcast against x.
Tensor along_axis(const NodeCtx& c, const Tensor& p, const Tensor& x, int64_t axis_attr, const char* what) {
  if (p.rank() == 0) return p;
  if (p.rank() == 1 && p.dim(0) == SymInt(1)) return reshape(p, {});
  if (p.rank() != 1) c.fail(std::string(what) + " must be a scalar or 1-D, got " + p.describe());
  int ax = c.axis(axis_attr, x.rank());
  if (p.dim(0) != x.dim(ax))
    c.fail(std::string(what) + " " + p.describe() + " does not match axis " + std::to_string(ax) + " of " + x.describe() +
           " (mismatched axes: expected " + x.dim(ax).to_string() + " elements)");
  Shape s(x.rank(), SymInt(1));
  s[ax] = x.dim(ax);
  return reshape(p, s);
}

// a / b as the f32 division ONNX's reference does (the frontend's f32 division is
// a · (1/b), which can land a quotient just below .5 on it): in f64, rounded to f32 once.
Tensor div_f32(const Tensor& a, const Tensor& b) {
  return to(to(a, DType::F64) / to(b, DType::F64), DType::F32);
}

// An 8-bit result: max(v, −2^22) rounded as ((v + 1.5·2^23) − 1.5·2^23), plus zp, in f32,
// then Cast to `out`, whose saturation is the clamp to the type's range (NaN -> 0). For
// |v| < 2^22 the two additions round v half to even exactly (the sums lie in [2^23, 2^24),
// where the f32 spacing is 1); a v above 2^22 keeps its sign and a magnitude above 2^21
// through them (the errors are one spacing of the f32 sums), so the cast saturates it to the
// same end the exact value would, and |zp| <= 255 cannot move it across. The max (NaN
// propagates) stands between a product and the rounding addition, which backends would
// otherwise contract into an FMA that rounds the unrounded product (a requantized value off
// by one); a Where(2^22 < v, …) would be one minps, but its two readers of v end the
// requantizing epilogue chain the scheduler materializes before a max pool. ~9 vector ops
// where there were ~20 (NaN-propagating max / min pairs, an i32 clamp, the cast's NaN and
// range checks twice).
Tensor saturate8(const Tensor& v_in, const std::optional<Tensor>& zp, DType out) {
  const double lim = 4194304.0, magic = 12582912.0;
  Tensor v = to(v_in, DType::F32);
  v = maximum(v, scalar(-lim, DType::F32));
  Tensor r = (v + scalar(magic, DType::F32)) - scalar(magic, DType::F32);
  if (zp) r = r + to(*zp, DType::F32);
  return to(r, out);
}

// clamp(round(v) + zp, type range) as `out` (v float; zp optional, any numeric dtype).
Tensor saturate(const Tensor& v, const std::optional<Tensor>& zp, DType out) {
  if (out != DType::I32) return saturate8(v, zp, out);
  Tensor r = round(v);
  if (zp) r = r + to(*zp, r.dtype());
  auto [lo, hi] = int_range(out);
  return to(clamp(r, Scalar(lo), Scalar(hi)), out);
}

void quantize_linear(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), scale = c.in(1);
  std::optional<Tensor> zp = c.opt_in(2);
  if (c.has_attr("block_size") && c.attr_int("block_size", 0) != 0) c.unsupported("blocked QuantizeLinear (block_size)");
  DType out = zp ? zp->dtype() : DType::U8;
  if (!quant_type(out) && out != DType::I32) c.unsupported("QuantizeLinear to " + std::string(dtype_name(out)));
  if (zp && zp->shape() != scale.shape()) c.fail("zero point " + zp->describe() + " and scale " + scale.describe() + " differ in shape");
  check_scale(c, scale, "y_scale");
  int64_t axis = c.attr_int("axis", 1);
  Tensor s = to(along_axis(c, scale, x, axis, "y_scale"), DType::F32);
  std::optional<Tensor> z;
  if (zp && !all_zero(c, zp)) z = along_axis(c, *zp, x, axis, "y_zero_point");
  c.set(0, saturate(div_f32(to(x, DType::F32), s), z, out));
}

void dequantize_linear(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), scale = c.in(1);
  std::optional<Tensor> zp = c.opt_in(2);
  if (!is_int(x.dtype())) c.unsupported("DequantizeLinear of " + x.describe());
  if (zp && zp->dtype() != x.dtype()) c.fail("zero point " + zp->describe() + " must have the input's type " + x.describe());
  if (zp && zp->shape() != scale.shape()) c.fail("zero point " + zp->describe() + " and scale " + scale.describe() + " differ in shape");
  check_scale(c, scale, "x_scale");
  int64_t axis = c.attr_int("axis", 1);
  Tensor s = along_axis(c, scale, x, axis, "x_scale");
  Tensor xi = to(x, DType::I32);
  bool has_zp = zp && !all_zero(c, zp);
  if (has_zp) xi = xi - to(along_axis(c, *zp, x, axis, "x_zero_point"), DType::I32);
  c.set(0, to(to(xi, DType::F32) * to(s, DType::F32), scale.dtype()));
}

// y_scale = (max(0, max x) - min(0, min x)) / 255, zp = saturate(round(-min / scale)),
// y = saturate(round(x / scale) + zp), all u8.
void dynamic_quantize_linear(NodeCtx& c) {
  Tensor x = to(c.in(0), DType::F32);
  Tensor hi = maximum(max(x), scalar(0.0, DType::F32)), lo = minimum(min(x), scalar(0.0, DType::F32));
  Tensor scale = div_f32(hi - lo, scalar(255.0, DType::F32));
  Tensor zp = saturate(div_f32(scalar(0.0, DType::F32) - lo, scale), std::nullopt, DType::U8);
  c.set(0, saturate(div_f32(x, scale), zp, DType::U8));
  if (c.wants(1)) c.set(1, scale);
  if (c.wants(2)) c.set(2, zp);
}

// Σ_k (a - a_zp)(b - b_zp) in i32 for a [.., M, K], b [.., K, N] (rank >= 2); a_zp scalar or
// [M], b_zp scalar or [N].
Tensor matmul_zp(const NodeCtx& c, const Tensor& a, const Tensor& b, std::optional<Tensor> azp, std::optional<Tensor> bzp) {
  if (all_zero(c, azp)) azp.reset();
  if (all_zero(c, bzp)) bzp.reset();
  if (!quant_type(a.dtype()) || !quant_type(b.dtype()))
    c.fail("operands must be uint8 or int8, got " + a.describe() + " and " + b.describe());
  if (azp && azp->dtype() != a.dtype()) c.fail("a_zero_point " + azp->describe() + " must have A's type " + a.describe());
  if (bzp && bzp->dtype() != b.dtype()) c.fail("b_zero_point " + bzp->describe() + " must have B's type " + b.describe());
  if ((azp || bzp) && (a.rank() < 2 || b.rank() < 2)) {  // 1-D operands: the direct form
    Tensor ai = to(a, DType::I32), bi = to(b, DType::I32);
    if (azp) ai = ai - to(reshape(*azp, {}), DType::I32);
    if (bzp) bi = bi - to(reshape(*bzp, {}), DType::I32);
    return matmul_integer(ai, bi);
  }
  Tensor y = matmul_integer(a, b);
  if (!azp && !bzp) return y;
  SymInt K = a.dim(-1);
  std::optional<Tensor> az, bz;
  if (azp) {
    if (azp->rank() > 1 || (azp->rank() == 1 && azp->dim(0) != SymInt(1) && azp->dim(0) != a.dim(-2)))
      c.fail("a_zero_point " + azp->describe() + " must be a scalar or have A's " + a.dim(-2).to_string() + " rows");
    az = to(azp->rank() == 1 ? reshape(*azp, {azp->dim(0), SymInt(1)}) : *azp, DType::I32);  // [M, 1]
    Tensor colsum = folded(c, Tensor(prim::reduce(ReduceOp::Add, to(b, DType::I32).node(), {b.rank() - 2})));  // [.., 1, N]
    y = y - folded(c, *az * colsum);
  }
  if (bzp) {
    if (bzp->rank() > 1 || (bzp->rank() == 1 && bzp->dim(0) != SymInt(1) && bzp->dim(0) != b.dim(-1)))
      c.fail("b_zero_point " + bzp->describe() + " must be a scalar or have B's " + b.dim(-1).to_string() + " columns");
    bz = to(reshape(*bzp, bzp->rank() == 1 ? Shape{bzp->dim(0)} : Shape{}), DType::I32);  // [N]
    Tensor rowsum(prim::reduce(ReduceOp::Add, to(a, DType::I32).node(), {a.rank() - 1}));  // [.., M, 1]
    y = y - rowsum * *bz;
  }
  if (az && bz) {
    if (!K.is_const()) c.unsupported("symbolic K with both zero points");
    y = y + *az * *bz * scalar(static_cast<int64_t>(K.value()), DType::I32);
  }
  return y;
}

void matmul_integer_op(NodeCtx& c) {
  c.only_outputs(1);
  c.set(0, matmul_zp(c, c.in(0), c.in(1), c.opt_in(2), c.opt_in(3)));
}

// Σ (x - x_zp)(w - w_zp) over Conv's windows, in i32. With a constant scalar x_zp and no
// w_zp, x is padded with x_zp and the zero point comes out as x_zp · Σw per output channel,
// keeping the operands 8-bit; otherwise the direct form in i32.
Tensor conv_zp(const NodeCtx& c, const Tensor& x, const Tensor& w, std::optional<Tensor> xzp, std::optional<Tensor> wzp) {
  if (!quant_type(x.dtype()) || !quant_type(w.dtype()))
    c.fail("operands must be uint8 or int8, got " + x.describe() + " and " + w.describe());
  if (all_zero(c, xzp)) xzp.reset();
  if (all_zero(c, wzp)) wzp.reset();
  if (xzp && xzp->dtype() != x.dtype()) c.fail("x_zero_point " + xzp->describe() + " must have x's type " + x.describe());
  if (wzp && wzp->dtype() != w.dtype()) c.fail("w_zero_point " + wzp->describe() + " must have w's type " + w.describe());
  if (xzp && shape_numel(xzp->shape()) != SymInt(1)) c.fail("x_zero_point must be a scalar, got " + xzp->describe());
  Shape per_m{w.dim(0)};
  for (int d = 2; d < x.rank(); ++d) per_m.push_back(SymInt(1));
  std::optional<HostTensor> xz_const = xzp ? c.fold(*xzp) : std::nullopt;
  if (!wzp && (!xzp || xz_const)) {
    int64_t z = xzp ? static_cast<int64_t>(xz_const->get_f64(0)) : 0;
    Tensor y = conv_integer(c, x, w, z);
    if (z != 0) {
      Axes red;
      for (int d = 1; d < w.rank(); ++d) red.push_back(d);
      Tensor wsum(prim::reduce(ReduceOp::Add, to(w, DType::I32).node(), red));  // [M, 1, …]
      y = y - folded(c, reshape(wsum, per_m) * scalar(z, DType::I32));
    }
    return y;
  }
  Tensor xi = to(x, DType::I32), wi = to(w, DType::I32);
  if (xzp) xi = xi - to(reshape(*xzp, {}), DType::I32);
  if (wzp) {
    if (wzp->rank() > 1 || (wzp->rank() == 1 && wzp->dim(0) != SymInt(1) && wzp->dim(0) != w.dim(0)))
      c.fail("w_zero_point " + wzp->describe() + " must be a scalar or have one element per output channel (" +
             w.dim(0).to_string() + ")");
    Shape ws(w.rank(), SymInt(1));
    if (wzp->rank() == 1) ws[0] = wzp->dim(0);
    wi = wi - to(reshape(*wzp, ws), DType::I32);
  }
  return conv_integer(c, xi, wi, 0);
}

void conv_integer_op(NodeCtx& c) {
  c.only_outputs(1);
  c.set(0, conv_zp(c, c.in(0), c.in(1), c.opt_in(2), c.opt_in(3)));
}

// f32 scale of a QLinear operand, checked: a scalar, or 1-D of `n` elements (per row /
// column / channel) reshaped to `shape`.
Tensor qscale(const NodeCtx& c, size_t i, const char* what, const SymInt& n, const Shape& shape) {
  Tensor s = c.in(i);
  check_scale(c, s, what);
  if (shape_numel(s.shape()) == SymInt(1)) return to(reshape(s, {}), DType::F32);
  if (s.rank() != 1 || s.dim(0) != n)
    c.fail(std::string(what) + " " + s.describe() + " must be a scalar or have " + n.to_string() + " elements (mismatched axes)");
  return to(reshape(s, shape), DType::F32);
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)
void qlinear_matmul(NodeCtx& c) {
  c.only_outputs(1);
  Tensor a = c.in(0), b = c.in(3);
  Tensor acc = matmul_zp(c, a, b, c.opt_in(2), c.opt_in(5));
  Tensor sa = qscale(c, 1, "a_scale", a.rank() >= 2 ? a.dim(-2) : SymInt(1), {a.rank() >= 2 ? a.dim(-2) : SymInt(1), SymInt(1)});
  Tensor sb = qscale(c, 4, "b_scale", b.dim(-1), {b.dim(-1)});
  Tensor sy = qscale(c, 6, "y_scale", SymInt(1), {});
  std::optional<Tensor> yzp = c.opt_in(7);
  DType out = yzp ? yzp->dtype() : DType::U8;
  if (!quant_type(out)) c.fail("y_zero_point must be uint8 or int8, got " + yzp->describe());
  if (yzp && all_zero(c, yzp)) yzp.reset();
  c.set(0, saturate(to(acc, DType::F32) * (sa * sb / sy), yzp ? std::optional<Tensor>(reshape(*yzp, {})) : std::nullopt, out));
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B)
void qlinear_conv(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), w = c.in(3);
  if (w.rank() < 3) c.fail("weight must be [M, C/group, k…], got " + w.describe());
  Tensor acc = conv_zp(c, x, w, c.opt_in(2), c.opt_in(5));
  Shape per_m{w.dim(0)};
  for (int d = 2; d < x.rank(); ++d) per_m.push_back(SymInt(1));
  if (auto bias = c.opt_in(8)) {
    if (bias->dtype() != DType::I32 || bias->rank() != 1 || bias->dim(0) != w.dim(0))
      c.fail("bias must be int32 [" + w.dim(0).to_string() + "], got " + bias->describe());
    acc = acc + reshape(*bias, per_m);
  }
  Tensor sx = qscale(c, 1, "x_scale", SymInt(1), {});
  Tensor sw = qscale(c, 4, "w_scale", w.dim(0), per_m);
  Tensor sy = qscale(c, 6, "y_scale", SymInt(1), {});
  std::optional<Tensor> yzp = c.opt_in(7);
  DType out = yzp ? yzp->dtype() : DType::U8;
  if (!quant_type(out)) c.fail("y_zero_point must be uint8 or int8, got " + yzp->describe());
  if (yzp && all_zero(c, yzp)) yzp.reset();
  c.set(0, saturate(to(acc, DType::F32) * (sx * sw / sy), yzp ? std::optional<Tensor>(reshape(*yzp, {})) : std::nullopt, out));
}

}  // namespace

void add_quant_ops(OpTable& t) {
  t["QuantizeLinear"] = quantize_linear;
  t["DequantizeLinear"] = dequantize_linear;
  t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  t["MatMulInteger"] = matmul_integer_op;
  t["ConvInteger"] = conv_integer_op;
  t["QLinearMatMul"] = qlinear_matmul;
  t["QLinearConv"] = qlinear_conv;
}

}  // namespace lathe::onnx_import
