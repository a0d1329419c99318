// lower_scatter.cpp — ONNX ScatterElements, Scatter (opset 9–10), ScatterND, GatherND,
// MaxUnpool.
//
// Lathe has no scatter primitive, so a scatter is written as a gather over a one-hot match:
// for an output position p along the scatter axis (N positions) and an update position k
// (K positions), hit[.., p, k, ..] = (index[.., k, ..] == p). Then
//   reduction none: the last k that hits p (ONNX leaves duplicates undefined; the reference
//                   keeps the last), else the data;
//   add / mul / max / min: data combined with the reduction of the hitting updates.
// The cost is O(N·K) per row, not O(K): fine for the sizes these ops have in exported
// models (embedding updates, unpooling), and exact on every backend.
// ScatterND and GatherND linearize the first k dims of data, so they are the same
// along-one-axis operations on a [P, R] view (ScatterND) or a Take (GatherND).
// Constant indices are checked at import time, and in a staged run (onnx_staged.h) indices
// known on the host are checked each run: one out of range is an error naming the node.
// The scatters' indices must be one or the other: indices known only at run time make the
// model a staged one (require_known_indices), whose segment ends before the scatter when
// they are computed there, so every index a scatter applies has been checked. (GatherND's
// run-time indices are not: one outside the axis gathers 0, as an out-of-range Take does.)
#include <limits>

#include "core/import/onnx_lower.h"

