// tensor.cpp — the Tensor value, sources, casting, broadcasting + promotion, arithmetic
// operators, comparisons, logic and where.
#include <algorithm>
#include <cmath>

#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

// ---- Tensor ------------------------------------------------------------------------------

static NodeRef must(NodeRef n) {
  LATHE_CHECK(n != nullptr, "use of an undefined Tensor (default-constructed)");
  return n;
}
DType Tensor::dtype() const { return must(n_)->dtype; }
const Shape& Tensor::shape() const { return must(n_)->shape; }
int Tensor::rank() const { return static_cast<int>(must(n_)->shape.size()); }
SymInt Tensor::dim(int axis) const { return shape()[normalize_axis(axis, rank(), "dim")]; }
std::string Tensor::describe() const {
  if (!n_) return "<undefined>";
  return std::string(dtype_name(n_->dtype)) + shape_to_string(n_->shape);
}

int normalize_axis(int axis, int rank, const char* op) {
  if (axis < -rank || axis >= rank) {
    if (rank == 0) fail(op, "axis " + std::to_string(axis) + " given for a rank-0 tensor (it has no axes)");
    fail(op, "axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank) +
                 " (expected " + std::to_string(-rank) + " .. " + std::to_string(rank - 1) + ")");
  }
  return axis < 0 ? axis + rank : axis;
}

Axes normalize_axes(const Axes& axes, int rank, const char* op) {
  Axes r;
  if (rank == 0) {  // a scalar accepts axis 0 / -1 (as PyTorch) and has nothing to reduce
    for (int a : axes)
      if (a != 0 && a != -1) fail(op, "axis " + std::to_string(a) + " is out of range for a rank-0 tensor");
    return r;
  }
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) r.push_back(i);
    return r;
  }
  for (int a : axes) r.push_back(normalize_axis(a, rank, op));
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end()) fail(op, "an axis is repeated in the axis list");
  return r;
}

namespace detail {
Tensor drop_axes(const Tensor& x, const Axes& axes) {
  if (axes.empty()) return x;
  Shape s;
  for (int d = 0; d < x.rank(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) s.push_back(x.shape()[d]);
  return reshape(x, s);
}
}  // namespace detail

// ---- sources -------------------------------------------------------------------------------

Tensor input(const std::string& name, const Shape& shape, DType dtype) {
  if (name.empty()) fail("input", "an input needs a non-empty name");
  return Tensor(prim::input(name, dtype, shape));
}

static Tensor const_of(Scalar v, DType dt, const Shape& shape) {
  if (is_float(dt)) return Tensor(prim::constant(v.f, dt, shape));
  if (dt == DType::Bool) return Tensor(prim::constant_int(v.is_float ? v.f != 0 : v.i != 0, dt, shape));
  return Tensor(v.is_float ? prim::constant(v.f, dt, shape) : prim::constant_int(v.i, dt, shape));
}

Tensor full(const Shape& shape, Scalar value, DType dtype) { return const_of(value, dtype, shape); }
Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1, dtype); }
Tensor full_like(const Tensor& x, Scalar value) { return full(x.shape(), value, x.dtype()); }
Tensor zeros_like(const Tensor& x) { return full_like(x, 0); }
Tensor ones_like(const Tensor& x) { return full_like(x, 1); }
Tensor scalar(Scalar value, DType dtype) { return full({}, value, dtype); }
Tensor from_host(const HostTensor& t) {
  if (!t.defined()) fail("tensor", "the host tensor is empty (undefined)");
  return Tensor(prim::constant_tensor(t));
}

Tensor arange(double start, double stop, double step, DType dtype) {
  ProvenanceScope ps("arange");
  if (step == 0) fail("arange", "step must be non-zero");
  double n = std::ceil((stop - start) / step);
  if (!(n >= 0)) n = 0;
  if (n > 1e12) fail("arange", "too many elements (" + std::to_string(n) + ")");
  auto count = static_cast<int64_t>(n);
  Shape s{count};
  bool integral = start == std::floor(start) && step == std::floor(step);
  if (!is_float(dtype) && !integral) fail("arange", "integer dtype needs integer start and step");
  DType idt = is_float(dtype) ? dtype : DType::I64;
  Tensor i(prim::index(idt, s, 0));
  if (step != 1) i = i * (is_float(dtype) ? Scalar(step) : Scalar(static_cast<int64_t>(step)));
  if (start != 0) i = i + (is_float(dtype) ? Scalar(start) : Scalar(static_cast<int64_t>(start)));
  return to(i, dtype);
}

