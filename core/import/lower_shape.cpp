// lower_shape.cpp — ONNX shape and movement ops: Reshape Flatten Transpose Squeeze
// Unsqueeze Concat Split Expand Tile Pad, and the shape-computing sources Shape Size
// ConstantOfShape Constant Range, plus Dropout (inference: the identity).
//
// Shape-valued inputs (Reshape's shape, Expand's shape, Tile's repeats, Pad's pads,
// Unsqueeze/Squeeze axes from opset 13, Split sizes …) are folded to constants at import.
#include <cmath>

#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {
namespace {

Tensor i64_vector(const std::vector<int64_t>& v) {
  HostTensor h(DType::I64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) h.set_i64(static_cast<int64_t>(i), v[i]);
  return from_host(h);
}

// A rank-0 constant of dtype dt (any double, inf and NaN included, without going through
// Scalar's integer conversion).
Tensor scalar_const(double v, DType dt) {
  if (is_float(dt)) return Tensor(prim::constant(v, dt));
  if (!std::isfinite(v)) return Tensor(prim::constant_int(0, dt));
  return Tensor(prim::constant(v, dt));
}

void reshape_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> target = c.opset() < 5 ? c.attr_ints("shape") : c.ints_in(1);
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  Shape s;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t v = target[i];
    if (v == 0 && !allowzero) {
      if (static_cast<int>(i) >= x.rank()) c.fail("shape entry " + std::to_string(i) + " is 0 (copy) but the input has rank " + std::to_string(x.rank()));
      s.push_back(x.shape()[i]);
    } else if (v < -1 || v > c.max_elements()) {
      c.fail("invalid shape entry " + std::to_string(v));
    } else {
      s.push_back(SymInt(v));
    }
  }
  c.set(0, reshape(x, s));
}

void flatten_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  int64_t a = c.attr_int("axis", 1);
  if (a < 0) a += x.rank();
  if (a < 0 || a > x.rank()) c.fail("axis " + std::to_string(c.attr_int("axis", 1)) + " is out of range");
  SymInt outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < a) outer = outer * x.shape()[d];
    else inner = inner * x.shape()[d];
  }
  c.set(0, reshape(x, {outer, inner}));
}

void transpose_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> p = c.attr_ints("perm");
  std::vector<int> perm;
  if (p.empty()) for (int d = x.rank() - 1; d >= 0; --d) perm.push_back(d);
  else for (int64_t v : p) perm.push_back(c.axis(v, x.rank(), "perm entry"));
  c.set(0, permute(x, perm));
}

std::vector<int64_t> axes_arg(const NodeCtx& c, int since_opset_input) {
  if (c.opset() >= since_opset_input) return c.has(1) ? c.ints_in(1) : std::vector<int64_t>{};
  return c.attr_ints("axes");
}

void squeeze_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> axes = axes_arg(c, 13);
  Shape s;
  std::vector<bool> drop(x.rank(), false);
  if (axes.empty()) {
    for (int d = 0; d < x.rank(); ++d) drop[d] = x.shape()[d] == SymInt(1);
  } else {
    for (int64_t a : axes) {
      int d = c.axis(a, x.rank());
      if (x.shape()[d] != SymInt(1)) c.fail("cannot squeeze dim " + std::to_string(d) + " of " + x.describe() + ": its size is not 1");
      drop[d] = true;
    }
  }
  for (int d = 0; d < x.rank(); ++d) if (!drop[d]) s.push_back(x.shape()[d]);
  c.set(0, reshape(x, s));
}

void unsqueeze_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> axes = axes_arg(c, 13);
  int out_rank = x.rank() + static_cast<int>(axes.size());
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : axes) {
    int d = c.axis(a, out_rank);
    if (is_new[d]) c.fail("axis " + std::to_string(a) + " is repeated");
    is_new[d] = true;
  }
  Shape s;
  int k = 0;
  for (int d = 0; d < out_rank; ++d) s.push_back(is_new[d] ? SymInt(1) : x.shape()[k++]);
  c.set(0, reshape(x, s));
}