namespace lathe::onnx_import {
namespace {

void check_index_dtype(const NodeCtx& c, const Tensor& idx) {
  if (idx.dtype() != DType::I32 && idx.dtype() != DType::I64)
    c.fail("indices must be int32 or int64, got " + idx.describe());
}

// Fails when constant indices (input i) leave [-n, n).
void check_const_indices(const NodeCtx& c, size_t i, int64_t n, const char* what) {
  std::optional<HostTensor> h = c.known_in(i);
  if (!h) return;
  for (int64_t k = 0; k < h->numel(); ++k) {
    int64_t v = h->get_i64(k);
    if (v < -n || v >= n)
      c.fail(std::string(what) + " index " + std::to_string(v) + " (element " + std::to_string(k) +
             ") is out of range for a dim of " + std::to_string(n));
  }
}

// Scatter indices (input 1) that are neither constant nor known on the host: the model
// runs staged (lathe run does that on this message) and the indices are checked there.
void require_known_indices(const NodeCtx& c) {
  if (!c.known_in(1))
    c.unsupported("dynamic shape input not supported: scatter indices known only at run time (checked on the host "
                  "every run in a staged run)");
}

// data [.., N, ..] (axis `ax`), idx and upd [.., K, ..] with data's other dims; returns
// data with the updates scattered along ax.
Tensor scatter_axis(const NodeCtx& c, const Tensor& data, Tensor idx, const Tensor& upd, int ax,
                    const std::string& reduction) {
  SymInt N = data.shape()[ax];
  idx = to(idx, DType::I64);
  if (!N.is_const()) c.unsupported("scatter along a symbolic dim");
  idx = where(lt(idx, 0), idx + N.value(), idx);
  // hit[.., N, K, ..]: the update axis K sits right after the data axis
  Shape hs = idx.shape();
  hs.insert(hs.begin() + ax, N);
  SymInt hn = shape_numel(hs);
  if (!hn.is_const() || hn.value() > c.max_elements())
    c.unsupported("scatter of " + idx.describe() + " into " + data.describe() +
                  ": the one-hot match would exceed the element cap");
  Tensor iu = unsqueeze(idx, ax);                     // [.., 1, K, ..]
  Tensor uu = unsqueeze(upd, ax);                     // [.., 1, K, ..]
  Tensor pos(prim::index(DType::I64, hs, ax));        // p
  Tensor hit = eq(iu, pos);                           // [.., N, K, ..]
  int kx = ax + 1;
  Tensor any_hit = squeeze(any(hit, {kx}, true), {kx});  // [.., N, ..]
  DType dt = data.dtype();
  Tensor val;
  if (reduction == "none") {
    Tensor kk(prim::index(DType::I64, hs, kx));
    Tensor last = max(where(hit, kk, full({}, -1, DType::I64)), {kx}, true);  // [.., N, 1, ..]
    Tensor pick = logical_and(hit, eq(kk, last));
    val = to(squeeze(sum(where(pick, uu, zeros({}, dt)), {kx}, true), {kx}), dt);
    return where(any_hit, val, data);
  }
  if (reduction == "add") {
    val = squeeze(sum(where(hit, uu, zeros({}, dt)), {kx}, true), {kx});
    return to(data + to(val, dt), dt);
  }
  if (reduction == "mul") {
    val = squeeze(prod(where(hit, uu, ones({}, dt)), {kx}, true), {kx});
    return to(data * to(val, dt), dt);
  }
  if (reduction == "max" || reduction == "min") {
    bool mx = reduction == "max";
    Tensor fill = is_float(dt) ? full({}, mx ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), dt)
                               : full({}, mx ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(), DType::I64);
    Tensor u = where(hit, to(uu, fill.dtype()), fill);
    val = squeeze(mx ? max(u, {kx}, true) : min(u, {kx}, true), {kx});
    Tensor d = to(data, fill.dtype());
    return to(where(any_hit, mx ? maximum(d, val) : minimum(d, val), d), dt);
  }
  c.fail("unknown reduction '" + reduction + "'");
}

void scatter_elements_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor data = c.in(0), idx = c.in(1), upd = c.in(2);
  check_index_dtype(c, idx);
  require_same_dtype(c, data, upd);
  int r = data.rank();
  if (r == 0) c.fail("data must have rank >= 1");
  if (idx.rank() != r || upd.shape() != idx.shape())
    c.fail("indices " + idx.describe() + " and updates " + upd.describe() + " must have equal shapes of data's rank " + std::to_string(r));
  int ax = c.axis(c.attr_int("axis", 0), r);
  std::string red = c.op_type() == "Scatter" ? "none" : c.attr_string("reduction", "none");
  for (int d = 0; d < r; ++d) {
    if (!data.shape()[d].is_const() || !idx.shape()[d].is_const()) c.unsupported("symbolic dims");
    if (d != ax && idx.shape()[d].value() > data.shape()[d].value())
      c.fail("indices " + idx.describe() + " exceed data " + data.describe() + " in dim " + std::to_string(d));
  }
  check_const_indices(c, 1, data.shape()[ax].value(), "scatter");
  require_known_indices(c);
  // crop data to the indices' extent on the other axes, scatter, and put it back
  Tensor dc = data;
  bool cropped = false;
  for (int d = 0; d < r; ++d)
    if (d != ax && idx.shape()[d] != data.shape()[d]) { dc = narrow(dc, d, 0, idx.shape()[d]); cropped = true; }
  Tensor res = scatter_axis(c, dc, idx, upd, ax, red);
  if (cropped) {
    std::vector<std::pair<SymInt, SymInt>> pads;
    for (int d = 0; d < r; ++d) pads.push_back({0, data.shape()[d] - dc.shape()[d]});
    Tensor inside = pad(ones(dc.shape(), DType::Bool), pads, Scalar(0));
    res = where(inside, pad(res, pads, Scalar(0)), data);
  }
  c.set(0, to(res, data.dtype()));
}

// Linear index into the first k dims of `shape` from an [.., k] index tensor (negatives
// normalized per component).
Tensor linearize(const NodeCtx& c, const Tensor& idx, const Shape& shape, int first, int k) {
  Tensor lin;
  int64_t stride = 1;
  for (int m = k - 1; m >= 0; --m) {
    int64_t n = shape[first + m].value();
    Tensor comp = to(squeeze(narrow(idx, idx.rank() - 1, m, 1), {idx.rank() - 1}), DType::I64);
    comp = where(lt(comp, 0), comp + n, comp);
    Tensor term = comp * stride;
    lin = lin.defined() ? lin + term : term;
    stride *= n;
  }
  (void)c;
  return lin;
}

void check_nd_indices(const NodeCtx& c, const Shape& shape, int first, int k) {
  std::optional<HostTensor> h = c.known_in(1);
  if (!h) return;
  for (int64_t e = 0; e < h->numel(); ++e) {
    int64_t n = shape[first + e % k].value(), v = h->get_i64(e);
    if (v < -n || v >= n)
      c.fail("index " + std::to_string(v) + " (element " + std::to_string(e) + ") is out of range for a dim of " + std::to_string(n));
  }
}

