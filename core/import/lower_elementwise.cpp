// lower_elementwise.cpp — ONNX elementwise math, comparison, logic and casts:
// Add Sub Mul Div Pow Mod Neg Abs Sqrt Reciprocal Exp Log Sin Cos Tan Sinh Cosh Asinh Acosh
// Atanh Floor Ceil Round
// Sign Min Max Sum Mean Where Equal Less Greater LessOrEqual GreaterOrEqual Not And Or Xor
// Cast CastLike Identity IsNaN IsInf.
//
// ONNX-specific semantics kept here: operands must already share a dtype (no promotion);
// integer Div truncates toward zero; Mod's fmod attribute picks the sign convention;
// Pow keeps the base's dtype; opset < 7 binary ops broadcast only with broadcast=1 (and
// an optional axis aligning the second operand).
#include <cmath>

#include "core/frontend/detail.h"
#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {
namespace {

// Opset < 7: B is aligned with A starting at `axis` when broadcast=1 and axis is given.
Tensor legacy_align(const NodeCtx& c, const Tensor& a, const Tensor& b) {
  if (c.opset() >= 7 || !c.attr_int("broadcast", 0) || !c.has_attr("axis")) return b;
  int ax = c.axis(c.attr_int("axis", 0), a.rank());
  if (ax + b.rank() > a.rank()) c.fail("broadcast axis " + std::to_string(ax) + " does not fit " + b.describe());
  Shape s(ax, SymInt(1));
  s.insert(s.end(), b.shape().begin(), b.shape().end());
  while (static_cast<int>(s.size()) < a.rank()) s.push_back(1);
  return reshape(b, s);
}

using BinFn = Tensor (*)(const NodeCtx&, const Tensor&, const Tensor&);

void binary_op(OpTable& t, const char* name, BinFn f) {
  t[name] = [f](NodeCtx& c) {
    c.only_outputs(1);
    Tensor a = c.in(0), b = legacy_align(c, c.in(0), c.in(1));
    c.set(0, f(c, a, b));
  };
}

Tensor same(const NodeCtx& c, const Tensor& a, const Tensor& b) {
  require_same_dtype(c, a, b);
  return a;
}

Tensor div_op(const NodeCtx& c, const Tensor& a, const Tensor& b) {
  same(c, a, b);
  if (is_float(a.dtype())) return a / b;
  if (a.dtype() == DType::Bool) c.unsupported("Div of bool tensors");
  auto [x, y] = broadcast_promote(a, b, "Div");
  return Tensor(prim::binary(Op::IDiv, x.node(), y.node()));  // truncates toward zero
}

Tensor pow_op(const NodeCtx& c, const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::Bool || b.dtype() == DType::Bool) c.fail("Pow does not accept bool tensors");
  if (is_float(a.dtype())) return to(pow(a, to(b, a.dtype())), a.dtype());
  // integer base: compute in f64, round the (exact) result, cast back
  Tensor r = round(pow(to(a, DType::F64), to(b, DType::F64)));
  return to(r, a.dtype());
}

Tensor cmp_eq(const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return eq(a, b); }
Tensor cmp_lt(const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return lt(a, b); }
Tensor cmp_gt(const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return gt(a, b); }
Tensor cmp_le(const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return le(a, b); }
Tensor cmp_ge(const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return ge(a, b); }

Tensor logic(const NodeCtx& c, const Tensor& a, const Tensor& b, Tensor (*f)(const Tensor&, const Tensor&)) {
  if (a.dtype() != DType::Bool || b.dtype() != DType::Bool)
    c.fail("operands must be bool, got " + a.describe() + " and " + b.describe());
  return f(a, b);
}

using UnFn = Tensor (*)(const Tensor&);
void unary_op(OpTable& t, const char* name, UnFn f, bool float_only = true) {
  t[name] = [f, float_only, name](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    if (float_only && !is_float(x.dtype()))
      c.unsupported(std::string(name) + " of a " + std::string(dtype_name(x.dtype())) + " tensor");
    c.set(0, f(x));
  };
}

Tensor variadic(NodeCtx& c, Tensor (*f)(const Tensor&, const Tensor&)) {
  std::vector<Tensor> xs = c.all_inputs();
  if (xs.empty()) c.fail("needs at least one input");
  for (auto& x : xs) require_same_dtype(c, xs[0], x);
  Tensor acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) acc = f(acc, xs[i]);
  // a single operand still broadcasts to nothing: the result is that operand
  return acc;
}

Tensor add_fn(const Tensor& a, const Tensor& b) { return a + b; }

}  // namespace

