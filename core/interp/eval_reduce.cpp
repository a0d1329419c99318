// eval_reduce.cpp — the interpreter's Reduce (add / max / mul over axes, reduced axes kept
// as size 1), its fused form Reduce(Mul(a, b)) that reads views in place (matmul and conv
// as the frontend writes them: expand, multiply, sum), and the Extern library kernels (sgemm as a plain triple loop: it is the
// oracle that the BLAS path is checked against).
//
// Accumulators (README.md): float sums and products accumulate in double in row-major
// input order and are rounded once; integer sums and products wrap (accumulated in uint64,
// narrowed at the end, which equals wrapping at every step); max is exact in any type.
#include <algorithm>
#include <string>

#include "core/interp/gemv_q4_act.h"
#include "core/interp/kernels.h"

namespace lathe::interp {

namespace {

template <class T>
struct Accum {
  using C = typename T::C;
  // double for floats, uint64 (wrapping) for integer add/mul, uint8 0/1 for bool.
  using A = std::conditional_t<kIsFloat<C>, double, std::conditional_t<kIsBool<C>, uint8_t, uint64_t>>;

  static A identity(ReduceOp op) {
    switch (op) {
      case ReduceOp::Add: return A(0);
      case ReduceOp::Mul: return A(1);
      case ReduceOp::Max:
        if constexpr (kIsFloat<C>) return -std::numeric_limits<double>::infinity();
        else if constexpr (kIsBool<C>) return A(0);
        else return static_cast<A>(static_cast<int64_t>(std::numeric_limits<C>::lowest()));
    }
    return A(0);
  }
  static A lift(C v) {
    if constexpr (kIsInt<C>) return static_cast<A>(static_cast<int64_t>(v));
    else return static_cast<A>(v);
  }
  static A combine(ReduceOp op, A acc, A v) {
    switch (op) {
      case ReduceOp::Add:
        if constexpr (kIsBool<C>) return A(acc || v);
        else return acc + v;
      case ReduceOp::Mul:
        if constexpr (kIsBool<C>) return A(acc && v);
        else return acc * v;
      case ReduceOp::Max:
        if constexpr (kIsFloat<C>) return (std::isnan(acc) || std::isnan(v)) ? std::numeric_limits<double>::quiet_NaN()
                                                                              : std::max(acc, v);
        else if constexpr (kIsBool<C>) return A(acc || v);
        else return static_cast<C>(v) > static_cast<C>(acc) ? v : acc;  // compared in C: unsigned stays unsigned
    }
    return acc;
  }
  static typename T::S finish(A a) {
    if constexpr (kIsFloat<C>) return store_f64<T>(a);
    else if constexpr (kIsBool<C>) return T::store(a != 0);
    else return static_cast<typename T::S>(a);  // modular narrowing = wrapping
  }
};

template <class T>
void reduce_typed(const HostTensor& x, HostTensor& out, ReduceOp op, const std::vector<bool>& reduced) {
  using Acc = Accum<T>;
  using A = typename Acc::A;
  const auto& shape = x.shape();
  size_t rank = shape.size();
  std::vector<A> acc(static_cast<size_t>(out.numel()), Acc::identity(op));
  if (x.numel() > 0) {
    // Walk the input row-major; the accumulator offset moves by the output's contiguous
    // stride on kept dims and stays put on reduced dims.
    std::vector<int64_t> ostride(rank, 0);
    for (int64_t d = static_cast<int64_t>(rank) - 1, s = 1; d >= 0; --d) {
      if (!reduced[d]) ostride[d] = s;
      s *= reduced[d] ? 1 : shape[d];
    }
    const auto* xs = x.ptr<typename T::S>();
    int64_t n = rank ? shape[rank - 1] : 1;
    int64_t rows = x.numel() / n;
    bool inner_reduced = rank && reduced[rank - 1];
    std::vector<int64_t> idx(rank ? rank - 1 : 0, 0);
    int64_t obase = 0;
    for (int64_t r = 0; r < rows; ++r, xs += n) {
      if (inner_reduced) {
        A a = acc[obase];
        for (int64_t j = 0; j < n; ++j) a = Acc::combine(op, a, Acc::lift(T::load(xs[j])));
        acc[obase] = a;
      } else {
        A* o = acc.data() + obase;
        for (int64_t j = 0; j < n; ++j) o[j] = Acc::combine(op, o[j], Acc::lift(T::load(xs[j])));
      }
      for (size_t d = idx.size(); d-- > 0;) {  // odometer step over the outer dims
        obase += ostride[d];
        if (++idx[d] < shape[d]) break;
        obase -= ostride[d] * shape[d];
        idx[d] = 0;
      }
    }
  }
  auto* os = out.ptr<typename T::S>();
  for (size_t i = 0; i < acc.size(); ++i) os[i] = Acc::finish(acc[i]);
}

// Reduce over the products a·b read through strides (see kernel_reduce_mul in kernels.h).
template <class T>
void reduce_mul_typed(const std::vector<int64_t>& shape, const std::vector<bool>& reduced, ReduceOp op,
                      const StridedOperand& a, const StridedOperand& b, HostTensor& out) {
  using Acc = Accum<T>;
  using A = typename Acc::A;
  using C = typename T::C;
  size_t rank = shape.size();
  std::vector<A> acc(static_cast<size_t>(out.numel()), Acc::identity(op));
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total > 0) {
    std::vector<int64_t> ostride(rank, 0);
    for (int64_t d = static_cast<int64_t>(rank) - 1, s = 1; d >= 0; --d) {
      if (!reduced[d]) ostride[d] = s;
      s *= reduced[d] ? 1 : shape[d];
    }
    const auto* as = a.base.ptr<typename T::S>();
    const auto* bs = b.base.ptr<typename T::S>();
    int64_t n = rank ? shape[rank - 1] : 1;
    int64_t sa = rank ? a.strides[rank - 1] : 0, sb = rank ? b.strides[rank - 1] : 0;
    int64_t rows = total / n;
    bool inner_reduced = rank && reduced[rank - 1];
    // The product is rounded to the dtype (T::store), as the unfused Mul node would be.
    auto product = [](typename T::S x, typename T::S y) { return T::load(T::store(op_mul<C>(T::load(x), T::load(y)))); };
    std::vector<int64_t> idx(rank ? rank - 1 : 0, 0);
    int64_t obase = 0, abase = a.offset, bbase = b.offset;
    for (int64_t r = 0; r < rows; ++r) {
      const auto* pa = as + abase;
      const auto* pb = bs + bbase;
      if (inner_reduced) {
        A v = acc[obase];
        for (int64_t j = 0; j < n; ++j) v = Acc::combine(op, v, Acc::lift(product(pa[j * sa], pb[j * sb])));
        acc[obase] = v;
      } else {
        A* o = acc.data() + obase;
        for (int64_t j = 0; j < n; ++j) o[j] = Acc::combine(op, o[j], Acc::lift(product(pa[j * sa], pb[j * sb])));
      }
      for (size_t d = idx.size(); d-- > 0;) {  // odometer step over the outer dims
        obase += ostride[d];
        abase += a.strides[d];
        bbase += b.strides[d];
        if (++idx[d] < shape[d]) break;
        obase -= ostride[d] * shape[d];
        abase -= a.strides[d] * shape[d];
        bbase -= b.strides[d] * shape[d];
        idx[d] = 0;
      }
    }
  }
  auto* os = out.ptr<typename T::S>();
  for (size_t i = 0; i < acc.size(); ++i) os[i] = Acc::finish(acc[i]);
}

}  // namespace