void scatter_nd_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor data = c.in(0), idx = c.in(1), upd = c.in(2);
  if (idx.dtype() != DType::I64) c.fail("indices must be int64, got " + idx.describe());
  require_same_dtype(c, data, upd);
  int r = data.rank(), q = idx.rank();
  if (q < 1) c.fail("indices must have rank >= 1");
  for (auto& s : {data.shape(), idx.shape(), upd.shape()})
    for (auto& d : s) if (!d.is_const()) c.unsupported("symbolic dims");
  int k = static_cast<int>(idx.shape()[q - 1].value());
  if (k < 1 || k > r) c.fail("the last dim of indices (" + std::to_string(k) + ") must be in [1, rank(data) = " + std::to_string(r) + "]");
  Shape want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + k, data.shape().end());
  if (upd.shape() != want) c.fail("updates " + upd.describe() + " must have shape " + shape_to_string(want));
  check_nd_indices(c, data.shape(), 0, k);
  require_known_indices(c);
  Shape lead(data.shape().begin(), data.shape().begin() + k), rest(data.shape().begin() + k, data.shape().end());
  SymInt P = shape_numel(lead), R = shape_numel(rest), J = shape_numel(Shape(idx.shape().begin(), idx.shape().end() - 1));
  Tensor lin = reshape(linearize(c, idx, data.shape(), 0, k), {J, 1});
  Tensor d2 = reshape(data, {P, R}), u2 = reshape(upd, {J, R});
  Tensor res = scatter_axis(c, d2, expand(lin, {J, R}), u2, 0, c.attr_string("reduction", "none"));
  c.set(0, reshape(res, data.shape()));
}

void gather_nd_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor data = c.in(0), idx = c.in(1);
  if (idx.dtype() != DType::I64) c.fail("indices must be int64, got " + idx.describe());
  int r = data.rank(), q = idx.rank();
  int b = static_cast<int>(c.attr_int("batch_dims", 0));
  if (q < 1 || r < 1) c.fail("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) c.fail("batch_dims " + std::to_string(b) + " must be less than both ranks");
  for (auto& s : {data.shape(), idx.shape()})
    for (auto& d : s) if (!d.is_const()) c.unsupported("symbolic dims");
  for (int d = 0; d < b; ++d)
    if (data.shape()[d] != idx.shape()[d]) c.fail("batch dim " + std::to_string(d) + " differs between data and indices");
  int k = static_cast<int>(idx.shape()[q - 1].value());
  if (k < 1 || k > r - b) c.fail("the last dim of indices (" + std::to_string(k) + ") must be in [1, " + std::to_string(r - b) + "]");
  check_nd_indices(c, data.shape(), b, k);
  Shape bdims(data.shape().begin(), data.shape().begin() + b);
  Shape jdims(idx.shape().begin() + b, idx.shape().end() - 1);
  Shape rest(data.shape().begin() + b + k, data.shape().end());
  SymInt P = shape_numel(Shape(data.shape().begin() + b, data.shape().begin() + b + k));
  if (jdims.empty()) jdims.push_back(1);
  Shape out = bdims;
  out.insert(out.end(), jdims.begin(), jdims.end());
  out.insert(out.end(), rest.begin(), rest.end());
  // data -> [B.., P, 1.., rest] expanded to [B.., J0, J1.., rest] except axis b stays P
  Shape dview = bdims, dfull = bdims;
  dview.push_back(P);
  dfull.push_back(P);
  for (size_t i = 1; i < jdims.size(); ++i) { dview.push_back(1); dfull.push_back(jdims[i]); }
  dview.insert(dview.end(), rest.begin(), rest.end());
  dfull.insert(dfull.end(), rest.begin(), rest.end());
  Tensor dv = expand(reshape(data, dview), dfull);
  Tensor lin = linearize(c, idx, data.shape(), b, k);  // [B.., J..]
  Shape iview = bdims;
  iview.insert(iview.end(), jdims.begin(), jdims.end());
  for (size_t i = 0; i < rest.size(); ++i) iview.push_back(1);
  Tensor iv = expand(reshape(lin, iview), out);
  Tensor res(prim::take(dv.node(), iv.node(), b));
  Shape final_shape = bdims;
  final_shape.insert(final_shape.end(), idx.shape().begin() + b, idx.shape().end() - 1);
  final_shape.insert(final_shape.end(), rest.begin(), rest.end());
  c.set(0, reshape(res, final_shape));
}

