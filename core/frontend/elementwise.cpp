// elementwise.cpp — elementwise math composites over the unary/binary primitives
// (exp/log via Exp2/Log2, trig via Sin, activations, erf/gelu, pow, rounding, min/max,
// remainders).
#include <cmath>

#include "core/frontend/detail.h"

namespace lathe {

using detail::as_float;
using detail::fail;
using detail::unary;

static constexpr double kLog2E = 1.4426950408889634;
static constexpr double kLn2 = 0.6931471805599453;
static constexpr double kPi = 3.141592653589793;

Tensor exp2(const Tensor& x) { return unary(Op::Exp2, as_float(x)); }
Tensor log2(const Tensor& x) { return unary(Op::Log2, as_float(x)); }
Tensor exp(const Tensor& x) {
  ProvenanceScope ps("exp");
  return unary(Op::Exp2, as_float(x) * kLog2E);
}
Tensor log(const Tensor& x) {
  ProvenanceScope ps("log");
  return unary(Op::Log2, as_float(x)) * kLn2;
}
// log(1+x) and exp(x)-1 with the usual correction terms: exact to rounding for small x.
Tensor log1p(const Tensor& x) {
  ProvenanceScope ps("log1p");
  Tensor xf = as_float(x);
  Tensor u = xf + 1.0;
  Tensor d = u - 1.0;  // log(u) * x / (u - 1) recovers the bits lost in 1 + x
  return where(eq(d, 0.0), xf, log(u) * xf / d);
}
Tensor expm1(const Tensor& x) {
  ProvenanceScope ps("expm1");
  Tensor xf = as_float(x);
  Tensor u = exp(xf);
  Tensor um1 = u - 1.0;
  Tensor lu = log(u);
  return where(eq(u, 1.0), xf, where(eq(um1, -1.0), um1, um1 * xf / lu));
}

Tensor sin(const Tensor& x) { return unary(Op::Sin, as_float(x)); }
Tensor cos(const Tensor& x) {
  ProvenanceScope ps("cos");
  return unary(Op::Sin, as_float(x) + kPi / 2);
}
Tensor tan(const Tensor& x) {
  ProvenanceScope ps("tan");
  return sin(x) / cos(x);
}
Tensor sigmoid(const Tensor& x) {
  ProvenanceScope ps("sigmoid");
  return reciprocal(exp(-as_float(x)) + 1.0);
}
Tensor tanh(const Tensor& x) {
  ProvenanceScope ps("tanh");
  return sigmoid(as_float(x) * 2.0) * 2.0 - 1.0;
}

Tensor relu(const Tensor& x) {
  ProvenanceScope ps("relu");
  return Tensor(prim::binary(Op::Max, x.node(), detail::const_like(x, 0).node()));
}
Tensor leaky_relu(const Tensor& x, double slope) {
  ProvenanceScope ps("leaky_relu");
  Tensor xf = as_float(x);
  return where(gt(xf, 0), xf, xf * slope);
}
Tensor elu(const Tensor& x, double alpha) {
  ProvenanceScope ps("elu");
  Tensor xf = as_float(x);
  return where(gt(xf, 0), xf, (exp(xf) - 1.0) * alpha);
}
Tensor selu(const Tensor& x) {
  ProvenanceScope ps("selu");
  return elu(x, 1.6732632423543772) * 1.0507009873554805;
}

Tensor erf(const Tensor& x) {
  ProvenanceScope ps("erf");
  // Abramowitz & Stegun 7.1.26: erf(z) = 1 - (a1 t + .. + a5 t^5) e^{-z^2}, t = 1/(1 + p z)
  Tensor xf = as_float(x);
  Tensor z = abs(xf);
  Tensor t = reciprocal(z * 0.3275911 + 1.0);
  Tensor poly = ((((t * 1.061405429 + -1.453152027) * t + 1.421413741) * t + -0.284496736) * t + 0.254829592) * t;
  Tensor y = 1.0 - poly * exp(-(z * z));
  return where(lt(xf, 0), -y, y);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  ProvenanceScope ps("gelu");
  Tensor xf = as_float(x);
  if (approximate == "tanh") {
    Tensor inner = (xf + xf * xf * xf * 0.044715) * 0.7978845608028654;  // sqrt(2/pi)
    return xf * 0.5 * (tanh(inner) + 1.0);
  }
  if (approximate != "none") fail("gelu", "approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
  return xf * 0.5 * (erf(xf * 0.7071067811865476) + 1.0);
}

Tensor silu(const Tensor& x) {
  ProvenanceScope ps("silu");
  Tensor xf = as_float(x);
  return xf * sigmoid(xf);
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  ProvenanceScope ps("softplus");
  Tensor xf = as_float(x);
  Tensor bx = xf * beta;
  // log(1 + e^{bx}) = max(bx, 0) + log1p(e^{-|bx|}) stays finite for large |bx|
  Tensor soft = (relu(bx) + log1p(exp(-abs(bx)))) / beta;
  return where(gt(bx, threshold), xf, soft);
}
Tensor mish(const Tensor& x) {
  ProvenanceScope ps("mish");
  Tensor xf = as_float(x);
  return xf * tanh(softplus(xf));
}

Tensor pow(const Tensor& x, Scalar e) {
  ProvenanceScope ps("pow");
  double v = e.is_float ? e.f : static_cast<double>(e.i);
  if (v == std::floor(v) && std::fabs(v) <= 64) {
    auto n = static_cast<int64_t>(std::fabs(v));
    Tensor base = (v < 0 || e.is_float) ? as_float(x) : x;
    if (n == 0) return ones_like(base);
    Tensor r, p = base;  // square-and-multiply
    while (n) {
      if (n & 1) r = r.defined() ? r * p : p;
      n >>= 1;
      if (n) p = p * p;
    }
    return v < 0 ? reciprocal(r) : r;
  }
  Tensor xf = as_float(x);
  if (v == 0.5) return sqrt(xf);
  if (v == -0.5) return rsqrt(xf);
  return exp2(log2(xf) * v);
}

Tensor pow(const Tensor& a, const Tensor& b) {
  ProvenanceScope ps("pow");
  auto [x, y] = broadcast_promote(as_float(a), as_float(b), "pow");
  Tensor mag = exp2(log2(abs(x)) * y);
  Tensor integral = eq(floor(y), y);
  Tensor odd = ne(fmod(y, full({}, 2.0, y.dtype())), 0.0);
  Tensor neg_base = where(integral, where(odd, -mag, mag), full({}, NAN, x.dtype()));
  Tensor r = where(lt(x, 0), neg_base, mag);
  return where(eq(y, 0), ones_like(r), r);
}

Tensor sqrt(const Tensor& x) { return unary(Op::Sqrt, as_float(x)); }
Tensor rsqrt(const Tensor& x) {
  ProvenanceScope ps("rsqrt");
  return unary(Op::Recip, unary(Op::Sqrt, as_float(x)));
}
Tensor reciprocal(const Tensor& x) { return unary(Op::Recip, as_float(x)); }

Tensor abs(const Tensor& x) {
  if (x.dtype() == DType::Bool || is_unsigned_int(x.dtype())) return x;
  ProvenanceScope ps("abs");
  if (is_float(x.dtype())) return maximum(x, -x);
  return where(lt(x, 0), -x, x);
}
Tensor sign(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x;
  ProvenanceScope ps("sign");
  Tensor one = detail::const_like(x, 1), zero = detail::const_like(x, 0);
  Tensor s = where(gt(x, 0), one, where(lt(x, 0), -one, zero));
  return is_float(x.dtype()) ? where(isnan(x), x, s) : s;
}
Tensor square(const Tensor& x) { return x * x; }

// Values at or above 2^(mantissa bits) are already integers (and may not fit an i64).
static double integral_threshold(DType dt) {
  switch (dt) {
    case DType::F16: return 1024.0;
    case DType::BF16: return 128.0;
    case DType::F32: return 8388608.0;
    default: return 4503599627370496.0;
  }
}
Tensor trunc(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  ProvenanceScope ps("trunc");
  Tensor tr(prim::cast(prim::cast(x.node(), DType::I64), x.dtype()));
  return where(lt(abs(x), integral_threshold(x.dtype())), tr, x);
}
Tensor floor(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  ProvenanceScope ps("floor");
  Tensor tr = trunc(x);
  return where(gt(tr, x), tr - 1.0, tr);
}
Tensor ceil(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  ProvenanceScope ps("ceil");
  Tensor tr = trunc(x);
  return where(lt(tr, x), tr + 1.0, tr);
}
Tensor round(const Tensor& x) {
  if (!is_float(x.dtype())) return x;
  ProvenanceScope ps("round");
  Tensor fl = floor(x);
  Tensor frac = x - fl;  // exact in floating point for |x| below the threshold
  Tensor even = eq(fmod(fl, full({}, 2.0, x.dtype())), 0.0);
  Tensor up = fl + 1.0;
  return where(gt(frac, 0.5), up, where(lt(frac, 0.5), fl, where(even, fl, up)));
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "maximum");
  if (x.dtype() == DType::Bool) return logical_or(x, y);
  return detail::binary(Op::Max, x, y);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "minimum");
  ProvenanceScope ps("minimum");
  if (x.dtype() == DType::Bool) return logical_and(x, y);
  if (is_float(x.dtype())) return -detail::binary(Op::Max, -x, -y);  // keeps NaN propagation
  // integers: bitwise not reverses the order of signed and unsigned values alike
  return unary(Op::Not, detail::binary(Op::Max, unary(Op::Not, x), unary(Op::Not, y)));
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  ProvenanceScope ps("clamp");
  Tensor r = x;
  if (lo) r = maximum(r, scalar_like(r, *lo));
  if (hi) r = minimum(r, scalar_like(r, *hi));
  return r;
}
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  ProvenanceScope ps("clamp");
  return minimum(maximum(x, lo), hi);
}

