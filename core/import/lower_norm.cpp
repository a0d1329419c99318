// lower_norm.cpp — ONNX Softmax LogSoftmax Hardmax BatchNormalization
// InstanceNormalization LayerNormalization MeanVarianceNormalization LpNormalization.
//
// ONNX specifics: before opset 13, Softmax/LogSoftmax/Hardmax flatten the input to 2-D at
// `axis` ([prod(dims < axis), prod(dims >= axis)]) and normalize each row; from 13 they act
// on one axis (default -1). BatchNormalization with training_mode=1 normalizes with the
// batch statistics and returns the momentum-updated running ones; opset < 7 `spatial=0` parameters cover
// [C, spatial…]. LayerNormalization computes in stash_type (f32) and can return Mean and
// InvStdDev.
#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

void need_float(const NodeCtx& c, const Tensor& x) {
  if (!is_float(x.dtype())) c.unsupported(c.op_type() + " of a " + std::string(dtype_name(x.dtype())) + " tensor");
}

// Applies f along one axis, with the pre-13 "flatten to 2-D" semantics.
Tensor along_axis(const NodeCtx& c, const Tensor& x, Tensor (*f)(const Tensor&, int)) {
  if (c.opset() >= 13) return f(x, c.axis(c.attr_int("axis", -1), std::max(x.rank(), 1)));
  if (x.rank() == 0) return f(x, 0);
  int64_t a = c.attr_int("axis", 1);
  if (a < 0) a += x.rank();
  if (a < 0 || a > x.rank()) c.fail("axis " + std::to_string(c.attr_int("axis", 1)) + " is out of range");
  SymInt outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < a) outer = outer * x.shape()[d];
    else inner = inner * x.shape()[d];
  }
  return reshape(f(reshape(x, {outer, inner}), 1), x.shape());
}

Tensor hardmax(const Tensor& x, int axis) {
  Tensor idx = argmax(x, axis, true);
  Tensor pos(prim::index(DType::I64, x.shape(), axis));
  return to(eq(pos, idx), x.dtype());
}

// [C] (or [C, spatial…]) parameters aligned with dim 1 of x.
Tensor channel_param(const NodeCtx& c, const Tensor& x, const Tensor& p) {
  Shape s = p.shape();
  while (static_cast<int>(s.size()) < x.rank() - 1) s.push_back(1);
  if (static_cast<int>(s.size()) != x.rank() - 1) c.fail("parameter " + p.describe() + " does not match input " + x.describe());
  return to(reshape(p, s), x.dtype());
}

void batch_norm_op(NodeCtx& c) {
  Tensor x = c.in(0);
  need_float(c, x);
  if (x.rank() < 2) c.fail("input must be [N, C, …], got " + x.describe());
  double eps = c.attr_float("epsilon", 1e-5);
  if (c.attr_int("training_mode", 0)) {
    // batch statistics (population variance) normalize; the running statistics update
    // with momentum: running = input · momentum + current · (1 - momentum)
    c.only_outputs(3);
    double mom = c.attr_float("momentum", 0.9);
    Axes red{0};
    for (int d = 2; d < x.rank(); ++d) red.push_back(d);
    Tensor m = mean(x, red, true);
    Tensor v = mean(square(x - m), red, true);
    Tensor scale = channel_param(c, x, c.in(1)), bias = channel_param(c, x, c.in(2));
    c.set(0, to((x - m) * rsqrt(v + eps) * scale + bias, x.dtype()));
    Tensor rm = c.in(3), rv = c.in(4);
    Shape cs{x.shape()[1]};
    if (c.wants(1)) c.set(1, to(rm * mom + reshape(m, cs) * (1 - mom), rm.dtype()));
    if (c.wants(2)) c.set(2, to(rv * mom + reshape(v, cs) * (1 - mom), rv.dtype()));
    return;
  }
  c.only_outputs(1);
  Tensor scale = channel_param(c, x, c.in(1)), bias = channel_param(c, x, c.in(2));
  Tensor mean_ = channel_param(c, x, c.in(3)), var_ = channel_param(c, x, c.in(4));
  Tensor k = scale * rsqrt(var_ + eps);
  c.set(0, (x - mean_) * k + bias);
}

void instance_norm_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  need_float(c, x);
  if (x.rank() < 3) c.fail("input must be [N, C, spatial…], got " + x.describe());
  double eps = c.attr_float("epsilon", 1e-5);
  Axes red;
  for (int d = 2; d < x.rank(); ++d) red.push_back(d);
  Tensor m = mean(x, red, true);
  Tensor d = x - m;
  Tensor v = mean(d * d, red, true);
  c.set(0, d * rsqrt(v + eps) * channel_param(c, x, c.in(1)) + channel_param(c, x, c.in(2)));
}

void layer_norm_op(NodeCtx& c) {
  Tensor x = c.in(0);
  need_float(c, x);
  int ax = c.axis(c.attr_int("axis", -1), x.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  int64_t stash = c.attr_int("stash_type", 1);
  DType sd = stash == 1 ? DType::F32 : x.dtype();
  Axes red;
  for (int d = ax; d < x.rank(); ++d) red.push_back(d);
  Tensor xs = to(x, sd);
  Tensor m = mean(xs, red, true);
  Tensor d = xs - m;
  Tensor inv = rsqrt(mean(d * d, red, true) + eps);
  Tensor y = d * inv * to(c.in(1), sd);
  if (auto b = c.opt_in(2)) y = y + to(*b, sd);
  c.set(0, to(y, x.dtype()));
  if (c.wants(1)) c.set(1, m);
  if (c.wants(2)) c.set(2, inv);
}

void mvn_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  need_float(c, x);
  std::vector<int64_t> axes = c.attr_ints("axes", {0, 2, 3});
  Axes red;
  for (int64_t a : axes) red.push_back(c.axis(a, x.rank()));
  Tensor m = mean(x, red, true);
  Tensor d = x - m;
  Tensor v = mean(d * d, red, true);
  c.set(0, d / (sqrt(v) + 1e-9));
}

void lp_norm_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  need_float(c, x);
  int ax = c.axis(c.attr_int("axis", -1), x.rank());
  int64_t p = c.attr_int("p", 2);
  Tensor n;
  if (p == 1) n = sum(abs(x), {ax}, true);
  else if (p == 2) n = sqrt(sum(x * x, {ax}, true));
  else c.fail("p must be 1 or 2, got " + std::to_string(p));
  c.set(0, x / n);
}

}  // namespace

void add_norm_ops(OpTable& t) {
  t["Softmax"] = [](NodeCtx& c) {
    c.only_outputs(1);
    need_float(c, c.in(0));
    c.set(0, along_axis(c, c.in(0), [](const Tensor& x, int a) { return softmax(x, a); }));
  };
  t["LogSoftmax"] = [](NodeCtx& c) {
    c.only_outputs(1);
    need_float(c, c.in(0));
    c.set(0, along_axis(c, c.in(0), [](const Tensor& x, int a) { return log_softmax(x, a); }));
  };
  t["Hardmax"] = [](NodeCtx& c) {
    c.only_outputs(1);
    need_float(c, c.in(0));
    c.set(0, along_axis(c, c.in(0), hardmax));
  };
  t["BatchNormalization"] = batch_norm_op;
  t["InstanceNormalization"] = instance_norm_op;
  t["LayerNormalization"] = layer_norm_op;
  t["MeanVarianceNormalization"] = mvn_op;
  t["LpNormalization"] = lp_norm_op;
}

}  // namespace lathe::onnx_import
