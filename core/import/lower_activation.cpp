// lower_activation.cpp — ONNX activations: Relu LeakyRelu PRelu Elu Selu Celu
// ThresholdedRelu Sigmoid HardSigmoid HardSwish Softplus Softsign Tanh Erf Gelu Shrink
// Clip. ONNX attributes (alpha, beta, gamma, lambd …) and their per-opset defaults live
// here; the math is the frontend's.
#include <cmath>
#include <limits>

#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

void need_float(const NodeCtx& c, const Tensor& x) {
  if (!is_float(x.dtype())) c.unsupported(c.op_type() + " of a " + std::string(dtype_name(x.dtype())) + " tensor");
}

// Registers an activation taking x and the node (for attributes).
void act(OpTable& t, const char* name, Tensor (*f)(const NodeCtx&, const Tensor&), bool float_only = true) {
  t[name] = [f, float_only](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    if (float_only) need_float(c, x);
    c.set(0, f(c, x));
  };
}

// Opset < 7 PRelu has a per-channel slope [C] for x [N, C, ...]; align it with dim 1.
Tensor prelu_slope(const NodeCtx& c, const Tensor& x, Tensor slope) {
  if (c.opset() < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.shape()[0] != SymInt(1) &&
      slope.shape()[0] == x.shape()[1]) {
    Shape s{slope.shape()[0]};
    for (int d = 2; d < x.rank(); ++d) s.push_back(1);
    slope = reshape(slope, s);
  }
  return slope;
}

Tensor clip(const NodeCtx& c, const Tensor& x) {
  if (c.opset() < 11) {
    double lo = c.attr_float("min", -std::numeric_limits<double>::infinity());
    double hi = c.attr_float("max", std::numeric_limits<double>::infinity());
    return clamp(x, std::isinf(lo) ? std::nullopt : std::optional<Scalar>(lo),
                 std::isinf(hi) ? std::nullopt : std::optional<Scalar>(hi));
  }
  Tensor r = x;
  if (auto lo = c.opt_in(1)) {
    require_same_dtype(c, x, *lo);
    r = maximum(r, *lo);
  }
  if (auto hi = c.opt_in(2)) {
    require_same_dtype(c, x, *hi);
    r = minimum(r, *hi);
  }
  return r;
}

}  // namespace

void add_activation_ops(OpTable& t) {
  act(t, "Relu", [](const NodeCtx&, const Tensor& x) { return relu(x); }, false);
  act(t, "LeakyRelu", [](const NodeCtx& c, const Tensor& x) { return leaky_relu(x, c.attr_float("alpha", 0.01)); });
  act(t, "Elu", [](const NodeCtx& c, const Tensor& x) { return elu(x, c.attr_float("alpha", 1.0)); });
  act(t, "Selu", [](const NodeCtx& c, const Tensor& x) {
    double alpha = c.attr_float("alpha", 1.67326319217681884765625);
    double gamma = c.attr_float("gamma", 1.05070102214813232421875);
    return where(gt(x, 0), x * gamma, (exp(x) - 1.0) * (alpha * gamma));
  });
  act(t, "Celu", [](const NodeCtx& c, const Tensor& x) {
    double alpha = c.attr_float("alpha", 1.0);
    return maximum(x, zeros_like(x)) + minimum(zeros_like(x), (exp(x * (1.0 / alpha)) - 1.0) * alpha);
  });
  act(t, "ThresholdedRelu", [](const NodeCtx& c, const Tensor& x) {
    return where(gt(x, c.attr_float("alpha", 1.0)), x, zeros_like(x));
  });
  act(t, "Sigmoid", [](const NodeCtx&, const Tensor& x) { return sigmoid(x); });
  act(t, "Tanh", [](const NodeCtx&, const Tensor& x) { return tanh(x); });
  act(t, "HardSigmoid", [](const NodeCtx& c, const Tensor& x) {
    double alpha = c.attr_float("alpha", 0.2), beta = c.attr_float("beta", 0.5);
    return clamp(x * alpha + beta, Scalar(0.0), Scalar(1.0));
  });
  act(t, "HardSwish", [](const NodeCtx&, const Tensor& x) { return x * clamp(x * (1.0 / 6) + 0.5, Scalar(0.0), Scalar(1.0)); });
  act(t, "Softplus", [](const NodeCtx&, const Tensor& x) {
    // log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): no overflow for large |x|
    return maximum(x, zeros_like(x)) + log(exp(-abs(x)) + 1.0);
  });
  act(t, "Softsign", [](const NodeCtx&, const Tensor& x) { return x / (abs(x) + 1.0); });
  act(t, "Erf", [](const NodeCtx&, const Tensor& x) { return erf(x); });
  act(t, "Gelu", [](const NodeCtx& c, const Tensor& x) {
    std::string approx = c.attr_string("approximate", "none");
    if (approx != "none" && approx != "tanh") c.fail("approximate must be 'none' or 'tanh', got '" + approx + "'");
    return gelu(x, approx);
  });
  act(t, "Shrink", [](const NodeCtx& c, const Tensor& x) {
    double bias = c.attr_float("bias", 0.0), lambd = c.attr_float("lambd", 0.5);
    Tensor xf = to(x, DType::F64);
    Tensor r = where(lt(xf, -lambd), xf + bias, where(gt(xf, lambd), xf - bias, zeros_like(xf)));
    return is_float(x.dtype()) ? to(r, x.dtype()) : to(round(r), x.dtype());
  }, false);
  act(t, "Clip", clip, false);
  t["PRelu"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0), slope = prelu_slope(c, c.in(0), c.in(1));
    require_same_dtype(c, x, slope);
    c.set(0, where(lt(x, 0), x * slope, x));
  };
}

}  // namespace lathe::onnx_import