HostTensor kernel_reduce_mul(ReduceOp op, DType dt, const std::vector<int64_t>& shape, const std::vector<int>& axes,
                             const StridedOperand& a, const StridedOperand& b) {
  LATHE_CHECK(a.base.dtype() == dt && b.base.dtype() == dt, "kernel_reduce_mul: operand dtypes must match");
  LATHE_CHECK(a.strides.size() == shape.size() && b.strides.size() == shape.size(),
              "kernel_reduce_mul: one stride per dim of the index space");
  std::vector<int64_t> out_shape = shape;
  std::vector<bool> reduced(shape.size(), false);
  for (int ax : axes) {
    reduced[ax] = true;
    out_shape[ax] = 1;
  }
  HostTensor out(dt, out_shape);
  visit_dtype(dt, [&](auto tr) { reduce_mul_typed<decltype(tr)>(shape, reduced, op, a, b, out); });
  return out;
}

HostTensor kernel_reduce(const HostTensor& x, ReduceOp op, const std::vector<int>& axes) {
  std::vector<int64_t> out_shape = x.shape();
  std::vector<bool> reduced(x.rank(), false);
  for (int ax : axes) {
    LATHE_CHECK(ax >= 0 && ax < static_cast<int>(x.rank()), "kernel_reduce: axis out of range");
    reduced[ax] = true;
    out_shape[ax] = 1;
  }
  HostTensor out(x.dtype(), out_shape);
  visit_dtype(x.dtype(), [&](auto tr) { reduce_typed<decltype(tr)>(x, out, op, reduced); });
  return out;
}

