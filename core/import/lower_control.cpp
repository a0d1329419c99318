// lower_control.cpp — ONNX If, Loop and Scan, lowered into the one graph.
//
// If: a constant condition lowers only the branch taken; a run-time condition lowers both
// branches and selects each output with Where (the branches must then give equal shapes
// and dtypes — different shapes are a data-dependent shape, unsupported).
// Loop and Scan are unrolled: every iteration is one more instance of the body, with the
// loop-carried values threaded through. Loop needs its trip count and its condition to be
// constants at import time, iteration by iteration (a condition computed from run-time
// data is unsupported); at most kMaxIterations iterations. A negative trip count is an
// error. Scan (opset 9+) slices its scan inputs along the scan axis (a constant length),
// and stacks the per-iteration scan outputs, honouring the axes and directions attributes.
// Sequences and optionals pass through a constant-condition If and a Loop's carried values
// (NodeCtx::run_body_values), since both are unrolled at import time.
// A Loop or (opset 9+) Scan longer than kMaxIterations is unsupported here with a message
// holding kTooLongToUnroll (onnx_needs_staged): the staged executor (onnx_staged.h) runs it
// on the host, its body a program of its own.
#include "core/import/onnx_lower.h"
#include "core/import/onnx_staged.h"

namespace lathe::onnx_import {
namespace {

constexpr int64_t kMaxIterations = 4096;

// A constant bool/number input's value, or nullopt when it is known only at run time.
std::optional<double> const_scalar(const NodeCtx& c, size_t i) {
  try {
    HostTensor h = c.const_in(i);
    if (h.numel() != 1) c.fail("input " + std::to_string(i) + " must hold one value, got shape " + h.shape_string());
    return h.get_f64(0);
  } catch (const OnnxUnsupported&) {
    return std::nullopt;
  }
}

std::optional<bool> const_bool(const Tensor& t, const NodeCtx& c, const char* what) {
  if (shape_numel(t.shape()) != SymInt(1)) c.fail(std::string(what) + " must hold one value, got " + t.describe());
  std::optional<HostTensor> h = c.fold(t);
  if (!h) return std::nullopt;
  return h->get_f64(0) != 0;
}

void if_op(NodeCtx& c) {
  Tensor cond = c.in(0);
  std::optional<double> v = const_scalar(c, 0);
  if (v) {  // the branch taken; its outputs may be sequences or optionals
    std::vector<BodyValue> outs = c.run_body_values(*v != 0 ? "then_branch" : "else_branch", {});
    if (outs.size() != c.num_outputs()) c.fail("the branch returns " + std::to_string(outs.size()) + " outputs for " + std::to_string(c.num_outputs()));
    for (size_t i = 0; i < outs.size(); ++i) c.set_value(i, outs[i]);
    return;
  }
  std::vector<Tensor> outs;
  {
    auto tensors = [&](const char* branch) {
      std::vector<Tensor> r;
      for (const BodyValue& bv : c.run_body_values(branch, {})) {
        if (bv.kind != BodyValue::Kind::Tensor)
          c.unsupported("dynamic shape input not supported: If on a run-time condition whose branches give a sequence or an optional");
        r.push_back(*bv.tensor);
      }
      return r;
    };
    std::vector<Tensor> a = tensors("then_branch"), b = tensors("else_branch");
    if (a.size() != b.size()) c.fail("the branches return " + std::to_string(a.size()) + " and " + std::to_string(b.size()) + " outputs");
    Tensor cb = reshape(to(cond, DType::Bool), {});
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype())
        c.unsupported("dynamic shape input not supported: If on a run-time condition whose branches differ in output " +
                      std::to_string(i) + " (" + a[i].describe() + " vs " + b[i].describe() + ")");
      outs.push_back(where(cb, a[i], b[i]));
    }
  }
  if (outs.size() != c.num_outputs()) c.fail("the branch returns " + std::to_string(outs.size()) + " outputs for " + std::to_string(c.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i) c.set(i, outs[i]);
}

void loop_op(NodeCtx& c) {
  // inputs: M (optional), cond (optional), v_initial...; body: (iter, cond, v...) -> (cond, v..., scan...)
  int64_t trip = -1;
  if (c.has(0)) {
    std::optional<double> m = const_scalar(c, 0);
    if (!m) c.unsupported("dynamic shape input not supported: Loop with a run-time trip count");
    if (*m < 0) c.fail("the trip count " + std::to_string(static_cast<int64_t>(*m)) + " is negative");
    if (*m > static_cast<double>(kMaxIterations))
      c.unsupported("Loop of " + std::to_string(static_cast<int64_t>(*m)) + " iterations (" + std::string(kTooLongToUnroll) + ": at most " + std::to_string(kMaxIterations) + ")");
    trip = static_cast<int64_t>(*m);
  }
  Tensor cond = c.has(1) ? to(c.in(1), DType::Bool) : full({}, 1, DType::Bool);
  std::vector<BodyValue> carried;  // tensors, sequences or empty optionals
  for (size_t i = 2; i < c.num_inputs(); ++i) carried.push_back(c.value_in(i));
  const onnx::GraphProto& body = c.attr_graph("body");
  size_t n_carried = carried.size();
  if (body.output_size() < static_cast<int>(1 + n_carried)) c.fail("the body has too few outputs");
  size_t n_scan = static_cast<size_t>(body.output_size()) - 1 - n_carried;
  if (c.num_outputs() != n_carried + n_scan) c.fail("the node has " + std::to_string(c.num_outputs()) + " outputs, the body gives " + std::to_string(n_carried + n_scan));
  std::vector<std::vector<Tensor>> scans(n_scan);
  for (int64_t it = 0;; ++it) {
    if (trip >= 0 && it >= trip) break;
    std::optional<bool> go = const_bool(cond, c, "the loop condition");
    if (!go) c.unsupported("dynamic shape input not supported: Loop whose condition is computed at run time");
    if (!*go) break;
    if (it >= kMaxIterations) c.unsupported("Loop of more than " + std::to_string(kMaxIterations) + " iterations (" + std::string(kTooLongToUnroll) + ")");
    ProvenanceScope ps("iter" + std::to_string(it));
    std::vector<BodyValue> args{BodyValue::of(full({}, it, DType::I64)), BodyValue::of(cond)};
    args.insert(args.end(), carried.begin(), carried.end());
    std::vector<BodyValue> outs = c.run_body_values("body", args);
    if (outs.size() != 1 + n_carried + n_scan) c.fail("the body returns " + std::to_string(outs.size()) + " outputs");
    for (size_t i = 0; i < outs.size(); ++i)
      if ((i == 0 || i > n_carried) && outs[i].kind != BodyValue::Kind::Tensor)
        c.unsupported("a Loop body whose condition or scan output " + std::to_string(i) + " is not a tensor");
    cond = to(*outs[0].tensor, DType::Bool);
    for (size_t i = 0; i < n_carried; ++i) carried[i] = outs[1 + i];
    for (size_t i = 0; i < n_scan; ++i) scans[i].push_back(*outs[1 + n_carried + i].tensor);
  }
  for (size_t i = 0; i < n_carried; ++i) c.set_value(i, carried[i]);
  for (size_t i = 0; i < n_scan; ++i) {
    if (scans[i].empty()) c.unsupported("dynamic shape input not supported: a Loop of zero iterations with scan outputs");
    c.set(n_carried + i, stack(scans[i], 0));
  }
}

// Opset 8: a leading batch axis on every state and scan input (scan axis 1), an optional
// sequence_lens first input (only full lengths are supported), `directions`.
void scan8_op(NodeCtx& c) {
  int64_t n_in = c.attr_int("num_scan_inputs", -1);
  size_t total = c.num_inputs();
  if (total < 1 || n_in < 1 || static_cast<size_t>(n_in) > total - 1) c.fail("num_scan_inputs must be in [1, number of inputs - 1]");
  size_t n_state = total - 1 - static_cast<size_t>(n_in);
  std::vector<Tensor> st, xs;
  for (size_t i = 0; i < n_state; ++i) st.push_back(c.in(1 + i));
  for (size_t i = 1 + n_state; i < total; ++i) xs.push_back(c.in(i));
  std::vector<int64_t> dirs = c.attr_ints("directions");
  if (dirs.empty()) dirs.assign(xs.size(), 0);
  if (dirs.size() != xs.size()) c.fail("directions has the wrong length");
  for (auto& x : xs) if (x.rank() < 2 || !x.shape()[0].is_const() || !x.shape()[1].is_const()) c.unsupported("Scan inputs must be [batch, time, …] with constant sizes");
  for (auto& x : st) if (x.rank() < 1 || !x.shape()[0].is_const()) c.unsupported("Scan states must be [batch, …] with a constant batch");
  int64_t B = xs[0].shape()[0].value(), T = xs[0].shape()[1].value();
  for (auto& x : xs) if (x.shape()[0].value() != B || x.shape()[1].value() != T) c.fail("scan inputs differ in batch or length");
  if (B * T > kMaxIterations) c.unsupported("Scan of " + std::to_string(B * T) + " iterations (unrolled; at most " + std::to_string(kMaxIterations) + ")");
  if (c.has(0)) {
    HostTensor lens = c.const_in(0);
    for (int64_t k = 0; k < lens.numel(); ++k)
      if (lens.get_i64(k) != T) c.unsupported("Scan with sequence_lens shorter than the sequence");
  }
  const onnx::GraphProto& body = c.attr_graph("body");
  if (body.output_size() < static_cast<int>(n_state)) c.fail("the body has too few outputs");
  size_t n_out = static_cast<size_t>(body.output_size()) - n_state;
  std::vector<std::vector<Tensor>> fin(n_state), ys(n_out);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<Tensor> state;
    for (auto& s : st) state.push_back(select(s, 0, b));
    std::vector<std::vector<Tensor>> per(n_out);
    for (int64_t t = 0; t < T; ++t) {
      ProvenanceScope ps("b" + std::to_string(b) + "_iter" + std::to_string(t));
      std::vector<Tensor> args = state;
      for (size_t i = 0; i < xs.size(); ++i) args.push_back(select(select(xs[i], 0, b), 0, dirs[i] ? T - 1 - t : t));
      std::vector<Tensor> outs = c.run_body("body", args);
      for (size_t i = 0; i < n_state; ++i) state[i] = outs[i];
      for (size_t i = 0; i < n_out; ++i) per[i].push_back(outs[n_state + i]);
    }
    for (size_t i = 0; i < n_state; ++i) fin[i].push_back(state[i]);
    for (size_t i = 0; i < n_out; ++i) ys[i].push_back(stack(per[i], 0));
  }
  for (size_t i = 0; i < n_state; ++i) c.set(i, stack(fin[i], 0));
  for (size_t i = 0; i < n_out; ++i) c.set(n_state + i, stack(ys[i], 0));
}

