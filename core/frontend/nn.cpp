// nn.cpp — softmax / log_softmax, normalization layers (layer, RMS, batch, group, instance),
// dropout and losses, as composites of reductions and elementwise ops.
#include "core/frontend/nn.h"
#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

Tensor softmax(const Tensor& x_in, int axis) {
  ProvenanceScope ps("softmax");
  Tensor x = detail::as_float(x_in);
  if (x.rank() == 0) return ones_like(x);
  int a = normalize_axis(axis, x.rank(), "softmax");
  Tensor e = exp(x - max(x, {a}, true));
  return e / sum(e, {a}, true);
}

Tensor log_softmax(const Tensor& x_in, int axis) {
  ProvenanceScope ps("log_softmax");
  Tensor x = detail::as_float(x_in);
  if (x.rank() == 0) return zeros_like(x);
  int a = normalize_axis(axis, x.rank(), "log_softmax");
  Tensor shifted = x - max(x, {a}, true);
  return shifted - log(sum(exp(shifted), {a}, true));
}

static Axes last_axes(const Tensor& x, int n, const char* op) {
  if (n <= 0 || n > x.rank())
    fail(op, "normalized dims " + std::to_string(n) + " must be between 1 and the rank of " + x.describe());
  Axes a;
  for (int i = x.rank() - n; i < x.rank(); ++i) a.push_back(i);
  return a;
}

static void check_affine(const std::optional<Tensor>& p, const Shape& want, const char* op, const char* what,
                         const Tensor& x) {
  if (p && p->shape() != want)
    fail(op, std::string(what) + " " + p->describe() + " must have shape " + shape_to_string(want) + " (for input " +
                 x.describe() + ")");
}

Tensor layer_norm(const Tensor& x_in, int normalized_dims, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  ProvenanceScope ps("layer_norm");
  Tensor x = detail::as_float(x_in);
  Axes ax = last_axes(x, normalized_dims, "layer_norm");
  Shape norm_shape(x.shape().end() - normalized_dims, x.shape().end());
  check_affine(weight, norm_shape, "layer_norm", "weight", x_in);
  check_affine(bias, norm_shape, "layer_norm", "bias", x_in);
  Tensor m = mean(x, ax, true);
  Tensor d = x - m;
  Tensor v = mean(d * d, ax, true);
  Tensor y = d * rsqrt(v + eps);
  if (weight) y = y * *weight;
  if (bias) y = y + *bias;
  return y;
}

Tensor rms_norm(const Tensor& x_in, int normalized_dims, const std::optional<Tensor>& weight, double eps) {
  ProvenanceScope ps("rms_norm");
  Tensor x = detail::as_float(x_in);
  Axes ax = last_axes(x, normalized_dims, "rms_norm");
  check_affine(weight, Shape(x.shape().end() - normalized_dims, x.shape().end()), "rms_norm", "weight", x_in);
  Tensor y = x * rsqrt(mean(x * x, ax, true) + eps);
  return weight ? y * *weight : y;
}

// [C] -> [C, 1, .., 1] so that it broadcasts against [N, C, spatial..].
static Tensor per_channel(const Tensor& p, const Tensor& x, const char* op, const char* what) {
  if (p.rank() != 1 || p.dim(0) != x.dim(1))
    fail(op, std::string(what) + " " + p.describe() + " must be [" + x.dim(1).to_string() + "] (channels of " +
                 x.describe() + ")");
  Shape s{p.dim(0)};
  for (int i = 2; i < x.rank(); ++i) s.push_back(1);
  return reshape(p, s);
}

Tensor batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
  if (x_in.rank() < 2) fail("batch_norm", "input must be [N, C, ...], got " + x_in.describe());
  ProvenanceScope ps("batch_norm");
  Tensor x = detail::as_float(x_in);
  Tensor y = (x - per_channel(running_mean, x, "batch_norm", "running_mean")) *
             rsqrt(per_channel(running_var, x, "batch_norm", "running_var") + eps);
  if (weight) y = y * per_channel(*weight, x, "batch_norm", "weight");
  if (bias) y = y + per_channel(*bias, x, "batch_norm", "bias");
  return y;
}