void concat_op(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<Tensor> xs = c.all_inputs();
  if (xs.empty()) c.fail("needs at least one input");
  if (!c.has_attr("axis") && c.opset() >= 4) c.fail("attribute 'axis' is required");
  for (auto& x : xs) {
    require_same_dtype(c, xs[0], x);
    if (x.rank() != xs[0].rank()) c.fail("inputs differ in rank: " + xs[0].describe() + " vs " + x.describe());
  }
  int ax = c.axis(c.attr_int("axis", 1), xs[0].rank());
  std::vector<Tensor> parts;
  for (auto& x : xs) if (x.shape()[ax] != SymInt(0)) parts.push_back(x);  // ONNX allows empty parts
  c.set(0, parts.empty() ? xs[0] : concat(parts, ax));
}

void split_op(NodeCtx& c) {
  Tensor x = c.in(0);
  int ax = c.axis(c.attr_int("axis", 0), x.rank());
  std::vector<int64_t> sizes = c.opset() >= 13 ? (c.has(1) ? c.ints_in(1) : std::vector<int64_t>{})
                                               : c.attr_ints("split");
  if (c.opset() < 13 && c.has(1)) sizes = c.ints_in(1);  // opset 2-10 models may pass split as an input
  size_t n = c.num_outputs();
  if (sizes.empty()) {
    SymInt d = x.shape()[ax];
    if (!d.is_const()) c.unsupported("splitting a symbolic dim " + d.to_string());
    int64_t parts = c.has_attr("num_outputs") ? c.attr_int("num_outputs", 1) : static_cast<int64_t>(n);
    if (parts <= 0) c.fail("needs at least one output");
    int64_t len = d.value(), each = (len + parts - 1) / parts;
    if (!c.has_attr("num_outputs") && len % parts) c.fail("dim " + std::to_string(len) + " does not split evenly into " + std::to_string(parts));
    for (int64_t off = 0; off < len || static_cast<int64_t>(sizes.size()) < parts; off += each)
      sizes.push_back(std::max<int64_t>(0, std::min(each, len - off)));
  }
  if (sizes.size() != n) c.fail(std::to_string(sizes.size()) + " split sizes for " + std::to_string(n) + " outputs");
  std::vector<Tensor> r = split(x, sizes, ax);
  for (size_t i = 0; i < n; ++i) c.set(i, r[i]);
}

void expand_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> s = c.ints_in(1);
  Shape target;
  for (int64_t v : s) {
    if (v < 0 || v > c.max_elements()) c.fail("invalid size " + std::to_string(v) + " in the shape");
    target.push_back(v);
  }
  Shape out = broadcast_shapes(x.shape(), target, "Expand");
  c.set(0, expand(x, out));
}

void tile_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> reps = c.ints_in(1);
  if (static_cast<int>(reps.size()) != x.rank())
    c.fail(std::to_string(reps.size()) + " repeats for a tensor of rank " + std::to_string(x.rank()));
  for (int64_t r : reps) if (r < 0 || r > c.max_elements()) c.fail("invalid repeat count " + std::to_string(r));
  c.set(0, tile(x, reps));
}

// Index (along one axis) of the source element for each output position under edge /
// reflect padding; negative pads crop.
std::vector<int64_t> pad_index(int64_t n, int64_t before, int64_t after, bool reflect) {
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < n + before + after; ++j) {
    int64_t s = j - before;
    if (reflect) {
      int64_t period = 2 * (n - 1);
      s = ((s % period) + period) % period;
      if (s >= n) s = period - s;
    } else {
      s = std::min(std::max<int64_t>(s, 0), n - 1);
    }
    idx.push_back(s);
  }
  return idx;
}