void add_elementwise_ops(OpTable& t) {
  binary_op(t, "Add", [](const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return a + b; });
  binary_op(t, "Sub", [](const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return a - b; });
  binary_op(t, "Mul", [](const NodeCtx& c, const Tensor& a, const Tensor& b) { same(c, a, b); return a * b; });
  binary_op(t, "Div", div_op);
  binary_op(t, "Pow", pow_op);
  binary_op(t, "Equal", cmp_eq);
  binary_op(t, "Less", cmp_lt);
  binary_op(t, "Greater", cmp_gt);
  binary_op(t, "LessOrEqual", cmp_le);
  binary_op(t, "GreaterOrEqual", cmp_ge);
  binary_op(t, "And", [](const NodeCtx& c, const Tensor& a, const Tensor& b) { return logic(c, a, b, logical_and); });
  binary_op(t, "Or", [](const NodeCtx& c, const Tensor& a, const Tensor& b) { return logic(c, a, b, logical_or); });
  binary_op(t, "Xor", [](const NodeCtx& c, const Tensor& a, const Tensor& b) { return logic(c, a, b, logical_xor); });
  t["Mod"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor a = c.in(0), b = c.in(1);
    require_same_dtype(c, a, b);
    bool use_fmod = c.attr_int("fmod", 0) != 0;
    if (!use_fmod && is_float(a.dtype())) c.fail("Mod of floating-point tensors requires fmod=1");
    c.set(0, use_fmod ? fmod(a, b) : remainder(a, b));
  };

  unary_op(t, "Sqrt", sqrt);
  unary_op(t, "Reciprocal", reciprocal);
  unary_op(t, "Exp", exp);
  unary_op(t, "Log", log);
  unary_op(t, "Sin", sin);
  unary_op(t, "Cos", cos);
  unary_op(t, "Tan", tan);
  unary_op(t, "Sinh", [](const Tensor& x) { return (exp(x) - exp(-x)) * 0.5; });
  unary_op(t, "Cosh", [](const Tensor& x) { return (exp(x) + exp(-x)) * 0.5; });
  unary_op(t, "Asinh", [](const Tensor& x) {  // odd: sign(x) · log(|x| + sqrt(x² + 1))
    Tensor a = abs(x);
    return sign(x) * log(a + sqrt(a * a + 1.0));
  });
  unary_op(t, "Acosh", [](const Tensor& x) { return log(x + sqrt(x * x - 1.0)); });
  unary_op(t, "Atanh", [](const Tensor& x) { return log((x + 1.0) / (1.0 - x)) * 0.5; });
  unary_op(t, "Floor", floor);
  unary_op(t, "Ceil", ceil);
  unary_op(t, "Round", round);
  unary_op(t, "Abs", abs, false);
  unary_op(t, "Sign", sign, false);
  unary_op(t, "Neg", [](const Tensor& x) { return -x; }, false);
  t["Not"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    if (x.dtype() != DType::Bool) c.fail("Not needs a bool tensor, got " + x.describe());
    c.set(0, logical_not(x));
  };
  t["IsNaN"] = [](NodeCtx& c) { c.only_outputs(1); c.set(0, isnan(c.in(0))); };
  t["IsInf"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    bool neg = c.attr_int("detect_negative", 1), pos = c.attr_int("detect_positive", 1);
    Tensor inf = isinf(x);
    if (neg && pos) c.set(0, inf);
    else if (pos) c.set(0, logical_and(inf, gt(x, 0)));
    else if (neg) c.set(0, logical_and(inf, lt(x, 0)));
    else c.set(0, zeros(x.shape(), DType::Bool));
  };

  t["Max"] = [](NodeCtx& c) { c.only_outputs(1); c.set(0, variadic(c, maximum)); };
  t["Min"] = [](NodeCtx& c) { c.only_outputs(1); c.set(0, variadic(c, minimum)); };
  t["Sum"] = [](NodeCtx& c) { c.only_outputs(1); c.set(0, variadic(c, add_fn)); };
  t["Mean"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor s = variadic(c, add_fn);
    if (!is_float(s.dtype())) c.unsupported("Mean of integer tensors");
    c.set(0, s * (1.0 / static_cast<double>(c.all_inputs().size())));
  };
  t["Where"] = [](NodeCtx& c) {
    c.only_outputs(1);
    Tensor cond = c.in(0), a = c.in(1), b = c.in(2);
    if (cond.dtype() != DType::Bool) c.fail("the condition must be bool, got " + cond.describe());
    require_same_dtype(c, a, b);
    c.set(0, where(cond, a, b));
  };
  t["Identity"] = [](NodeCtx& c) {
    c.only_outputs(1);
    if (c.is_seq(0)) c.set_seq(0, c.seq_in(0));
    else if (c.is_none(0)) c.set_none(0);
    else c.set(0, c.in(0));
  };
  t["Cast"] = [](NodeCtx& c) {
    c.only_outputs(1);
    if (!c.has_attr("to")) c.fail("attribute 'to' is required");
    int64_t to_type = c.attr_int("to", 0);
    Tensor x = c.in(0);
    c.set(0, to(x, require_dtype(static_cast<int>(to_type), c.where() + " target type")));
  };
  t["CastLike"] = [](NodeCtx& c) {
    c.only_outputs(1);
    c.set(0, to(c.in(0), c.in(1).dtype()));
  };
}

}  // namespace lathe::onnx_import
