// tensor.h — the lazy tensor frontend: a `Tensor` value over a graph node, plus the
// elementwise, reduction and shape composites users expect (PyTorch names and argument
// order where one exists). Neural-network composites (matmul, conv, pooling, norms,
// attention, losses) are in nn.h; reverse-mode autodiff in autodiff.h.
//
// Nothing here computes: each call appends hash-consed primitive nodes (core/ir/build.h)
// and returns a Tensor naming the result. Run a graph with interpret() or a backend.
//
// Conventions that hold for every function below:
//   * Axes may be negative (counted from the end). An empty `Axes` list means "all axes".
//   * Binary ops broadcast with NumPy rules (dims must be equal — symbolic dims compare as
//     expressions — or 1) and promote dtypes with core/ir/dtype.h's lattice; a C++ scalar
//     operand follows promote_with_scalar (an int keeps the tensor's category, a double
//     makes integer tensors f32).
//   * Float-only math (exp, log, sin, div …) first casts integer/bool inputs to f32.
//   * Every composite opens a ProvenanceScope with its own name, so its primitives record
//     paths such as "block0/attention/softmax". Push your own scope with
//     `ProvenanceScope s("block0");`.
//   * Bad arguments throw UserError naming the op, the operand shapes and what was expected.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/build.h"
#include "core/ir/node.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

using Axes = std::vector<int>;

// A lazy tensor: a thin, copyable value naming one graph node.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(NodeRef n) : n_(n) {}

  NodeRef node() const { return n_; }
  bool defined() const { return n_ != nullptr; }
  DType dtype() const;
  const Shape& shape() const;
  int rank() const;
  SymInt dim(int axis) const;  // negative axes count from the end
  std::string describe() const;  // "f32[4, 3]" for error messages

 private:
  NodeRef n_ = nullptr;
};

// A C++ number used as an operand. Written as an int it behaves like an integer literal
// (keeps an integer tensor's dtype), written as a double like a float literal.
struct Scalar {
  double f = 0;
  int64_t i = 0;
  bool is_float = false;
  // the integer view of a float saturates (NaN -> 0), as Cast does: never UB
  Scalar(double v) : f(v), i(float_to_int_saturating(v, DType::I64)), is_float(true) {}  // NOLINT
  Scalar(float v) : Scalar(static_cast<double>(v)) {}                     // NOLINT
  Scalar(int v) : f(v), i(v), is_float(false) {}                          // NOLINT
  Scalar(int64_t v) : f(static_cast<double>(v)), i(v), is_float(false) {} // NOLINT
  Scalar(long long v) : Scalar(static_cast<int64_t>(v)) {}                // NOLINT (where int64_t is long)
  Scalar(unsigned v) : Scalar(static_cast<int64_t>(v)) {}                 // NOLINT
  Scalar(unsigned long v) : Scalar(static_cast<int64_t>(v)) {}            // NOLINT (size_t)
};

// ---- sources ---------------------------------------------------------------------------
Tensor input(const std::string& name, const Shape& shape, DType dtype = DType::F32);
Tensor full(const Shape& shape, Scalar value, DType dtype = DType::F32);
Tensor zeros(const Shape& shape, DType dtype = DType::F32);
Tensor ones(const Shape& shape, DType dtype = DType::F32);
Tensor full_like(const Tensor& x, Scalar value);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor scalar(Scalar value, DType dtype);               // rank-0 constant
Tensor from_host(const HostTensor& t);                  // a tensor literal (Const with data)
// [start, stop) by step: ceil((stop-start)/step) elements, computed from an Index node.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::I64);
Tensor arange(int64_t n, DType dtype = DType::I64);     // 0..n-1
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::F32);
// Counter-based random numbers (same seed → same values on every backend): element k of
// the row-major flat index is hashed with the seed by a 32-bit integer mixer (Wellons'
// lowbias32, written with Mul/Xor/And/IDiv on i64); the top 24 bits give a uniform in
// [0, 1). randn uses Box–Muller on two such uniforms from independent streams.
Tensor rand(const Shape& shape, uint64_t seed, DType dtype = DType::F32);   // U[0, 1)
Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::F32);  // N(0, 1)
Tensor rand_like(const Tensor& x, uint64_t seed);
Tensor randn_like(const Tensor& x, uint64_t seed);

// ---- casting ---------------------------------------------------------------------------
// to(bool) is x != 0 (so 0.5 -> true); other casts are the Cast primitive.
Tensor to(const Tensor& x, DType dtype);
inline Tensor cast(const Tensor& x, DType dtype) { return to(x, dtype); }