Tensor arange(int64_t n, DType dtype) { return arange(0.0, static_cast<double>(n), 1.0, dtype); }

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype) {
  ProvenanceScope ps("eye");
  if (n < 0 || m.value_or(0) < 0) fail("eye", "sizes must be non-negative");
  Shape s{n, m.value_or(n)};
  Tensor r(prim::index(DType::I64, s, 0)), c(prim::index(DType::I64, s, 1));
  return to(eq(r, c), dtype);
}

// ---- casting -------------------------------------------------------------------------------

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  if (dtype == DType::Bool) {
    ProvenanceScope ps("to_bool");
    return ne(x, 0);
  }
  return Tensor(prim::cast(x.node(), dtype));
}

// ---- broadcasting and promotion ------------------------------------------------------------

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    SymInt da = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
    SymInt db = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
    if (da == db || db == SymInt(1)) r[i] = da;
    else if (da == SymInt(1)) r[i] = db;
    else
      fail(op, "cannot broadcast shapes " + shape_to_string(a) + " and " + shape_to_string(b) + ": dim " +
                   std::to_string(static_cast<int>(i) - static_cast<int>(n)) + " is " + da.to_string() + " vs " +
                   db.to_string() + " (expected equal sizes or 1)");
  }
  return r;
}

std::pair<Tensor, Tensor> broadcast_promote(const Tensor& a, const Tensor& b, const char* op) {
  if (!a.defined() || !b.defined()) fail(op, "an operand is an undefined tensor");
  Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  DType dt = promote(a.dtype(), b.dtype());
  return {broadcast_to(to(a, dt), s), broadcast_to(to(b, dt), s)};
}

Tensor scalar_like(const Tensor& x, Scalar s) {
  return const_of(s, promote_with_scalar(x.dtype(), s.is_float), x.shape());
}

// Promotes x for a scalar operand and returns (x', constant).
static std::pair<Tensor, Tensor> with_scalar(const Tensor& x, Scalar s) {
  DType dt = promote_with_scalar(x.dtype(), s.is_float);
  return {to(x, dt), const_of(s, dt, x.shape())};
}

// ---- arithmetic ----------------------------------------------------------------------------

static Tensor add_prim(const Tensor& a, const Tensor& b) {
  return detail::binary(a.dtype() == DType::Bool ? Op::Or : Op::Add, a, b);
}
static Tensor mul_prim(const Tensor& a, const Tensor& b) {
  return detail::binary(a.dtype() == DType::Bool ? Op::And : Op::Mul, a, b);
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "add");
  return add_prim(x, y);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "mul");
  return mul_prim(x, y);
}
Tensor operator-(const Tensor& a) {
  if (a.dtype() == DType::Bool) fail("neg", "negation of a bool tensor " + a.describe() + " (use logical_not)");
  return detail::unary(Op::Neg, a);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "sub");
  if (x.dtype() == DType::Bool) fail("sub", "subtraction of bool tensors " + a.describe() + " and " + b.describe());
  ProvenanceScope ps("sub");
  return detail::binary(Op::Add, x, -y);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "div");
  ProvenanceScope ps("div");
  x = detail::as_float(x);
  y = detail::as_float(y);
  return detail::binary(Op::Mul, x, detail::unary(Op::Recip, y));
}

Tensor operator+(const Tensor& a, Scalar b) {
  auto [x, c] = with_scalar(a, b);
  return add_prim(x, c);
}
Tensor operator*(const Tensor& a, Scalar b) {
  auto [x, c] = with_scalar(a, b);
  return mul_prim(x, c);
}
Tensor operator-(const Tensor& a, Scalar b) {
  Scalar nb = b.is_float ? Scalar(-b.f) : Scalar(-b.i);
  if (a.dtype() == DType::Bool && !b.is_float) return to(a, DType::I64) + nb;
  return a + nb;
}
Tensor operator/(const Tensor& a, Scalar b) {
  ProvenanceScope ps("div");
  Tensor x = detail::as_float(a);
  return x * (1.0 / (b.is_float ? b.f : static_cast<double>(b.i)));
}
Tensor operator+(Scalar a, const Tensor& b) { return b + a; }
Tensor operator*(Scalar a, const Tensor& b) { return b * a; }
Tensor operator-(Scalar a, const Tensor& b) {
  ProvenanceScope ps("sub");
  auto [x, c] = with_scalar(b, a);
  if (x.dtype() == DType::Bool) x = to(x, DType::I64), c = to(c, DType::I64);
  return detail::binary(Op::Add, c, -x);
}
Tensor operator/(Scalar a, const Tensor& b) {
  ProvenanceScope ps("div");
  Tensor r = detail::unary(Op::Recip, detail::as_float(b));
  double v = a.is_float ? a.f : static_cast<double>(a.i);
  return v == 1.0 ? r : r * v;
}