void pad_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  int r = x.rank();
  std::string mode = c.attr_string("mode", "constant");
  std::vector<int64_t> pads;
  double value = 0;
  if (c.opset() < 11) {
    pads = c.attr_ints(c.has_attr("pads") ? "pads" : "paddings");
    value = c.attr_float("value", 0.0);
  } else {
    pads = c.ints_in(1);
    if (c.has(2)) value = c.scalar_in(2);
  }
  std::vector<int> axes;
  if (c.has(3)) for (int64_t a : c.ints_in(3)) axes.push_back(c.axis(a, r));
  else for (int d = 0; d < r; ++d) axes.push_back(d);
  for (int64_t p : pads)
    if (p > c.max_elements() || p < -c.max_elements()) c.fail("pad amount " + std::to_string(p) + " is out of range");
  if (pads.size() != 2 * axes.size())
    c.fail(std::to_string(pads.size()) + " pad amounts for " + std::to_string(axes.size()) + " axes (need 2 per axis)");
  std::vector<std::pair<SymInt, SymInt>> pairs(r, {SymInt(0), SymInt(0)});
  for (size_t i = 0; i < axes.size(); ++i) pairs[axes[i]] = {pads[i], pads[i + axes.size()]};
  if (mode == "constant") {
    Tensor zero_padded = pad(x, pairs, Scalar(0));
    if (value == 0) {
      c.set(0, zero_padded);
    } else {
      Tensor inside = pad(ones(x.shape(), DType::Bool), pairs, Scalar(0));
      c.set(0, where(inside, zero_padded, scalar_const(value, x.dtype())));
    }
    return;
  }
  if (mode != "edge" && mode != "reflect") c.unsupported("Pad mode '" + mode + "'");
  Tensor y = x;
  for (int d = 0; d < r; ++d) {
    int64_t b = pairs[d].first.value(), a = pairs[d].second.value();
    if (!b && !a) continue;
    SymInt n = x.shape()[d];
    if (!n.is_const()) c.unsupported(mode + " padding of a symbolic dim");
    if (n.value() == 0 || (mode == "reflect" && n.value() < 2)) c.fail(mode + " padding needs dim " + std::to_string(d) + " to have at least " + (mode == "reflect" ? "2" : "1") + " elements");
    if (n.value() + b + a < 0) c.fail("negative padding crops more than dim " + std::to_string(d));
    y = index_select(y, d, i64_vector(pad_index(n.value(), b, a, mode == "reflect")));
  }
  c.set(0, y);
}

void shape_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  int r = x.rank();
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> v;
  for (int64_t d = start; d < end; ++d) {
    if (!x.shape()[d].is_const()) c.unsupported("dynamic shape input not supported: Shape of symbolic dim " + x.shape()[d].to_string());
    v.push_back(x.shape()[d].value());
  }
  c.set(0, i64_vector(v));
}

void size_op(NodeCtx& c) {
  c.only_outputs(1);
  SymInt n = shape_numel(c.in(0).shape());
  if (!n.is_const()) c.unsupported("dynamic shape input not supported: Size of a symbolic shape");
  c.set(0, full({}, Scalar(n.value()), DType::I64));
}

void constant_of_shape_op(NodeCtx& c) {
  c.only_outputs(1);
  std::vector<int64_t> s = c.has(0) ? c.ints_in(0) : std::vector<int64_t>{};
  Shape shape;
  int64_t numel = 1;
  for (int64_t v : s) {
    if (v < 0) c.fail("negative size " + std::to_string(v));
    if (v && numel > c.max_elements() / v) c.fail("the shape has too many elements");
    numel *= v;
    shape.push_back(v);
  }
  DType dt = DType::F32;
  double value = 0;
  if (const auto* tp = c.attr_tensor("value")) {
    HostTensor h = tensor_from_proto(*tp, c.max_elements(), c.where() + " attribute 'value'");
    if (h.numel() != 1) c.fail("attribute 'value' must hold one element, got " + h.shape_string());
    dt = h.dtype();
    if (is_float(dt)) value = h.get_f64(0);
    else { c.set(0, Tensor(prim::constant_int(h.get_i64(0), dt, shape))); return; }
  }
  c.set(0, Tensor(prim::constant(value, dt, shape)));
}

