// autodiff.h — reverse-mode automatic differentiation over the primitive graph, and SGD.
//
// grad() walks the nodes between `params` and `loss` in reverse topological order and
// emits, for each primitive, the primitives of its derivative rule (autodiff.cpp,
// autodiff_view.cpp). The backward nodes land in the same graph: they carry
// Provenance.backward = true and the path "grad/<forward path>/<Op>" (e.g.
// "grad/attention/softmax/Exp2"), so views can show or hide the backward pass.
//
// Rules (g = gradient of the node's output y):
//   Add: g, g          Mul: g·b, g·a       Neg: -g          Recip: -g·y²
//   Sin: g·cos x       Exp2: g·y·ln2       Log2: g/(x·ln2)  Sqrt: g/(2y)
//   Cast: g cast back (float inputs only)   Copy: g          Assign: g to the value
//   Max: g to the larger operand; ties split half/half (so relu'(0) = 1/2)
//   Mod (floats): g to a, -g·trunc(a/b) to b
//   Where: g to the taken branch, 0 to the other
//   Reduce add: g broadcast back.  Reduce max: g shared equally among the maxima.
//   Reduce mul: g·y/x where x ≠ 0; with exactly one zero in a group, the zero gets the
//     product of the others; with two or more zeros every gradient is 0 (exact).
//   View: the adjoint view ("scatter back"): masked-out positions drop, broadcast axes
//     sum, flipped axes flip back, the rest is embedded with pads and reshapes; when
//     several output positions read one input element (pooling/conv windows), the small
//     overlapping axes are unrolled and the embedded pieces summed.
//   Take: scatter-add as a one-hot compare + Reduce add, O(index size × axis length).
//   Input, Const, Index: leaves. Integer and bool values carry no gradient.
// Extern attention: the fused backward (autodiff.cpp). Extern rnn: the gradient of its steps
// unrolled (rnn_unrolled.h). Other Extern nodes on a differentiated path raise UserError.
#pragma once
#include <optional>
#include <vector>

#include "core/frontend/tensor.h"

namespace lathe {

// d(loss)/d(param) for each param (any float node of the graph, usually an Input). A
// non-scalar loss is seeded with ones (the gradient of loss.sum()), or with `seed` (same
// shape as loss). Params that the loss does not depend on get zeros.
std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& params,
                         const std::optional<Tensor>& seed = std::nullopt);

// Assign(param, param - lr·grad): param must be a graph Input; the result is the updated
// value (include it in the graph's outputs so the update happens).
Tensor sgd_update(const Tensor& param, const Tensor& grad, double lr);
std::vector<Tensor> sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, double lr);

// The adjoint of a View: given g (shaped like the view's output) returns the gradient for
// its input of shape `input_shape` (exposed for tests and rewrite rules).
Tensor view_backward(const Tensor& g, const ViewSpec& view, const Shape& input_shape);

}  // namespace lathe
