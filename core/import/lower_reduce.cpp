// lower_reduce.cpp — ONNX reductions: ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd
// ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare, ArgMax ArgMin.
//
// ONNX specifics: axes are an attribute, except ReduceSum from opset 13 and every Reduce*
// from opset 18, where they are an optional (constant) input; empty axes mean "all axes"
// unless noop_with_empty_axes=1 (then the input passes through); keepdims defaults to 1;
// the result keeps the input's dtype (the frontend accumulates integers in i64).
#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

struct ReduceArgs {
  Axes axes;          // normalized; empty = all
  bool keepdims;
  bool noop;          // empty axes with noop_with_empty_axes: identity
};

ReduceArgs reduce_args(const NodeCtx& c, const Tensor& x) {
  bool axes_input = c.opset() >= 18 || (c.op_type() == "ReduceSum" && c.opset() >= 13);
  std::vector<int64_t> raw;
  if (axes_input) {
    if (c.has(1)) raw = c.ints_in(1);
  } else {
    raw = c.attr_ints("axes");
  }
  ReduceArgs r;
  r.keepdims = c.attr_int("keepdims", 1) != 0;
  r.noop = raw.empty() && c.attr_int("noop_with_empty_axes", 0) != 0;
  for (int64_t a : raw) r.axes.push_back(c.axis(a, std::max(x.rank(), 1)));
  std::sort(r.axes.begin(), r.axes.end());
  if (std::adjacent_find(r.axes.begin(), r.axes.end()) != r.axes.end()) c.fail("an axis is repeated in axes");
  if (x.rank() == 0) r.axes.clear();
  return r;
}

using ReduceFn = Tensor (*)(const Tensor& x, const Axes& axes, bool keepdims);

void reduce_op(OpTable& t, const char* name, ReduceFn f, bool float_only) {
  t[name] = [f, float_only](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    if (float_only && !is_float(x.dtype()))
      c.unsupported(c.op_type() + " of a " + std::string(dtype_name(x.dtype())) + " tensor");
    ReduceArgs a = reduce_args(c, x);
    if (a.noop) {
      c.set(0, x);
      return;
    }
    if (x.rank() == 0) {
      c.set(0, to(f(reshape(x, {1}), {0}, false), x.dtype()));
      return;
    }
    Tensor r = f(x, a.axes, a.keepdims);
    c.set(0, to(r, x.dtype()));
  };
}

void arg_op(OpTable& t, const char* name, bool is_max) {
  t[name] = [is_max](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    if (x.rank() == 0) c.fail("needs a tensor of rank >= 1");
    int ax = c.axis(c.attr_int("axis", 0), x.rank());
    bool keep = c.attr_int("keepdims", 1) != 0;
    bool last = c.attr_int("select_last_index", 0) != 0;
    if (!last) {
      c.set(0, is_max ? argmax(x, ax, keep) : argmin(x, ax, keep));
      return;
    }
    // the last extreme = (n-1) - the first extreme of the flipped tensor
    Tensor f = flip(x, {ax});
    Tensor i = is_max ? argmax(f, ax, keep) : argmin(f, ax, keep);
    SymInt n = x.shape()[ax];
    if (!n.is_const()) c.unsupported("select_last_index on a symbolic dim");
    c.set(0, full(i.shape(), n.value() - 1, DType::I64) - i);
  };
}

}  // namespace

void add_reduce_ops(OpTable& t) {
  reduce_op(t, "ReduceSum", [](const Tensor& x, const Axes& a, bool k) { return sum(x, a, k); }, false);
  reduce_op(t, "ReduceMean", [](const Tensor& x, const Axes& a, bool k) { return mean(x, a, k); }, false);
  reduce_op(t, "ReduceMax", [](const Tensor& x, const Axes& a, bool k) { return max(x, a, k); }, false);
  reduce_op(t, "ReduceMin", [](const Tensor& x, const Axes& a, bool k) { return min(x, a, k); }, false);
  reduce_op(t, "ReduceProd", [](const Tensor& x, const Axes& a, bool k) { return prod(x, a, k); }, false);
  reduce_op(t, "ReduceL1", [](const Tensor& x, const Axes& a, bool k) { return sum(abs(x), a, k); }, false);
  reduce_op(t, "ReduceSumSquare", [](const Tensor& x, const Axes& a, bool k) { return sum(x * x, a, k); }, false);
  reduce_op(t, "ReduceL2", [](const Tensor& x, const Axes& a, bool k) {
    Tensor xf = is_float(x.dtype()) ? x : to(x, DType::F64);
    Tensor r = sqrt(sum(xf * xf, a, k));
    return is_float(x.dtype()) ? r : round(r);
  }, false);
  reduce_op(t, "ReduceLogSum", [](const Tensor& x, const Axes& a, bool k) { return log(sum(x, a, k)); }, true);
  reduce_op(t, "ReduceLogSumExp", [](const Tensor& x, const Axes& a, bool k) { return logsumexp(x, a, k); }, true);
  arg_op(t, "ArgMax", true);
  arg_op(t, "ArgMin", false);
}

}  // namespace lathe::onnx_import