void scan_op(NodeCtx& c) {
  if (c.opset() < 9) return scan8_op(c);
  int64_t n_in = c.attr_int("num_scan_inputs", -1);
  size_t total = c.num_inputs();
  if (n_in < 1 || static_cast<size_t>(n_in) > total) c.fail("num_scan_inputs must be in [1, number of inputs]");
  size_t n_state = total - static_cast<size_t>(n_in);
  std::vector<Tensor> state, xs;
  for (size_t i = 0; i < n_state; ++i) state.push_back(c.in(i));
  for (size_t i = n_state; i < total; ++i) xs.push_back(c.in(i));
  std::vector<int64_t> in_axes = c.attr_ints("scan_input_axes"), in_dirs = c.attr_ints("scan_input_directions");
  if (in_axes.empty()) in_axes.assign(xs.size(), 0);
  if (in_dirs.empty()) in_dirs.assign(xs.size(), 0);
  if (in_axes.size() != xs.size() || in_dirs.size() != xs.size()) c.fail("scan_input_axes / directions have the wrong length");
  int64_t T = -1;
  std::vector<int> axes;
  for (size_t i = 0; i < xs.size(); ++i) {
    int a = c.axis(in_axes[i], xs[i].rank(), "scan_input_axes entry");
    axes.push_back(a);
    SymInt n = xs[i].shape()[a];
    if (!n.is_const()) c.unsupported("Scan over a symbolic length");
    if (T >= 0 && n.value() != T) c.fail("scan inputs differ in length along their scan axes");
    T = n.value();
  }
  if (T > kMaxIterations) c.unsupported("Scan of " + std::to_string(T) + " iterations (" + std::string(kTooLongToUnroll) + ": at most " + std::to_string(kMaxIterations) + ")");
  const onnx::GraphProto& body = c.attr_graph("body");
  if (body.output_size() < static_cast<int>(n_state)) c.fail("the body has too few outputs");
  size_t n_out = static_cast<size_t>(body.output_size()) - n_state;
  std::vector<int64_t> out_axes = c.attr_ints("scan_output_axes"), out_dirs = c.attr_ints("scan_output_directions");
  if (out_axes.empty()) out_axes.assign(n_out, 0);
  if (out_dirs.empty()) out_dirs.assign(n_out, 0);
  if (out_axes.size() != n_out || out_dirs.size() != n_out) c.fail("scan_output_axes / directions have the wrong length");
  std::vector<std::vector<Tensor>> ys(n_out);
  for (int64_t t = 0; t < T; ++t) {
    ProvenanceScope ps("iter" + std::to_string(t));
    std::vector<Tensor> args = state;
    for (size_t i = 0; i < xs.size(); ++i) args.push_back(select(xs[i], axes[i], in_dirs[i] ? T - 1 - t : t));
    std::vector<Tensor> outs = c.run_body("body", args);
    for (size_t i = 0; i < n_state; ++i) state[i] = outs[i];
    for (size_t i = 0; i < n_out; ++i) ys[i].push_back(outs[n_state + i]);
  }
  for (size_t i = 0; i < n_state; ++i) c.set(i, state[i]);
  for (size_t i = 0; i < n_out; ++i) {
    if (ys[i].empty()) c.unsupported("Scan of length 0 with scan outputs");
    std::vector<Tensor> parts = ys[i];
    if (out_dirs[i]) std::reverse(parts.begin(), parts.end());
    int a = c.axis(out_axes[i], parts[0].rank() + 1, "scan_output_axes entry");
    c.set(n_state + i, stack(parts, a));
  }
}

}  // namespace

void add_control_ops(OpTable& t) {
  t["If"] = if_op;
  t["Loop"] = loop_op;
  t["Scan"] = scan_op;
}

}  // namespace lathe::onnx_import
