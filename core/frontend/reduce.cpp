// reduce.cpp — reduction composites over the Reduce primitive (add / max / mul), with
// axis lists and keepdim: sum, mean, prod, max, min, var, std, argmax, argmin, logsumexp,
// any, all, cumsum.
#include <limits>

#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

static Tensor reduce_prim(ReduceOp op, const Tensor& x, const Axes& axes, bool keepdim) {
  Tensor r(prim::reduce(op, x.node(), axes));
  return keepdim ? r : detail::drop_axes(r, axes);
}

static DType accumulate_dtype(DType dt) { return is_float(dt) ? dt : DType::I64; }

Tensor sum(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "sum");
  return reduce_prim(ReduceOp::Add, to(x, accumulate_dtype(x.dtype())), ax, keepdim);
}

Tensor prod(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "prod");
  return reduce_prim(ReduceOp::Mul, to(x, accumulate_dtype(x.dtype())), ax, keepdim);
}

// The number of elements the axes cover: a constant when known, else a Reduce over ones.
static Tensor count_of(const Tensor& x, const Axes& ax, bool keepdim, DType dt) {
  SymInt n = 1;
  for (int a : ax) n = n * x.shape()[a];
  if (n.is_const()) return full({}, static_cast<double>(n.value()), dt);
  return reduce_prim(ReduceOp::Add, ones(x.shape(), dt), ax, keepdim);
}

Tensor mean(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "mean");
  ProvenanceScope ps("mean");
  Tensor xf = detail::as_float(x);
  Tensor s = reduce_prim(ReduceOp::Add, xf, ax, keepdim);
  Tensor n = count_of(xf, ax, keepdim, xf.dtype());
  if (n.node()->is_scalar_const()) return s * (1.0 / n.node()->const_value());
  return s / n;
}

Tensor max(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "max");
  if (x.dtype() == DType::Bool) return to(max(to(x, DType::U8), axes, keepdim), DType::Bool);
  return reduce_prim(ReduceOp::Max, x, ax, keepdim);
}

Tensor min(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "min");
  ProvenanceScope ps("min");
  if (x.dtype() == DType::Bool) return to(min(to(x, DType::U8), axes, keepdim), DType::Bool);
  if (is_float(x.dtype())) return -reduce_prim(ReduceOp::Max, -x, ax, keepdim);
  // integers: bitwise not reverses the order (signed and unsigned alike)
  Tensor nx = detail::unary(Op::Not, x);
  return detail::unary(Op::Not, reduce_prim(ReduceOp::Max, nx, ax, keepdim));
}

Tensor amax(const Tensor& x, Axes axes, bool keepdim) { return max(x, std::move(axes), keepdim); }
Tensor amin(const Tensor& x, Axes axes, bool keepdim) { return min(x, std::move(axes), keepdim); }

Tensor var(const Tensor& x, Axes axes, int correction, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "var");
  ProvenanceScope ps("var");
  Tensor xf = detail::as_float(x);
  Tensor m = mean(xf, ax, true);
  Tensor d = xf - m;
  Tensor ss = reduce_prim(ReduceOp::Add, d * d, ax, keepdim);
  Tensor n = count_of(xf, ax, keepdim, xf.dtype());
  if (n.node()->is_scalar_const()) {
    double denom = n.node()->const_value() - correction;
    return ss * (denom > 0 ? 1.0 / denom : std::numeric_limits<double>::infinity());
  }
  return ss / (n - static_cast<double>(correction));
}

Tensor std_dev(const Tensor& x, Axes axes, int correction, bool keepdim) {
  ProvenanceScope ps("std");
  return sqrt(var(x, std::move(axes), correction, keepdim));
}