// MaxUnpool: X [N, C, spatial…] and the flat indices MaxPool produced (over N·C·spatial of
// the output) -> zeros with X's values at those indices.
void max_unpool_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), idx = c.in(1);
  if (idx.dtype() != DType::I64) c.fail("indices must be int64, got " + idx.describe());
  if (idx.shape() != x.shape()) c.fail("indices " + idx.describe() + " must have X's shape " + x.describe());
  if (x.rank() < 3) c.fail("X must be [N, C, spatial…], got " + x.describe());
  for (auto& d : x.shape()) if (!d.is_const()) c.unsupported("symbolic dims");
  size_t k = static_cast<size_t>(x.rank() - 2);
  // the unpooled shape the kernel, strides and pads imply; the indices address it
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape"), strides = c.attr_ints("strides"), pads = c.attr_ints("pads");
  if (kernel.size() != k) c.fail("kernel_shape must have " + std::to_string(k) + " values");
  if (strides.empty()) strides.assign(k, 1);
  if (pads.empty()) pads.assign(2 * k, 0);
  if (strides.size() != k || pads.size() != 2 * k) c.fail("strides / pads have the wrong length");
  std::vector<int64_t> dflt;
  for (size_t i = 0; i < k; ++i) {
    int64_t o = (x.shape()[2 + i].value() - 1) * strides[i] + kernel[i] - pads[i] - pads[i + k];
    if (o <= 0 || o > c.max_elements()) c.fail("the unpooled size is not positive or too large");
    dflt.push_back(o);
  }
  std::vector<int64_t> out = dflt;
  if (c.has(2)) {
    std::vector<int64_t> os = c.ints_in(2);
    if (os.size() != k + 2) c.fail("output_shape must have " + std::to_string(k + 2) + " values");
    out.assign(os.begin() + 2, os.end());
    for (size_t i = 0; i < k; ++i)
      if (out[i] < dflt[i]) c.fail("output_shape is smaller than the unpooled shape");
  }
  int64_t S = 1;
  for (int64_t o : out) {
    if (o <= 0 || S > c.max_elements() / o) c.fail("output spatial size is not positive or too large");
    S *= o;
  }
  SymInt N = x.shape()[0], C = x.shape()[1], NC = N * C;
  if (NC.value() > 0 && S > c.max_elements() / NC.value()) c.fail("the output is too large");
  int64_t J = shape_numel(Shape(x.shape().begin() + 2, x.shape().end())).value();
  // the index local to its (n, c) plane
  int64_t Sd = 1;
  for (int64_t o : dflt) Sd *= o;
  Tensor base = Tensor(prim::index(DType::I64, {NC, SymInt(J)}, 0)) * Sd;
  Tensor li = reshape(idx, {NC, SymInt(J)}) - base;
  if (out != dflt) {  // unravel in the unpooled shape, ravel in output_shape
    Tensor rem = li, lo;
    int64_t so = 1;
    for (size_t i = k; i-- > 0;) {
      Tensor coord = fmod(rem, full({}, dflt[i], DType::I64));
      rem = Tensor(prim::binary(Op::IDiv, rem.node(), full(rem.shape(), dflt[i], DType::I64).node()));
      lo = lo.defined() ? lo + coord * so : coord * so;
      so *= out[i];
    }
    li = lo;
  }
  Tensor res = scatter_axis(c, zeros({NC, SymInt(S)}, x.dtype()), li, reshape(x, {NC, SymInt(J)}), 1, "none");
  Shape os{N, C};
  for (int64_t o : out) os.push_back(o);
  c.set(0, reshape(res, os));
}

}  // namespace

void add_scatter_ops(OpTable& t) {
  t["ScatterElements"] = scatter_elements_op;
  t["Scatter"] = scatter_elements_op;
  t["ScatterND"] = scatter_nd_op;
  t["GatherND"] = gather_nd_op;
  t["MaxUnpool"] = max_unpool_op;
}

}  // namespace lathe::onnx_import
