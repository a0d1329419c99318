// kernels.h — internal to core/interp: per-dtype element traits, dtype dispatch, the exact
// scalar semantics of every op (README.md writes them down), and the typed tensor kernels
// the interpreter's eval_node dispatches to. Not a public header: other layers use interp.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/ir/diag.h"
#include "core/ir/node.h"
#include "core/ir/view.h"
#include "core/runtime/host_tensor.h"

namespace lathe::interp {

// ---------------------------------------------------------------------------------------
// Element traits: how a dtype is stored (S) and in which C++ type its ops compute (C).
// f16/bf16 are stored as bit patterns and computed in float, rounded back to nearest even.
// ---------------------------------------------------------------------------------------
template <DType D, class Storage, class Compute>
struct TraitsBase {
  static constexpr DType dtype = D;
  using S = Storage;
  using C = Compute;
};

template <DType D> struct Traits;
template <> struct Traits<DType::Bool> : TraitsBase<DType::Bool, uint8_t, bool> {
  static bool load(uint8_t v) { return v != 0; }
  static uint8_t store(bool v) { return v ? 1 : 0; }
};
#define LATHE_PLAIN_TRAITS(D, T)                   \
  template <> struct Traits<D> : TraitsBase<D, T, T> { \
    static T load(T v) { return v; }               \
    static T store(T v) { return v; }              \
  };
LATHE_PLAIN_TRAITS(DType::U8, uint8_t)
LATHE_PLAIN_TRAITS(DType::I8, int8_t)
LATHE_PLAIN_TRAITS(DType::I16, int16_t)
LATHE_PLAIN_TRAITS(DType::I32, int32_t)
LATHE_PLAIN_TRAITS(DType::I64, int64_t)
LATHE_PLAIN_TRAITS(DType::U16, uint16_t)
LATHE_PLAIN_TRAITS(DType::U32, uint32_t)
LATHE_PLAIN_TRAITS(DType::U64, uint64_t)
LATHE_PLAIN_TRAITS(DType::F32, float)
LATHE_PLAIN_TRAITS(DType::F64, double)
#undef LATHE_PLAIN_TRAITS
template <> struct Traits<DType::F16> : TraitsBase<DType::F16, uint16_t, float> {
  static float load(uint16_t v) { return f16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_f16(v); }
};
template <> struct Traits<DType::BF16> : TraitsBase<DType::BF16, uint16_t, float> {
  static float load(uint16_t v) { return bf16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_bf16(v); }
};

// Calls f(Traits<dt>{}) for the runtime dtype dt.
template <class F>
decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::Bool: return f(Traits<DType::Bool>{});
    case DType::U8: return f(Traits<DType::U8>{});
    case DType::I8: return f(Traits<DType::I8>{});
    case DType::I16: return f(Traits<DType::I16>{});
    case DType::I32: return f(Traits<DType::I32>{});
    case DType::I64: return f(Traits<DType::I64>{});
    case DType::F16: return f(Traits<DType::F16>{});
    case DType::BF16: return f(Traits<DType::BF16>{});
    case DType::F32: return f(Traits<DType::F32>{});
    case DType::F64: return f(Traits<DType::F64>{});
    case DType::U16: return f(Traits<DType::U16>{});
    case DType::U32: return f(Traits<DType::U32>{});
    case DType::U64: return f(Traits<DType::U64>{});
  }
  throw InternalError("visit_dtype: unknown dtype");
}

template <class C> constexpr bool kIsFloat = std::is_floating_point_v<C>;
template <class C> constexpr bool kIsBool = std::is_same_v<C, bool>;
template <class C> constexpr bool kIsInt = std::is_integral_v<C> && !kIsBool<C>;

// ---------------------------------------------------------------------------------------
// Conversions. A double is narrowed to f16/bf16 through a float rounded to odd, which makes
// the final round-to-nearest-even exact (no double rounding).
// ---------------------------------------------------------------------------------------
inline float f64_to_f32_round_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (bits & 1u) return f;  // already odd
  return std::nextafter(f, static_cast<double>(f) < d ? std::numeric_limits<float>::infinity()
                                                        : -std::numeric_limits<float>::infinity());
}