// ---- comparisons and logic ---------------------------------------------------------------

Tensor lt(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "lt");
  return detail::binary(Op::CmpLT, x, y);
}
Tensor gt(const Tensor& a, const Tensor& b) { return lt(b, a); }
Tensor ne(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_promote(a, b, "ne");
  return detail::binary(Op::CmpNE, x, y);
}
Tensor eq(const Tensor& a, const Tensor& b) { return Tensor(prim::unary(Op::Not, ne(a, b).node())); }
// a <= b as (a < b) or (a == b), so that NaN compares false like IEEE.
Tensor le(const Tensor& a, const Tensor& b) {
  ProvenanceScope ps("le");
  return Tensor(prim::binary(Op::Or, lt(a, b).node(), eq(a, b).node()));
}
Tensor ge(const Tensor& a, const Tensor& b) { return le(b, a); }

Tensor lt(const Tensor& a, Scalar b) { auto [x, c] = with_scalar(a, b); return lt(x, c); }
Tensor le(const Tensor& a, Scalar b) { auto [x, c] = with_scalar(a, b); return le(x, c); }
Tensor gt(const Tensor& a, Scalar b) { auto [x, c] = with_scalar(a, b); return gt(x, c); }
Tensor ge(const Tensor& a, Scalar b) { auto [x, c] = with_scalar(a, b); return ge(x, c); }
Tensor eq(const Tensor& a, Scalar b) { auto [x, c] = with_scalar(a, b); return eq(x, c); }
Tensor ne(const Tensor& a, Scalar b) {
  if (a.dtype() == DType::Bool && !b.is_float) return b.i == 0 ? a : logical_not(a);
  auto [x, c] = with_scalar(a, b);
  return ne(x, c);
}

static Tensor logical(Op op, const Tensor& a, const Tensor& b, const char* name) {
  Tensor x = to(a, DType::Bool), y = to(b, DType::Bool);
  Shape s = broadcast_shapes(x.shape(), y.shape(), name);
  return detail::binary(op, broadcast_to(x, s), broadcast_to(y, s));
}
Tensor logical_and(const Tensor& a, const Tensor& b) { return logical(Op::And, a, b, "logical_and"); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return logical(Op::Or, a, b, "logical_or"); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return logical(Op::Xor, a, b, "logical_xor"); }
Tensor logical_not(const Tensor& a) { return detail::unary(Op::Not, to(a, DType::Bool)); }

Tensor isnan(const Tensor& x) {
  if (!is_float(x.dtype())) return zeros(x.shape(), DType::Bool);
  return detail::binary(Op::CmpNE, x, x);
}
Tensor isinf(const Tensor& x) {
  if (!is_float(x.dtype())) return zeros(x.shape(), DType::Bool);
  ProvenanceScope ps("isinf");
  return logical_or(eq(x, INFINITY), eq(x, -INFINITY));
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  if (!c.defined() || !a.defined() || !b.defined()) fail("where", "an operand is an undefined tensor");
  Tensor cb = to(c, DType::Bool);
  Shape s = broadcast_shapes(broadcast_shapes(cb.shape(), a.shape(), "where"), b.shape(), "where");
  DType dt = promote(a.dtype(), b.dtype());
  return Tensor(prim::where(broadcast_to(cb, s).node(), broadcast_to(to(a, dt), s).node(),
                            broadcast_to(to(b, dt), s).node()));
}
Tensor where(const Tensor& c, const Tensor& a, Scalar b) { return where(c, a, full({}, b, promote_with_scalar(a.dtype(), b.is_float))); }
Tensor where(const Tensor& c, Scalar a, const Tensor& b) { return where(c, full({}, a, promote_with_scalar(b.dtype(), a.is_float)), b); }

}  // namespace lathe
