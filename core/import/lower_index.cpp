// lower_index.cpp — ONNX indexing ops: Gather, GatherElements, Slice.
//
// Gather with an index of rank q is one Take: the data gets q-1 broadcast dims after the
// gather axis and the index is broadcast over the data's other dims, so both have the
// output's rank. Indices known at import time (or on the host in a staged run) out of
// range are an error naming the node. Slice follows ONNX's clamping rules (starts/ends clamp to the dim, with
// [-1, dim-1] for negative steps) and is one strided View per sliced axis.
#include <limits>

#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

void check_index_dtype(const NodeCtx& c, const Tensor& idx) {
  if (idx.dtype() != DType::I32 && idx.dtype() != DType::I64)
    c.fail("indices must be int32 or int64, got " + idx.describe());
}

// Indices known at import time, or on the host in a staged run, must lie in [-n, n).
void check_known_indices(const NodeCtx& c, const SymInt& n) {
  std::optional<HostTensor> h = n.is_const() ? c.known_in(1) : std::nullopt;
  if (!h) return;
  for (int64_t e = 0; e < h->numel(); ++e) {
    int64_t v = h->get_i64(e);
    if (v < -n.value() || v >= n.value())
      c.fail("index " + std::to_string(v) + " (element " + std::to_string(e) + ") is out of range for a dim of " +
             std::to_string(n.value()));
  }
}

void gather_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor data = c.in(0), idx = c.in(1);
  check_index_dtype(c, idx);
  if (data.rank() == 0) c.fail("data must have rank >= 1");
  int ax = c.axis(c.attr_int("axis", 0), data.rank());
  check_known_indices(c, data.shape()[ax]);
  bool scalar_index = idx.rank() == 0;
  if (scalar_index) idx = reshape(idx, {1});
  const Shape& ds = data.shape();
  const Shape& is = idx.shape();
  int q = idx.rank();
  Shape dview(ds.begin(), ds.begin() + ax + 1), dfull(ds.begin(), ds.begin() + ax + 1);
  for (int k = 1; k < q; ++k) { dview.push_back(1); dfull.push_back(is[k]); }
  dview.insert(dview.end(), ds.begin() + ax + 1, ds.end());
  dfull.insert(dfull.end(), ds.begin() + ax + 1, ds.end());
  Shape iview(ax, SymInt(1)), ifull(ds.begin(), ds.begin() + ax);
  iview.insert(iview.end(), is.begin(), is.end());
  ifull.insert(ifull.end(), is.begin(), is.end());
  for (int d = ax + 1; d < data.rank(); ++d) { iview.push_back(1); ifull.push_back(ds[d]); }
  Tensor dv = expand(reshape(data, dview), dfull);
  Tensor iv = expand(reshape(idx, iview), ifull);
  Tensor r(prim::take(dv.node(), iv.node(), ax));
  if (scalar_index) r = squeeze(r, {ax});
  c.set(0, r);
}

void gather_elements_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor data = c.in(0), idx = c.in(1);
  check_index_dtype(c, idx);
  if (idx.rank() != data.rank()) c.fail("indices " + idx.describe() + " must have the rank of data " + data.describe());
  int ax = c.axis(c.attr_int("axis", 0), data.rank());
  check_known_indices(c, data.shape()[ax]);
  c.set(0, gather(data, ax, idx));
}

void slice_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    starts = c.ints_in(1);
    ends = c.ints_in(2);
    if (c.has(3)) axes = c.ints_in(3);
    if (c.has(4)) steps = c.ints_in(4);
  }
  if (starts.size() != ends.size()) c.fail("starts and ends differ in length");
  if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) c.fail("starts, ends, axes and steps differ in length");
  std::vector<bool> seen(x.rank(), false);
  Tensor y = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    int a = c.axis(axes[i], x.rank());
    if (seen[a]) c.fail("axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
    int64_t step = steps[i];
    if (step == 0) c.fail("step must be non-zero");
    SymInt n = x.shape()[a];
    if (!n.is_const()) {
      y = slice(y, a, starts[i], ends[i], step);
      continue;
    }
    int64_t len = n.value();
    auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = v < -len ? -len - 1 : v + len;  // avoid overflow near INT64_MIN
      return std::min(std::max(v, lo), hi);
    };
    if (step > 0) {
      y = slice(y, a, norm(starts[i], 0, len), norm(ends[i], 0, len), step);
    } else {
      int64_t b = norm(starts[i], 0, len - 1), e = norm(ends[i], -1, len - 1);
      if (len == 0) y = slice(y, a, 0, 0, 1);
      else y = slice(y, a, b, e < 0 ? std::nullopt : std::optional<int64_t>(e), step);
    }
  }
  c.set(0, y);
}

}  // namespace

void add_index_ops(OpTable& t) {
  t["Gather"] = gather_op;
  t["GatherElements"] = gather_elements_op;
  t["Slice"] = slice_op;
}

}  // namespace lathe::onnx_import