void constant_op(NodeCtx& c) {
  c.only_outputs(1);
  if (const auto* tp = c.attr_tensor("value")) {
    c.set(0, from_host(tensor_from_proto(*tp, c.max_elements(), c.where() + " attribute 'value'")));
  } else if (c.has_attr("value_float")) {
    c.set(0, scalar_const(c.attr_float("value_float", 0), DType::F32));
  } else if (c.has_attr("value_int")) {
    c.set(0, full({}, Scalar(c.attr_int("value_int", 0)), DType::I64));
  } else if (c.has_attr("value_floats")) {
    auto v = c.attr_floats("value_floats");
    HostTensor h(DType::F32, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) h.set_f64(static_cast<int64_t>(i), v[i]);
    c.set(0, from_host(h));
  } else if (c.has_attr("value_ints")) {
    c.set(0, i64_vector(c.attr_ints("value_ints")));
  } else if (c.has_attr("sparse_value") || c.has_attr("value_string") || c.has_attr("value_strings")) {
    c.unsupported("sparse and string constants");
  } else {
    c.fail("needs one of the attributes value, value_float(s), value_int(s)");
  }
}

void range_op(NodeCtx& c) {
  c.only_outputs(1);
  DType dt = c.in(0).dtype();
  double start = c.scalar_in(0), limit = c.scalar_in(1), delta = c.scalar_in(2);
  if (delta == 0) c.fail("delta must be non-zero");
  double count = std::ceil((limit - start) / delta);
  if (!(count >= 0)) count = 0;
  if (count > static_cast<double>(c.max_elements())) c.fail("the range has too many elements");
  int64_t n = static_cast<int64_t>(count);
  HostTensor h(dt, {n});
  if (is_float(dt)) {
    for (int64_t i = 0; i < n; ++i) h.set_f64(i, start + static_cast<double>(i) * delta);
  } else {
    int64_t s = c.const_in(0).get_i64(0), d = c.const_in(2).get_i64(0);
    for (int64_t i = 0; i < n; ++i)  // wraps like the integer type would, never signed overflow
      h.set_i64(i, static_cast<int64_t>(static_cast<uint64_t>(s) + static_cast<uint64_t>(i) * static_cast<uint64_t>(d)));
  }
  c.set(0, from_host(h));
}

void dropout_op(NodeCtx& c) {
  Tensor x = c.in(0);
  bool training = false;
  if (c.opset() >= 12 && c.has(2)) training = c.scalar_in(2) != 0;
  if (training) {
    // ratio 0 drops nothing: the identity (PyTorch exports some models this way)
    double ratio = c.opset() >= 12 ? (c.has(1) ? c.scalar_in(1) : 0.5) : c.attr_float("ratio", 0.5);
    if (ratio != 0) c.unsupported("Dropout in training mode (random)");
  }
  c.set(0, x);
  if (c.wants(1)) c.set(1, ones(x.shape(), c.opset() >= 10 ? DType::Bool : x.dtype()));
}

}  // namespace

void add_shape_ops(OpTable& t) {
  t["Reshape"] = reshape_op;
  t["Flatten"] = flatten_op;
  t["Transpose"] = transpose_op;
  t["Squeeze"] = squeeze_op;
  t["Unsqueeze"] = unsqueeze_op;
  t["Concat"] = concat_op;
  t["Split"] = split_op;
  t["Expand"] = expand_op;
  t["Tile"] = tile_op;
  t["Pad"] = pad_op;
  t["Shape"] = shape_op;
  t["Size"] = size_op;
  t["ConstantOfShape"] = constant_of_shape_op;
  t["Constant"] = constant_op;
  t["Range"] = range_op;
  t["Dropout"] = dropout_op;
}

}  // namespace lathe::onnx_import