// The stored form of a double value in dtype T (floats round to nearest even; integers
// truncate toward zero and saturate, NaN -> 0; bool is v != 0, so NaN -> true).
template <class T>
typename T::S store_f64(double v) {
  using C = typename T::C;
  if constexpr (kIsBool<C>) return T::store(v != 0 || std::isnan(v));
  else if constexpr (kIsInt<C>) return static_cast<typename T::S>(float_to_int_saturating(v, T::dtype));
  else if constexpr (std::is_same_v<C, double>) return v;
  else if constexpr (T::dtype == DType::F32) return static_cast<float>(v);
  else return T::store(f64_to_f32_round_odd(v));
}

// The stored form of an int64 value in dtype T (integers wrap; floats round to nearest).
template <class T>
typename T::S store_i64(int64_t v) {
  using C = typename T::C;
  if constexpr (kIsBool<C>) return T::store(v != 0);
  else if constexpr (kIsInt<C>) return static_cast<typename T::S>(v);  // modular (C++20)
  else if constexpr (std::is_same_v<C, double>) return static_cast<double>(v);
  else if constexpr (T::dtype == DType::F32) return static_cast<float>(v);
  else return store_f64<T>(static_cast<double>(v));
}

// Converts one element of Src's storage to Dst's storage exactly as Cast does.
template <class Src, class Dst>
typename Dst::S convert(typename Src::S s) {
  using SC = typename Src::C;
  SC v = Src::load(s);
  if constexpr (kIsFloat<SC>) return store_f64<Dst>(static_cast<double>(v));
  else if constexpr (kIsBool<SC>) return store_i64<Dst>(v ? 1 : 0);
  else if constexpr (std::is_same_v<SC, uint64_t> && !kIsInt<typename Dst::C> && !kIsBool<typename Dst::C>)
    return store_f64<Dst>(static_cast<double>(v));  // u64 above 2^63 stays positive
  else return store_i64<Dst>(static_cast<int64_t>(v));
}

// ---------------------------------------------------------------------------------------
// Scalar semantics of the arithmetic ops, in the compute type C.
// Integers wrap (computed in uint64 and narrowed modularly); floats compute in C.
// ---------------------------------------------------------------------------------------
template <class C> C wrap_from_u64(uint64_t v) { return static_cast<C>(v); }

template <class C> C op_neg(C a) {
  if constexpr (kIsInt<C>) return wrap_from_u64<C>(0 - static_cast<uint64_t>(a));
  else if constexpr (kIsBool<C>) return a;
  else return -a;
}
template <class C> C op_add(C a, C b) {
  if constexpr (kIsBool<C>) return a || b;
  else if constexpr (kIsInt<C>) return wrap_from_u64<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <class C> C op_mul(C a, C b) {
  if constexpr (kIsBool<C>) return a && b;
  else if constexpr (kIsInt<C>) return wrap_from_u64<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}
template <class C> C op_idiv(C a, C b) {
  if constexpr (kIsFloat<C>) return a / b;  // not reachable: IDiv is integer-only
  else if constexpr (kIsBool<C>) return b ? a : false;
  else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) if (b == -1) return op_neg(a);  // MIN / -1 wraps to MIN
    return static_cast<C>(a / b);
  }
}
template <class C> C op_mod(C a, C b) {
  if constexpr (kIsFloat<C>) return std::fmod(a, b);
  else if constexpr (kIsBool<C>) return false;
  else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) if (b == -1) return 0;
    return static_cast<C>(a % b);
  }
}
template <class C> C op_max(C a, C b) {
  if constexpr (kIsFloat<C>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  }
  return b > a ? b : a;
}
template <class C> C op_and(C a, C b) {
  if constexpr (kIsBool<C>) return a && b;
  else if constexpr (kIsInt<C>) return static_cast<C>(a & b);
  else return 0;
}
template <class C> C op_or(C a, C b) {
  if constexpr (kIsBool<C>) return a || b;
  else if constexpr (kIsInt<C>) return static_cast<C>(a | b);
  else return 0;
}
template <class C> C op_xor(C a, C b) {
  if constexpr (kIsBool<C>) return a != b;
  else if constexpr (kIsInt<C>) return static_cast<C>(a ^ b);
  else return 0;
}
template <class C> C op_not(C a) {
  if constexpr (kIsBool<C>) return !a;
  else if constexpr (kIsInt<C>) return static_cast<C>(~a);
  else return 0;
}