// ---- arithmetic (broadcasting, promoting) ----------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);  // true division: result is float
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
inline Tensor add(const Tensor& a, const Tensor& b) { return a + b; }
inline Tensor sub(const Tensor& a, const Tensor& b) { return a - b; }
inline Tensor mul(const Tensor& a, const Tensor& b) { return a * b; }
inline Tensor div(const Tensor& a, const Tensor& b) { return a / b; }
// Turns a scalar into a tensor shaped and typed for use with x (the promoted dtype).
Tensor scalar_like(const Tensor& x, Scalar s);
// Broadcast both operands to a common shape and promote to a common dtype (for callers
// building their own primitives). `op` names the caller in error messages.
std::pair<Tensor, Tensor> broadcast_promote(const Tensor& a, const Tensor& b, const char* op);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- comparisons and logic (bool results) ----------------------------------------------
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
// Logical ops treat non-bool operands as x != 0.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
// c ? a : b, broadcasting all three; a and b are promoted to a common dtype.
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& c, const Tensor& a, Scalar b);
Tensor where(const Tensor& c, Scalar a, const Tensor& b);

// ---- elementwise math (elementwise.cpp) ------------------------------------------------
Tensor exp(const Tensor& x);        // Exp2(x * log2 e)
Tensor exp2(const Tensor& x);
Tensor log(const Tensor& x);        // Log2(x) * ln 2
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);        // sin(x + pi/2)
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);       // 2*sigmoid(2x) - 1
Tensor sigmoid(const Tensor& x);    // 1 / (1 + exp(-x))
Tensor relu(const Tensor& x);       // max(x, 0)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor selu(const Tensor& x);
// Abramowitz–Stegun 7.1.26 with the odd symmetry: |error| <= 1.5e-7.
Tensor erf(const Tensor& x);
// approximate: "none" (0.5 x (1 + erf(x/sqrt 2))) or "tanh" (GPT-2's form).
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor mish(const Tensor& x);
// Integer-valued scalar exponents (|e| <= 64) use repeated multiplication (negative:
// reciprocal), 0.5 uses Sqrt, others exp2(e*log2 x) (NaN for negative bases, as PyTorch).
Tensor pow(const Tensor& x, Scalar exponent);
// Tensor exponents: exp2(b*log2|a|), with the sign fixed for negative bases and integral
// exponents, NaN for negative bases and fractional exponents, pow(x, 0) = 1.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);       // -1, 0, 1 (NaN stays NaN)
Tensor square(const Tensor& x);
// Rounding (floats; identity on integers): t = Cast(Cast(x, i64), x.dtype) truncates,
// then Where corrects toward -inf / +inf; |x| >= 2^mantissa-bits (already integral),
// inf and NaN pass through unchanged. round() rounds half to even, like PyTorch.
Tensor trunc(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi);
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
inline Tensor clip(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) { return clamp(x, lo, hi); }
Tensor minimum(const Tensor& a, const Tensor& b);  // NaN propagates (floats)
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor hardsigmoid(const Tensor& x);  // clamp(x/6 + 1/2, 0, 1)
Tensor hardswish(const Tensor& x);    // x * hardsigmoid(x)
Tensor hardtanh(const Tensor& x, double lo = -1, double hi = 1);
Tensor fmod(const Tensor& a, const Tensor& b);          // sign of a (C fmod): the Mod primitive
Tensor remainder(const Tensor& a, const Tensor& b);     // sign of b (Python %)
inline Tensor mod(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor floor_divide(const Tensor& a, const Tensor& b);  // floor(a / b); integers stay integers

// ---- reductions (reduce.cpp). Empty axes = all axes. ------------------------------------
// sum/prod of bool and integer tensors accumulate in i64 (as PyTorch).
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor amax(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor amin(const Tensor& x, Axes axes = {}, bool keepdim = false);
// correction = 1 is the unbiased (Bessel) estimate, 0 the population variance.
Tensor var(const Tensor& x, Axes axes = {}, int correction = 1, bool keepdim = false);
Tensor std_dev(const Tensor& x, Axes axes = {}, int correction = 1, bool keepdim = false);  // torch.std
// Index (i64) of the first maximum/minimum along axis (nullopt: of the flattened tensor).
// Built from Index + Where + Reduce max: -max(where(x == max(x), -i, INT64_MIN)).
Tensor argmax(const Tensor& x, std::optional<int> axis = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int> axis = std::nullopt, bool keepdim = false);
Tensor logsumexp(const Tensor& x, Axes axes, bool keepdim = false);
Tensor any(const Tensor& x, Axes axes = {}, bool keepdim = false);
Tensor all(const Tensor& x, Axes axes = {}, bool keepdim = false);
// Inclusive prefix sum. Constant length: Hillis–Steele log-steps (ceil(log2 n) shifted
// adds, each shift a pad view). Symbolic length: a triangular mask (j <= i) expanded to
// [.., n, n] and reduced, O(n^2).
Tensor cumsum(const Tensor& x, int axis);

// ---- shape ops (shape.cpp) ---------------------------------------------------------------
// One dim may be -1 (inferred). Reshape is a View when the input's view allows it
// (view_reshape); otherwise a Copy materializes the input first.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);  // = reshape
Tensor permute(const Tensor& x, const std::vector<int>& perm);
Tensor transpose(const Tensor& x, int a, int b);
Tensor t(const Tensor& x);  // transpose of a 1-D or 2-D tensor
// New leading dims may be added; -1 keeps a dim; only size-1 dims grow.
Tensor expand(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, Axes axes = {});  // empty: all size-1 dims
Tensor unsqueeze(const Tensor& x, int axis);
Tensor flatten(const Tensor& x, int start = 0, int end = -1);
Tensor unflatten(const Tensor& x, int axis, const Shape& sizes);
// Python slicing along one axis; negative start/stop count from the end, out-of-range
// bounds clamp, step may be negative (a flipped view). Any step is one strided View.
Tensor slice(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1);
// x.narrow(axis, start, length) and x[..., i, ...] (drops the axis).
Tensor narrow(const Tensor& x, int axis, SymInt start, SymInt length);
Tensor select(const Tensor& x, int axis, int64_t index);
// One (before, after) pair per dim, from dim 0 (fewer pairs: the remaining dims unpadded).
// Negative amounts crop. A non-zero value is applied with Where over a padded bool mask.
Tensor pad(const Tensor& x, const std::vector<std::pair<SymInt, SymInt>>& pads, Scalar value = 0);
// Concatenation: each part is padded to the full length along `axis` and the parts are
// added (Or for bool), so each output element has exactly one non-zero contributor.
Tensor concat(const std::vector<Tensor>& parts, int axis = 0);
inline Tensor cat(const std::vector<Tensor>& parts, int axis = 0) { return concat(parts, axis); }
Tensor stack(const std::vector<Tensor>& parts, int axis = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis = 0);
std::vector<Tensor> split(const Tensor& x, int64_t size, int axis = 0);  // equal parts, last smaller
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int axis = 0);
Tensor flip(const Tensor& x, Axes axes);
// torch.gather / ONNX GatherElements: out[..i..] = x[..idx[..i..]..] along axis; idx has
// x's rank and no larger dims (x is cropped to idx's extent on the other axes).
Tensor gather(const Tensor& x, int axis, const Tensor& index);
inline Tensor take_along_dim(const Tensor& x, const Tensor& index, int axis) { return gather(x, axis, index); }
// torch.index_select: a 1-D index picks slices along axis (Take with an expanded index).
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
// weight [V, D], index of any shape -> index.shape + [D].
Tensor embedding(const Tensor& index, const Tensor& weight);
// index (integer) -> index.shape + [num_classes]; 1 where Index == index.
Tensor one_hot(const Tensor& index, int64_t num_classes, DType dtype = DType::I64);
Tensor tril(const Tensor& x, int64_t diagonal = 0);  // keeps j - i <= diagonal (last two dims)
Tensor triu(const Tensor& x, int64_t diagonal = 0);  // keeps j - i >= diagonal
// torch.repeat: tile x reps[d] times along each dim (extra leading reps add dims).
Tensor repeat(const Tensor& x, const std::vector<int64_t>& reps);
Tensor tile(const Tensor& x, const std::vector<int64_t>& reps);
// repeat_interleave of each element `repeats` times along axis.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int axis);
Tensor contiguous(const Tensor& x);  // Copy when x is a View, else x

// Axis helpers used across the frontend (and by importers): validate and normalize.
int normalize_axis(int axis, int rank, const char* op);
Axes normalize_axes(const Axes& axes, int rank, const char* op);  // sorted, unique; {} = all

}  // namespace lathe