static Tensor arg_extreme(const Tensor& x_in, std::optional<int> axis, bool keepdim, bool is_max, const char* op) {
  ProvenanceScope ps(op);
  Tensor x = x_in;
  int a;
  if (!axis) {
    x = reshape(x, {-1});
    a = 0;
    keepdim = false;
  } else {
    if (x.rank() == 0) x = reshape(x, {1});
    a = normalize_axis(*axis, x.rank(), op);
  }
  if (x.dtype() == DType::Bool) x = to(x, DType::U8);
  Tensor m = is_max ? max(x, {a}, true) : min(x, {a}, true);
  Tensor hit = eq(x, m);
  if (is_float(x.dtype())) hit = logical_or(hit, isnan(x));  // NaN wins, as in PyTorch
  Tensor idx(prim::index(DType::I64, x.shape(), a));
  Tensor cand = where(hit, -idx, full({}, std::numeric_limits<int64_t>::min(), DType::I64));
  Tensor first = -reduce_prim(ReduceOp::Max, cand, {a}, true);  // smallest matching index
  if (!axis) return reshape(first, {});
  if (x_in.rank() == 0) return reshape(first, {});
  return keepdim ? first : detail::drop_axes(first, {a});
}

Tensor argmax(const Tensor& x, std::optional<int> axis, bool keepdim) { return arg_extreme(x, axis, keepdim, true, "argmax"); }
Tensor argmin(const Tensor& x, std::optional<int> axis, bool keepdim) { return arg_extreme(x, axis, keepdim, false, "argmin"); }

Tensor logsumexp(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "logsumexp");
  ProvenanceScope ps("logsumexp");
  Tensor xf = detail::as_float(x);
  Tensor m = reduce_prim(ReduceOp::Max, xf, ax, true);
  Tensor ms = where(isinf(m), zeros({}, m.dtype()), m);  // all -inf (or +inf) rows stay finite
  Tensor r = log(reduce_prim(ReduceOp::Add, exp(xf - ms), ax, true)) + ms;
  return keepdim ? r : detail::drop_axes(r, ax);
}

Tensor any(const Tensor& x, Axes axes, bool keepdim) {
  Axes ax = normalize_axes(axes, x.rank(), "any");
  ProvenanceScope ps("any");
  Tensor b = to(to(x, DType::Bool), DType::U8);
  return ne(reduce_prim(ReduceOp::Max, b, ax, keepdim), 0);
}
Tensor all(const Tensor& x, Axes axes, bool keepdim) {
  ProvenanceScope ps("all");
  return logical_not(any(logical_not(x), std::move(axes), keepdim));
}

Tensor cumsum(const Tensor& x_in, int axis) {
  if (x_in.rank() == 0) return to(x_in, accumulate_dtype(x_in.dtype()));
  int a = normalize_axis(axis, x_in.rank(), "cumsum");
  ProvenanceScope ps("cumsum");
  Tensor x = to(x_in, accumulate_dtype(x_in.dtype()));
  SymInt n = x.shape()[a];
  if (n.is_const()) {
    // Hillis–Steele: after the step with shift s, y[i] holds the sum of x[i-2s+1 .. i].
    Tensor y = x;
    for (int64_t s = 1; s < n.value(); s *= 2) {
      std::vector<std::pair<SymInt, SymInt>> pads(x.rank(), {0, 0});
      pads[a] = {s, 0};
      y = y + pad(narrow(y, a, 0, n.value() - s), pads);
    }
    return y;
  }
  // symbolic length: out[i] = sum_j x[j] * (j <= i) over a broadcast [.., n(i), n(j), ..]
  Tensor xj = unsqueeze(x, a);  // [.., 1, n, ..]
  Shape s = xj.shape();
  s[a] = n;
  Tensor i(prim::index(DType::I64, s, a)), j(prim::index(DType::I64, s, a + 1));
  Tensor masked = where(le(j, i), expand(xj, s), zeros({}, x.dtype()));
  return squeeze(reduce_prim(ReduceOp::Add, masked, {a + 1}, true), {a + 1});
}

}  // namespace lathe