Tensor group_norm(const Tensor& x_in, int64_t groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (x_in.rank() < 2) fail("group_norm", "input must be [N, C, ...], got " + x_in.describe());
  ProvenanceScope ps("group_norm");
  Tensor x = detail::as_float(x_in);
  int64_t C = detail::const_dim(x.dim(1), "group_norm", "channel count");
  if (groups <= 0 || C % groups)
    fail("group_norm", "channels " + std::to_string(C) + " of " + x_in.describe() + " are not divisible by groups=" +
                           std::to_string(groups));
  Shape g{x.dim(0), groups, -1};
  Tensor xg = reshape(x, g);
  Tensor m = mean(xg, {2}, true);
  Tensor d = xg - m;
  Tensor v = mean(d * d, {2}, true);
  Tensor y = reshape(d * rsqrt(v + eps), x.shape());
  if (weight) y = y * per_channel(*weight, x, "group_norm", "weight");
  if (bias) y = y + per_channel(*bias, x, "group_norm", "bias");
  return y;
}

Tensor instance_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                     double eps) {
  if (x.rank() < 3) fail("instance_norm", "input must be [N, C, spatial...], got " + x.describe());
  ProvenanceScope ps("instance_norm");
  int64_t C = detail::const_dim(x.dim(1), "instance_norm", "channel count");
  return group_norm(x, C, weight, bias, eps);
}

Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed) {
  if (p < 0 || p > 1) fail("dropout", "probability must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0) return x;
  ProvenanceScope ps("dropout");
  Tensor xf = detail::as_float(x);
  if (p == 1) return zeros_like(xf);
  Tensor keep = ge(rand(xf.shape(), seed, xf.dtype()), p);
  return where(keep, xf * (1.0 / (1.0 - p)), zeros({}, xf.dtype()));
}

// ---- losses ----------------------------------------------------------------------------------

// Class-index targets [N, d..] against [N, C, d..] log-probabilities: -mean(logp[n, t_n]).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target) {
  if (!is_int(target.dtype())) fail("nll_loss", "target must hold integer class indices, got " + target.describe());
  if (log_probs.rank() < 2 || target.rank() != log_probs.rank() - 1 || target.dim(0) != log_probs.dim(0))
    fail("nll_loss", "expects input [N, C, ...] and target [N, ...], got " + log_probs.describe() + " and " +
                         target.describe());
  for (int d = 1; d < target.rank(); ++d)
    if (target.dim(d) != log_probs.dim(d + 1))
      fail("nll_loss", "target " + target.describe() + " does not match input " + log_probs.describe() + " in dim " +
                           std::to_string(d));
  ProvenanceScope ps("nll_loss");
  int64_t C = detail::const_dim(log_probs.dim(1), "nll_loss", "class count");
  Tensor oh = one_hot(target, C, DType::Bool);  // [N, d.., C]
  std::vector<int> perm{0, target.rank()};
  for (int d = 1; d < target.rank(); ++d) perm.push_back(d);
  Tensor mask = permute(oh, perm);  // [N, C, d..]
  Tensor picked = sum(where(mask, log_probs, zeros({}, log_probs.dtype())), {1});
  return -mean(picked);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  if (logits.rank() < 1) fail("cross_entropy", "logits must be [N, C, ...] or [C], got " + logits.describe());
  ProvenanceScope ps("cross_entropy");
  if (logits.rank() == 1) return cross_entropy(unsqueeze(logits, 0), unsqueeze(target, 0));
  Tensor logp = log_softmax(logits, 1);
  if (is_float(target.dtype())) {
    if (target.shape() != logits.shape())
      fail("cross_entropy", "probability targets " + target.describe() + " must have the logits' shape " +
                                logits.describe());
    Tensor per = -sum(logp * target, {1});
    return mean(per);
  }
  return nll_loss(logp, target);
}

Tensor mse_loss(const Tensor& a, const Tensor& b) {
  ProvenanceScope ps("mse_loss");
  Tensor d = detail::as_float(a) - detail::as_float(b);
  return mean(d * d);
}

Tensor l1_loss(const Tensor& a, const Tensor& b) {
  ProvenanceScope ps("l1_loss");
  return mean(abs(detail::as_float(a) - detail::as_float(b)));
}

// max(x, 0) - x*t + log(1 + exp(-|x|)), the stable form.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target) {
  ProvenanceScope ps("binary_cross_entropy_with_logits");
  Tensor x = detail::as_float(logits), t = detail::as_float(target);
  return mean(relu(x) - x * t + log1p(exp(-abs(x))));
}

}  // namespace lathe
