// linalg.cpp — matmul (broadcast batched, PyTorch's 1-D rules), bmm, linear, outer, dot.
//
// C[.., m, n] = sum_k A[.., m, k] * B[.., k, n] is emitted as
//   A viewed [.., M, 1, K] and B^T viewed [.., 1, N, K], both expanded to [.., M, N, K],
//   Mul, Reduce add over the last axis, reshape to [.., M, N]
// so the reduction runs along a unit-stride axis of A; the scheduler and the BLAS rewrite
// rule recognise this shape under the provenance "matmul".
#include "core/frontend/nn.h"
#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

namespace {

// integer: the operands keep their dtypes and each is widened to i32 after the broadcast,
// so the Mul reads Cast(View(operand)) (what match_matmul takes as an int8 contraction).
Tensor matmul_impl(const Tensor& a_in, const Tensor& b_in, bool integer) {
  const char* op = integer ? "matmul_integer" : "matmul";
  if (a_in.rank() == 0 || b_in.rank() == 0)
    fail(op, "operands must have at least one dim, got " + a_in.describe() + " and " + b_in.describe());
  ProvenanceScope ps("matmul");
  Tensor a = a_in, b = b_in;
  if (integer) {
    if (!is_int(a.dtype()) || !is_int(b.dtype()))
      fail(op, "operands must be integer tensors, got " + a_in.describe() + " and " + b_in.describe());
  } else {
    DType dt = promote(a_in.dtype(), b_in.dtype());
    if (dt == DType::Bool) fail("matmul", "bool operands " + a_in.describe() + " and " + b_in.describe() + " (cast them first)");
    a = to(a_in, dt), b = to(b_in, dt);
  }
  bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  if (a_vec) a = unsqueeze(a, 0);   // [1, K]
  if (b_vec) b = unsqueeze(b, -1);  // [K, 1]
  SymInt M = a.dim(-2), K = a.dim(-1), Kb = b.dim(-2), N = b.dim(-1);
  if (K != Kb)
    fail(op, "inner dims differ: " + a_in.describe() + " x " + b_in.describe() + " (" + K.to_string() + " vs " +
                       Kb.to_string() + "; expected A[.., M, K] x B[.., K, N])");
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ab, bb, "matmul (batch dims)");
  Shape full = batch;
  full.insert(full.end(), {M, N, K});
  Tensor av = expand(unsqueeze(a, -2), full);                   // [.., M, 1, K] -> [.., M, N, K]
  Tensor bv = expand(unsqueeze(transpose(b, -1, -2), -3), full);  // [.., 1, N, K] -> [.., M, N, K]
  Tensor prod = integer ? to(av, DType::I32) * to(bv, DType::I32) : av * bv;
  int k_axis = static_cast<int>(full.size()) - 1;
  Tensor c(prim::reduce(ReduceOp::Add, prod.node(), {k_axis}));
  Shape out = batch;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  return reshape(c, out);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, false); }
Tensor matmul_integer(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, true); }

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (a.rank() != 3 || b.rank() != 3 || a.dim(0) != b.dim(0))
    fail("bmm", "expects [B, M, K] x [B, K, N] with equal B, got " + a.describe() + " and " + b.describe());
  return matmul(a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (weight.rank() != 2) fail("linear", "weight must be [out_features, in_features], got " + weight.describe());
  if (x.rank() == 0 || x.dim(-1) != weight.dim(1))
    fail("linear", "input " + x.describe() + " does not end in in_features " + weight.dim(1).to_string() +
                       " of weight " + weight.describe());
  ProvenanceScope ps("linear");
  Tensor y = matmul(x, transpose(weight, 0, 1));
  if (bias) {
    if (bias->rank() != 1 || bias->dim(0) != weight.dim(0))
      fail("linear", "bias must be [" + weight.dim(0).to_string() + "], got " + bias->describe());
    y = y + *bias;
  }
  return y;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  if (a.rank() != 1 || b.rank() != 1) fail("outer", "expects two 1-D tensors, got " + a.describe() + " and " + b.describe());
  ProvenanceScope ps("outer");
  return unsqueeze(a, 1) * unsqueeze(b, 0);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  if (a.rank() != 1 || b.rank() != 1 || a.dim(0) != b.dim(0))
    fail("dot", "expects two 1-D tensors of equal length, got " + a.describe() + " and " + b.describe());
  return matmul(a, b);
}

}  // namespace lathe