// ---------------------------------------------------------------------------------------
// Tensor kernels (implemented in eval_*.cpp). Inputs are dense row-major tensors; shapes
// were checked by the caller. Each returns a fresh tensor, except that the elementwise
// kernels write into `reuse` when it is given (an input that is dead after this node,
// whose dtype and shape equal the result's): the interpreter's answer to page-faulting
// a fresh buffer per node on large graphs. Elementwise reads and writes the same index,
// so the aliasing is safe.
// ---------------------------------------------------------------------------------------
HostTensor kernel_unary(Op op, const HostTensor& x, const HostTensor* reuse = nullptr);  // eval_elementwise.cpp
HostTensor kernel_cast(const HostTensor& x, DType to, const HostTensor* reuse = nullptr);
HostTensor kernel_binary(Op op, const HostTensor& a, const HostTensor& b, const HostTensor* reuse = nullptr);
HostTensor kernel_where(const HostTensor& c, const HostTensor& a, const HostTensor& b,
                        const HostTensor* reuse = nullptr);
HostTensor kernel_const(NodeRef n, const std::vector<int64_t>& shape);      // eval_data.cpp
HostTensor kernel_index(DType dt, const std::vector<int64_t>& shape, int axis);
HostTensor kernel_view(const HostTensor& x, const ConcreteView& v);
HostTensor kernel_take(const HostTensor& x, const HostTensor& idx, int axis);
HostTensor kernel_reduce(const HostTensor& x, ReduceOp op, const std::vector<int>& axes);  // eval_reduce.cpp
// A dense tensor read through strides over some index space (a mask-free View of it, or
// the tensor itself with contiguous strides).
struct StridedOperand {
  HostTensor base;
  std::vector<int64_t> strides;  // per dim of the index space
  int64_t offset = 0;
};
// Reduce(op, Mul(a, b)) over `axes` of the index space `shape`, without materializing the
// product or the views: exactly the values the unfused nodes give (each product is
// rounded to the dtype before it is accumulated). eval_contract.cpp.
HostTensor kernel_reduce_mul(ReduceOp op, DType dt, const std::vector<int64_t>& shape, const std::vector<int>& axes,
                             const StridedOperand& a, const StridedOperand& b);
// UserError when a view reads outside an input of n elements (eval_data.cpp).
void check_view_bounds(const ConcreteView& v, int64_t n);
HostTensor kernel_sgemm(const HostTensor& a, const HostTensor& b, const std::vector<int64_t>& ints);
// Extern "gemv_q4" (backends/library.h): in = X [M, K] f32, packed W u8, scales f32; ints {M, N, K, block}.
HostTensor kernel_gemv_q4(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints);
// Extern "attention" (core/ir/attention_op.h): in = Q, K, V [, mask]; ints = {causal, scale bits}.
HostTensor kernel_attention(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints);
// Extern "attention_bwd": in = Q, K, V [, mask], OS, dO; ints = {causal, scale bits, part}.
HostTensor kernel_attention_bwd(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints);
// Extern "rnn" (core/ir/rnn_op.h): one direction of a recurrent layer over all its steps. eval_rnn.cpp.
HostTensor kernel_rnn(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints);

}  // namespace lathe::interp
