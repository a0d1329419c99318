// eval_elementwise.cpp — the interpreter's elementwise kernels: unary ops, Cast, binary
// ops, comparisons and Where. Operands are dense and of equal shape (primitive ops do not
// broadcast), so every kernel is one flat typed loop; the op is chosen outside the loop.
#include <cmath>

#include "core/interp/kernels.h"

namespace lathe::interp {

namespace {

// out[i] = fn(load(x[i])), for an output of the same dtype.
template <class T, class Fn>
void map_unary(const HostTensor& x, HostTensor& out, Fn fn) {
  const auto* xs = x.ptr<typename T::S>();
  auto* os = out.ptr<typename T::S>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) os[i] = T::store(fn(T::load(xs[i])));
}

// out[i] = fn(load(a[i]), load(b[i])), stored as TOut (T itself or Bool for comparisons).
template <class T, class TOut, class Fn>
void map_binary(const HostTensor& a, const HostTensor& b, HostTensor& out, Fn fn) {
  const auto* as = a.ptr<typename T::S>();
  const auto* bs = b.ptr<typename T::S>();
  auto* os = out.ptr<typename TOut::S>();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) os[i] = TOut::store(fn(T::load(as[i]), T::load(bs[i])));
}

// The result buffer: `reuse` when it fits, else a fresh tensor.
HostTensor result(DType dt, const std::vector<int64_t>& shape, const HostTensor* reuse) {
  if (reuse && reuse->dtype() == dt && reuse->shape() == shape) return *reuse;
  return HostTensor(dt, shape);
}

}  // namespace

HostTensor kernel_unary(Op op, const HostTensor& x, const HostTensor* reuse) {
  HostTensor out = result(x.dtype(), x.shape(), reuse);
  visit_dtype(x.dtype(), [&](auto tr) {
    using T = decltype(tr);
    using C = typename T::C;
    switch (op) {
      case Op::Neg: map_unary<T>(x, out, [](C a) { return op_neg(a); }); return;
      case Op::Not: map_unary<T>(x, out, [](C a) { return op_not(a); }); return;
      default: break;
    }
    if constexpr (kIsFloat<C>) {
      // Float math in C itself: float overloads for f32/f16/bf16, double for f64.
      switch (op) {
        case Op::Recip: map_unary<T>(x, out, [](C a) { return C(1) / a; }); return;
        case Op::Sin: map_unary<T>(x, out, [](C a) { return std::sin(a); }); return;
        case Op::Exp2: map_unary<T>(x, out, [](C a) { return std::exp2(a); }); return;
        case Op::Log2: map_unary<T>(x, out, [](C a) { return std::log2(a); }); return;
        case Op::Sqrt: map_unary<T>(x, out, [](C a) { return std::sqrt(a); }); return;
        default: break;
      }
    }
    throw UserError(std::string(op_name(op)) + " does not accept dtype " + std::string(dtype_name(x.dtype())));
  });
  return out;
}

HostTensor kernel_cast(const HostTensor& x, DType to, const HostTensor* reuse) {
  if (x.dtype() == to) return x.clone();
  HostTensor out = result(to, x.shape(), reuse);
  visit_dtype(x.dtype(), [&](auto src) {
    visit_dtype(to, [&](auto dst) {
      using Src = decltype(src);
      using Dst = decltype(dst);
      const auto* xs = x.ptr<typename Src::S>();
      auto* os = out.ptr<typename Dst::S>();
      for (int64_t i = 0, n = x.numel(); i < n; ++i) os[i] = convert<Src, Dst>(xs[i]);
    });
  });
  return out;
}

HostTensor kernel_binary(Op op, const HostTensor& a, const HostTensor& b, const HostTensor* reuse) {
  LATHE_CHECK(a.dtype() == b.dtype() && a.shape() == b.shape(), "kernel_binary: operands must match");
  bool compare = op == Op::CmpLT || op == Op::CmpNE;
  HostTensor out = result(compare ? DType::Bool : a.dtype(), a.shape(), reuse);
  visit_dtype(a.dtype(), [&](auto tr) {
    using T = decltype(tr);
    using C = typename T::C;
    using B = Traits<DType::Bool>;
    switch (op) {
      case Op::Add: map_binary<T, T>(a, b, out, [](C x, C y) { return op_add(x, y); }); return;
      case Op::Mul: map_binary<T, T>(a, b, out, [](C x, C y) { return op_mul(x, y); }); return;
      case Op::Mod: map_binary<T, T>(a, b, out, [](C x, C y) { return op_mod(x, y); }); return;
      case Op::Max: map_binary<T, T>(a, b, out, [](C x, C y) { return op_max(x, y); }); return;
      case Op::CmpLT: map_binary<T, B>(a, b, out, [](C x, C y) { return x < y; }); return;
      case Op::CmpNE: map_binary<T, B>(a, b, out, [](C x, C y) { return x != y; }); return;
      default: break;
    }
    if constexpr (!kIsFloat<C>) {
      switch (op) {
        case Op::IDiv:
          if constexpr (kIsInt<C>) { map_binary<T, T>(a, b, out, [](C x, C y) { return op_idiv(x, y); }); return; }
          break;
        case Op::And: map_binary<T, T>(a, b, out, [](C x, C y) { return op_and(x, y); }); return;
        case Op::Or: map_binary<T, T>(a, b, out, [](C x, C y) { return op_or(x, y); }); return;
        case Op::Xor: map_binary<T, T>(a, b, out, [](C x, C y) { return op_xor(x, y); }); return;
        default: break;
      }
    }
    throw UserError(std::string(op_name(op)) + " does not accept dtype " + std::string(dtype_name(a.dtype())));
  });
  return out;
}

HostTensor kernel_where(const HostTensor& c, const HostTensor& a, const HostTensor& b, const HostTensor* reuse) {
  LATHE_CHECK(c.dtype() == DType::Bool && a.dtype() == b.dtype(), "kernel_where: bool condition, equal branches");
  HostTensor out = result(a.dtype(), a.shape(), reuse);
  const auto* cs = c.ptr<uint8_t>();
  // Where only selects, so it copies raw elements of the branch's width.
  auto select = [&](auto tag) {
    using S = decltype(tag);
    const S* as = a.ptr<S>();
    const S* bs = b.ptr<S>();
    S* os = out.ptr<S>();
    for (int64_t i = 0, n = a.numel(); i < n; ++i) os[i] = cs[i] ? as[i] : bs[i];
  };
  switch (dtype_size(a.dtype())) {
    case 1: select(uint8_t{}); break;
    case 2: select(uint16_t{}); break;
    case 4: select(uint32_t{}); break;
    default: select(uint64_t{}); break;
  }
  return out;
}

}  // namespace lathe::interp