Tensor hardsigmoid(const Tensor& x) {
  ProvenanceScope ps("hardsigmoid");
  return clamp(as_float(x) * (1.0 / 6.0) + 0.5, Scalar(0.0), Scalar(1.0));
}
Tensor hardswish(const Tensor& x) {
  ProvenanceScope ps("hardswish");
  return as_float(x) * hardsigmoid(x);
}
Tensor hardtanh(const Tensor& x, double lo, double hi) {
  ProvenanceScope ps("hardtanh");
  return clamp(as_float(x), Scalar(lo), Scalar(hi));
}

Tensor fmod(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "fmod");
  if (x.dtype() == DType::Bool) fail("fmod", "is not defined for bool tensors " + a.describe());
  return detail::binary(Op::Mod, x, y);
}

// r = fmod(a, b); where r != 0 and sign(r) != sign(b), r + b.
Tensor remainder(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "remainder");
  if (is_unsigned_int(x.dtype())) return fmod(x, y);  // no signs to fix
  ProvenanceScope ps("remainder");
  Tensor r = fmod(x, y);
  Tensor fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(y, 0)));
  return where(fix, r + y, r);
}

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "floor_divide");
  ProvenanceScope ps("floor_divide");
  if (is_float(x.dtype())) return floor(x / y);
  if (x.dtype() == DType::Bool) fail("floor_divide", "is not defined for bool tensors " + a.describe());
  Tensor q = detail::binary(Op::IDiv, x, y);
  Tensor r = detail::binary(Op::Mod, x, y);
  Tensor fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(y, 0)));
  return where(fix, q - 1, q);
}

}  // namespace lathe
