// rnn_unrolled.h — the fused recurrence, Extern "rnn" (core/ir/rnn_op.h), written out step
// by step in Tensor operations: the definition grad() differentiates (autodiff.cpp). The
// gradient of an rnn node is the gradient of this expansion (backpropagation through time
// over T unrolled steps, each step's gates kept as the backward's intermediates), so the
// backward graph grows with T; T is limited to kRnnUnrolledMaxSteps.
#pragma once
#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/rnn_op.h"

namespace lathe {

constexpr int64_t kRnnUnrolledMaxSteps = 4096;

// The node's result [T + S, B, H] from its operands (in the order of rnn_op.h: XP (or X), RT,
// then the optional ones present per the spec, WT and xb with the projection), in the float dtype of XP (f32 for the node; f64
// for finite-difference checks). Throws UserError for more than kRnnUnrolledMaxSteps steps.
Tensor rnn_unrolled(const RnnSpec& s, const std::vector<Tensor>& in);

// The gradients of an Extern "rnn" node's operands for the output gradient g (undefined
// for lens), through rnn_unrolled.
std::vector<Tensor> rnn_backward(NodeRef n, const Tensor& g);

}  // namespace lathe
