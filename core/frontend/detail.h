// detail.h — small helpers shared by the frontend's .cpp files (not part of the API).
#pragma once
#include <string>

#include "core/frontend/tensor.h"
#include "core/ir/diag.h"

namespace lathe::detail {

// Throws UserError "op: message".
[[noreturn]] inline void fail(const std::string& op, const std::string& msg) { throw UserError(op + ": " + msg); }

// Casts integer and bool tensors to f32 (float ops); floats unchanged.
inline Tensor as_float(const Tensor& x) { return to(x, to_float(x.dtype())); }

// A constant of x's dtype and shape.
inline Tensor const_like(const Tensor& x, double v) {
  return Tensor(is_float(x.dtype()) ? prim::constant(v, x.dtype(), x.shape())
                                    : prim::constant_int(static_cast<int64_t>(v), x.dtype(), x.shape()));
}

inline Tensor unary(Op op, const Tensor& x) { return Tensor(prim::unary(op, x.node())); }
// Primitive binary op on operands already broadcast and promoted.
inline Tensor binary(Op op, const Tensor& a, const Tensor& b) { return Tensor(prim::binary(op, a.node(), b.node())); }

// Constant value of a dim (UserError naming the op when it is symbolic).
inline int64_t const_dim(const SymInt& d, const std::string& op, const std::string& what) {
  if (!d.is_const()) fail(op, what + " must be a constant, got symbolic " + d.to_string());
  return d.value();
}

// Removes the (sorted) axes, which must have size 1.
Tensor drop_axes(const Tensor& x, const Axes& axes);

}  // namespace lathe::detail
