// lower_loss.cpp — ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12+).
//
// loss[n, d…] = -input[n, target[n, d…], d…] · weight[target] (0 where target ==
// ignore_index); reduction none / sum / mean, where mean divides by the summed weights of
// the targets that count (ONNX's definition, not the element count).
// SoftmaxCrossEntropyLoss is the same on log_softmax(scores, axis 1) and can also return
// those log-probabilities.
#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

Tensor nll(const NodeCtx& c, const Tensor& logp, const Tensor& target, const std::optional<Tensor>& weight) {
  if (logp.rank() < 2) c.fail("input must be [N, C, …], got " + logp.describe());
  if (target.rank() != logp.rank() - 1) c.fail("target " + target.describe() + " must be [N, …] for input " + logp.describe());
  if (!is_int(target.dtype())) c.fail("target must be an integer tensor, got " + target.describe());
  std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") c.fail("unknown reduction '" + reduction + "'");
  Tensor t = to(target, DType::I64);
  Tensor keep = ones(t.shape(), DType::Bool);
  if (c.has_attr("ignore_index")) {
    keep = ne(t, Scalar(c.attr_int("ignore_index", 0)));
    t = where(keep, t, zeros({}, DType::I64));  // ignored targets read class 0, weighted 0
  }
  Tensor picked = squeeze(gather(logp, 1, unsqueeze(t, 1)), {1});
  Tensor w = to(keep, logp.dtype());
  if (weight) {
    if (weight->rank() != 1) c.fail("weight must be [C], got " + weight->describe());
    w = w * reshape(index_select(*weight, 0, reshape(t, {-1})), t.shape());
  }
  Tensor loss = -(picked * w);
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  return sum(loss) / sum(w);
}

void nll_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (!is_float(x.dtype())) c.unsupported(c.op_type() + " of " + x.describe());
  c.set(0, to(nll(c, x, c.in(1), c.opt_in(2)), x.dtype()));
}

void sce_op(NodeCtx& c) {
  c.only_outputs(2);
  Tensor x = c.in(0);
  if (!is_float(x.dtype())) c.unsupported(c.op_type() + " of " + x.describe());
  if (x.rank() < 2) c.fail("scores must be [N, C, …], got " + x.describe());
  Tensor logp = log_softmax(x, 1);
  c.set(0, to(nll(c, logp, c.in(1), c.opt_in(2)), x.dtype()));
  if (c.wants(1)) c.set(1, logp);
}

}  // namespace

void add_loss_ops(OpTable& t) {
  t["NegativeLogLikelihoodLoss"] = nll_op;
  t["SoftmaxCrossEntropyLoss"] = sce_op;
}

}  // namespace lathe::onnx_import
