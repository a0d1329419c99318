// demo_graph.cpp — the demo MLP, written with primitives the way the frontend would emit
// them (broadcasts are Views, matmul is expand-multiply-reduce, exp is Exp2 of x·log2 e).
#include "views/demo_graph.h"

#include <string>

#include "core/ir/build.h"
#include "core/ir/diag.h"

namespace lathe::views {
namespace {

NodeRef reshape(NodeRef x, const Shape& s) {
  auto v = view_reshape(ViewSpec::contiguous(x->shape), s);
  LATHE_CHECK(v.has_value(), "demo: reshape of a contiguous tensor must not need a copy");
  return prim::view(x, *v);
}

NodeRef expand(NodeRef x, const Shape& s) {
  return prim::view(x, view_expand(ViewSpec::contiguous(x->shape), s));
}

NodeRef matmul(NodeRef a, NodeRef b) {
  ProvenanceScope scope("matmul");
  SymInt m = a->shape[0], k = a->shape[1], n = b->shape[1];
  NodeRef a3 = expand(reshape(a, {m, k, 1}), {m, k, n});
  NodeRef b3 = expand(reshape(b, {1, k, n}), {m, k, n});
  NodeRef r = prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, a3, b3), {1});
  return reshape(r, {m, n});
}

NodeRef linear(NodeRef x, int in, int out, const std::string& tag) {
  ProvenanceScope scope("linear");
  NodeRef w = prim::input("w" + tag, DType::F32, {in, out});
  NodeRef b = prim::input("b" + tag, DType::F32, {out});
  NodeRef y = matmul(x, w);
  return prim::binary(Op::Add, y, expand(reshape(b, {1, out}), y->shape));
}

NodeRef relu(NodeRef x) {
  ProvenanceScope scope("relu");
  return prim::binary(Op::Max, x, prim::constant(0.0, x->dtype, x->shape));
}

NodeRef softmax_rows(NodeRef x) {
  ProvenanceScope scope("softmax");
  NodeRef mx = expand(prim::reduce(ReduceOp::Max, x, {1}), x->shape);
  NodeRef shifted = prim::binary(Op::Add, x, prim::unary(Op::Neg, mx));
  NodeRef e = prim::unary(Op::Exp2, prim::binary(Op::Mul, shifted, prim::constant(1.4426950408889634, x->dtype, x->shape)));
  NodeRef sum = expand(prim::reduce(ReduceOp::Add, e, {1}), x->shape);
  return prim::binary(Op::Mul, e, prim::unary(Op::Recip, sum));
}

}  // namespace

Graph make_demo_mlp(int layers) {
  if (layers < 0) layers = 0;
  const int batch = 32, in = 784, hidden = 128, classes = 10;
  NodeRef x = prim::input("x", DType::F32, {batch, in});
  NodeRef h = x;
  int width = in;
  for (int i = 0; i < layers; ++i) {
    ProvenanceScope scope("layer" + std::to_string(i));
    h = relu(linear(h, width, hidden, std::to_string(i)));
    width = hidden;
  }
  NodeRef logits;
  {
    ProvenanceScope scope("head");
    logits = linear(h, width, classes, "_out");
  }
  NodeRef probs = softmax_rows(logits);
  return Graph::from_outputs({{"probs", probs}});
}

}  // namespace lathe::views