HostTensor kernel_sgemm(const HostTensor& a, const HostTensor& b, const std::vector<int64_t>& ints) {
  // C[M,N] = op(A)[M,K] · op(B)[K,N]; op(A) = A read as [M,K], or as [K,M] transposed.
  int64_t M = ints.at(0), N = ints.at(1), K = ints.at(2);
  bool ta = ints.at(3) != 0, tb = ints.at(4) != 0;
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32 || a.numel() != M * K || b.numel() != K * N)
    throw UserError("Extern sgemm: operands must be f32 with M*K and K*N elements (M=" + std::to_string(M) +
                    ", N=" + std::to_string(N) + ", K=" + std::to_string(K) + "), got " + a.shape_string() +
                    " and " + b.shape_string());
  HostTensor out(DType::F32, {M, N});
  const float* A = a.ptr<float>();
  const float* B = b.ptr<float>();
  float* C = out.ptr<float>();
  std::vector<double> row(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      double aik = ta ? A[k * M + i] : A[i * K + k];
      if (tb) for (int64_t j = 0; j < N; ++j) row[j] += aik * B[j * K + k];
      else    for (int64_t j = 0; j < N; ++j) row[j] += aik * B[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = static_cast<float>(row[j]);
  }
  return out;
}

// Extern "gemv_q4": Y[M, N] = X[M, K] · W^T with W [N, K] stored in blocks of B weights
// along K, each B/2 bytes (byte j: low nibble = weight j, high nibble = weight j + B/2,
// the value nibble - 8) and one f32 scale d; X's rows quantized per block to int16 with
// scales s (gemv_q4_act.h): y = sum over blocks of d · s · sum (w - 8) · q, the inner sum
// exact in integers.
HostTensor kernel_gemv_q4(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints) {
  int64_t M = ints.at(0), N = ints.at(1), K = ints.at(2), B = ints.at(3);
  if (B <= 0 || B % 2 != 0 || K % B != 0)
    throw UserError("Extern gemv_q4: the block " + std::to_string(B) + " must be even and divide K=" + std::to_string(K));
  int64_t nb = K / B;
  if (in.size() != 3 || in[0].numel() != M * K || in[1].numel() != N * K / 2 || in[2].numel() != N * nb ||
      in[1].dtype() != DType::U8)
    throw UserError("Extern gemv_q4: operands do not match M=" + std::to_string(M) + ", N=" + std::to_string(N) +
                    ", K=" + std::to_string(K) + ", block=" + std::to_string(B));
  HostTensor out(DType::F32, {M, N});
  const float* X = in[0].ptr<float>();
  const uint8_t* W = in[1].ptr<uint8_t>();
  const float* S = in[2].ptr<float>();
  float* Y = out.ptr<float>();
  std::vector<int16_t> xq(static_cast<size_t>(K));
  std::vector<float> xs(static_cast<size_t>(nb));
  for (int64_t m = 0; m < M; ++m) {
    gemv_q4_quantize_row(X + m * K, K, B, xq.data(), xs.data());
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* w = W + n * (K / 2) + b * (B / 2);
        const int16_t* q = xq.data() + b * B;
        int64_t s = 0;
        for (int64_t j = 0; j < B / 2; ++j) s += int64_t((w[j] & 15) - 8) * q[j] + int64_t((w[j] >> 4) - 8) * q[j + B / 2];
        acc += static_cast<double>(s) * xs[b] * S[n * nb + b];
      }
      Y[m * N + n] = static_cast<float>(acc);
    }
  }
  return out;
}

}  // namespace lathe::interp
