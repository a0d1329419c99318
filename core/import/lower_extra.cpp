// lower_extra.cpp — ONNX Acos Asin Atan (composites), EyeLike, LRN, BitShift,
// ReverseSequence, Det, HannWindow / HammingWindow / BlackmanWindow, and the
// data-dependent-shape ops Compress, NonZero, Unique and NonMaxSuppression when their
// deciding inputs are constants (computed at import time; otherwise SKIP-able
// OnnxUnsupported).
//
// atan is Cephes' single-precision scheme: |x| is reduced to [0, tan(π/8)] with
// atan(x) = π/2 + atan(-1/x) above tan(3π/8) and π/4 + atan((x-1)/(x+1)) above tan(π/8),
// then a degree-9 odd polynomial (error ~1e-7); asin(x) = atan(x / sqrt(1 - x²)) and
// acos(x) = 2·atan(sqrt((1 - x) / (1 + x))). Det is Gaussian elimination with partial
// pivoting, unrolled over the (constant) matrix size: each column picks its pivot with
// argmax, swaps rows with Take/Where and eliminates below it; a zero pivot gives 0.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>

#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {
namespace {

constexpr double kPi = 3.14159265358979323846;

Tensor atan_t(const Tensor& x) {
  Tensor a = abs(x);
  Tensor big = gt(a, 2.414213562373095), mid = gt(a, 0.4142135623730950);
  // reciprocal only where used, so |x| = 0 does not make a NaN through where's other arm
  Tensor safe = where(big, a, ones_like(a));
  Tensor u = where(big, -1.0 / safe, where(mid, (a - 1.0) / (a + 1.0), a));
  Tensor y0 = where(big, full_like(a, kPi / 2), where(mid, full_like(a, kPi / 4), zeros_like(a)));
  Tensor z = u * u;
  Tensor p = (((z * 8.05374449538e-2 - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * u + u;
  return sign(x) * (y0 + p);
}

void unary_float(OpTable& t, const char* name, Tensor (*f)(const Tensor&)) {
  t[name] = [f, name](NodeCtx& c) {
    c.only_outputs(1);
    Tensor x = c.in(0);
    if (!is_float(x.dtype())) c.unsupported(std::string(name) + " of a " + std::string(dtype_name(x.dtype())) + " tensor");
    c.set(0, to(f(x), x.dtype()));
  };
}

void eye_like_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (x.rank() != 2) c.fail("input must be 2-D, got " + x.describe());
  DType dt = c.has_attr("dtype") ? require_dtype(static_cast<int>(c.attr_int("dtype", 1)), c.where() + " dtype") : x.dtype();
  int64_t k = c.attr_int("k", 0);
  Tensor i(prim::index(DType::I64, x.shape(), 0)), j(prim::index(DType::I64, x.shape(), 1));
  c.set(0, to(eq(j - i, full({}, k, DType::I64)), dt));
}

void lrn_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (x.rank() < 3) c.fail("input must be [N, C, spatial…], got " + x.describe());
  if (!is_float(x.dtype())) c.fail("input must be float, got " + x.describe());
  if (!c.has_attr("size")) c.fail("attribute 'size' is required");
  int64_t size = c.attr_int("size", 1);
  if (size <= 0 || size > (int64_t(1) << 20)) c.fail("size must be positive");
  double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75), bias = c.attr_float("bias", 1.0);
  SymInt C = x.shape()[1];
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<std::pair<SymInt, SymInt>> pads{{0, 0}, {before, after}};
  Tensor sq = pad(x * x, pads, Scalar(0));
  Tensor s;
  for (int64_t k = 0; k < size; ++k) {
    Tensor part = narrow(sq, 1, k, C);
    s = s.defined() ? s + part : part;
  }
  c.set(0, to(x / pow(s * (alpha / static_cast<double>(size)) + bias, Scalar(beta)), x.dtype()));
}

void bitshift_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), y = c.in(1);
  require_same_dtype(c, x, y);
  if (!is_int(x.dtype()) || is_signed(x.dtype())) c.fail("BitShift needs unsigned integer tensors, got " + x.describe());
  std::string dir = c.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") c.fail("direction must be LEFT or RIGHT, got '" + dir + "'");
  // x * 2^y or x / 2^y in x's own (unsigned) dtype, so u64 values above 2^63 stay exact;
  // 2^y wraps to 0 for y >= the bit width, and x * 0 = x / 0 = 0 is the shifted-out result
  HostTensor pw(x.dtype(), {64});
  for (int k = 0; k < 64; ++k) pw.set_i64(k, static_cast<int64_t>(uint64_t(1) << k));
  auto [xb, yb] = broadcast_promote(x, y, "BitShift");
  Tensor table = from_host(pw);
  // Take reads 0 past the table's end: shifting by >= 64 gives 0 either way (clamped in
  // the unsigned dtype first, so a huge u64 shift does not become a negative index)
  Tensor ys = to(minimum(yb, full_like(yb, 64)), DType::I64);
  Tensor sh = index_select(table, 0, reshape(ys, {shape_numel(yb.shape())}));
  sh = reshape(sh, yb.shape());
  Tensor r = dir == "LEFT" ? xb * sh : Tensor(prim::binary(Op::IDiv, xb.node(), sh.node()));
  c.set(0, to(r, x.dtype()));
}

void reverse_sequence_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0), lens = c.in(1);
  if (x.rank() < 2) c.fail("input must have rank >= 2, got " + x.describe());
  int ta = static_cast<int>(c.attr_int("time_axis", 0)), ba = static_cast<int>(c.attr_int("batch_axis", 1));
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0))) c.fail("time_axis and batch_axis must be 0 and 1 (in either order)");
  if (!is_int(lens.dtype()) || lens.shape() != Shape{x.shape()[ba]}) c.fail("sequence_lens must be an integer [batch], got " + lens.describe());
  if (!x.shape()[ta].is_const()) c.unsupported("a symbolic time axis");
  int64_t T = x.shape()[ta].value();
  if (auto h = [&]() -> std::optional<HostTensor> { try { return c.const_in(1); } catch (const OnnxUnsupported&) { return std::nullopt; } }())
    for (int64_t k = 0; k < h->numel(); ++k)
      if (h->get_i64(k) < 0 || h->get_i64(k) > T) c.fail("sequence_lens[" + std::to_string(k) + "] = " + std::to_string(h->get_i64(k)) + " is outside [0, " + std::to_string(T) + "]");
  Tensor t(prim::index(DType::I64, x.shape(), ta));
  Shape ls(x.rank(), SymInt(1));
  ls[ba] = x.shape()[ba];
  Tensor len = reshape(to(lens, DType::I64), ls);
  Tensor idx = where(lt(t, len), len - 1 - t, t);
  c.set(0, Tensor(prim::take(x.node(), idx.node(), ta)));
}

void det_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor a = c.in(0);
  if (!is_float(a.dtype())) c.fail("input must be float, got " + a.describe());
  int r = a.rank();
  if (r < 2 || a.shape()[r - 1] != a.shape()[r - 2] || !a.shape()[r - 1].is_const())
    c.fail("input must be [.., M, M] with a constant M, got " + a.describe());
  int64_t M = a.shape()[r - 1].value();
  DType dt = a.dtype();
  Tensor A = to(a, DType::F64);
  Shape bs(a.shape().begin(), a.shape().end() - 2);
  Tensor det = ones(bs, DType::F64);
  Tensor rows(prim::index(DType::I64, A.shape(), r - 2));
  for (int64_t k = 0; k < M; ++k) {
    // pivot: the row >= k with the largest |A[row, k]|
    Tensor col = squeeze(narrow(A, r - 1, k, 1), {r - 1});          // [.., M]
    Tensor cand = where(ge(Tensor(prim::index(DType::I64, col.shape(), r - 2)), k), abs(col), full({}, -1.0, DType::F64));
    Tensor p = argmax(cand, r - 2, true);                            // [.., 1]
    Tensor pe = expand(unsqueeze(p, r - 1), A.shape());              // [.., M, M]
    Tensor kk = full(A.shape(), k, DType::I64);
    Tensor row_p(prim::take(A.node(), pe.node(), r - 2));            // every row = row p
    Tensor row_k(prim::take(A.node(), kk.node(), r - 2));            // every row = row k
    A = where(eq(rows, kk), row_p, where(eq(rows, pe), row_k, A));
    det = det * where(ne(squeeze(p, {r - 2}), k), full({}, -1.0, DType::F64), full({}, 1.0, DType::F64));
    Tensor piv = squeeze(narrow(narrow(A, r - 2, k, 1), r - 1, k, 1), {r - 2, r - 1});  // [..]
    det = det * piv;
    if (k + 1 == M) break;
    Tensor pv = unsqueeze(unsqueeze(piv, -1), -1);
    Tensor colk = narrow(A, r - 1, k, 1);                            // [.., M, 1]
    Tensor rowk = narrow(A, r - 2, k, 1);                            // [.., 1, M]
    Tensor f = where(eq(pv, 0.0), zeros({}, DType::F64), colk / where(eq(pv, 0.0), ones({}, DType::F64), pv));
    A = where(gt(rows, k), A - f * rowk, A);
  }
  c.set(0, to(det, dt));
}

void window_op(NodeCtx& c, const std::vector<double>& a) {
  c.only_outputs(1);
  double nv = c.scalar_in(0);
  if (!(nv >= 0) || nv > static_cast<double>(c.max_elements())) c.fail("size must be a non-negative number of samples");
  int64_t n = static_cast<int64_t>(nv);
  bool periodic = c.attr_int("periodic", 1) != 0;
  DType dt = require_dtype(static_cast<int>(c.attr_int("output_datatype", 1)), c.where() + " output_datatype");
  HostTensor h(dt, {n});
  double denom = periodic ? static_cast<double>(n) : static_cast<double>(n - 1);
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k)
      v += (k % 2 ? -a[k] : a[k]) * std::cos(2 * kPi * static_cast<double>(k) * static_cast<double>(i) / denom);
    h.set_f64(i, n == 1 ? 1.0 : v);
  }
  c.set(0, from_host(h));
}

// The value of input i, or OnnxUnsupported naming the data-dependent output shape.
HostTensor decided(const NodeCtx& c, size_t i) {
  try {
    return c.const_in(i);
  } catch (const OnnxUnsupported&) {
    // the phrase lets `lathe onnx-test` specialize the model on that input's value
    c.unsupported("dynamic shape input not supported: data-dependent output shape, input " + std::to_string(i) +
                  " must be a constant");
  }
}

void compress_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  HostTensor cond = decided(c, 1);
  if (cond.rank() != 1) c.fail("condition must be 1-D");
  if (!c.has_attr("axis")) x = reshape(x, {shape_numel(x.shape())});
  int ax = c.axis(c.attr_int("axis", 0), x.rank());
  if (!x.shape()[ax].is_const()) c.unsupported("Compress along a symbolic dim");
  int64_t n = x.shape()[ax].value();
  if (cond.numel() > n) c.fail("condition has " + std::to_string(cond.numel()) + " entries for a dim of " + std::to_string(n));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i) if (cond.get_f64(i) != 0) keep.push_back(i);
  HostTensor idx(DType::I64, {static_cast<int64_t>(keep.size())});
  for (size_t i = 0; i < keep.size(); ++i) idx.set_i64(static_cast<int64_t>(i), keep[i]);
  c.set(0, index_select(x, ax, from_host(idx)));
}

void nonzero_op(NodeCtx& c) {
  c.only_outputs(1);
  HostTensor x = decided(c, 0);
  int64_t r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i) if (x.get_f64(i) != 0) hits.push_back(i);
  HostTensor out(DType::I64, {r, static_cast<int64_t>(hits.size())});
  for (size_t j = 0; j < hits.size(); ++j) {
    int64_t rem = hits[j];
    for (int64_t d = r - 1; d >= 0; --d) {
      int64_t n = x.shape()[d];
      out.set_i64(d * static_cast<int64_t>(hits.size()) + static_cast<int64_t>(j), rem % n);
      rem /= n;
    }
  }
  c.set(0, from_host(out));
}

void unique_op(NodeCtx& c) {
  HostTensor x = decided(c, 0);
  bool sorted = c.attr_int("sorted", 1) != 0;
  bool has_axis = c.has_attr("axis");
  std::vector<int64_t> shape = x.shape();
  if (!has_axis) shape = {x.numel()};
  int r = static_cast<int>(shape.size());
  int ax = has_axis ? c.axis(c.attr_int("axis", 0), r) : 0;
  int64_t outer = 1, n = shape[ax], inner = 1;
  for (int d = 0; d < ax; ++d) outer *= shape[d];
  for (int d = ax + 1; d < r; ++d) inner *= shape[d];
  bool fl = is_float(x.dtype());
  // slice s as a key: its elements in (outer, inner) order
  auto key = [&](int64_t s) {
    std::vector<std::pair<double, int64_t>> k;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t e = (o * n + s) * inner + i;
        k.emplace_back(fl ? x.get_f64(e) : 0.0, fl ? 0 : x.get_i64(e));
      }
    return k;
  };
  std::map<std::vector<std::pair<double, int64_t>>, int64_t> first;  // key -> first slice
  std::vector<int64_t> order, inverse(static_cast<size_t>(n));
  std::vector<std::vector<std::pair<double, int64_t>>> keys;
  for (int64_t s = 0; s < n; ++s) {
    auto k = key(s);
    if (!first.count(k)) { first[k] = s; order.push_back(s); }
    keys.push_back(std::move(k));
  }
  if (sorted) std::sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return keys[p] < keys[q]; });
  std::map<int64_t, int64_t> slot;  // first slice -> output position
  for (size_t u = 0; u < order.size(); ++u) slot[order[u]] = static_cast<int64_t>(u);
  int64_t U = static_cast<int64_t>(order.size());
  std::vector<int64_t> counts(static_cast<size_t>(U), 0);
  for (int64_t s = 0; s < n; ++s) {
    inverse[s] = slot[first[keys[s]]];
    ++counts[inverse[s]];
  }
  std::vector<int64_t> yshape = shape;
  yshape[ax] = U;
  HostTensor y(x.dtype(), yshape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t u = 0; u < U; ++u)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t src = (o * n + order[u]) * inner + i, dst = (o * U + u) * inner + i;
        if (fl) y.set_f64(dst, x.get_f64(src)); else y.set_i64(dst, x.get_i64(src));
      }
  auto vec = [](const std::vector<int64_t>& v) {
    HostTensor h(DType::I64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) h.set_i64(static_cast<int64_t>(i), v[i]);
    return from_host(h);
  };
  c.set(0, from_host(y));
  if (c.wants(1)) c.set(1, vec(order));
  if (c.wants(2)) c.set(2, vec(inverse));
  if (c.wants(3)) c.set(3, vec(counts));
}

// NonMaxSuppression as ONNX Runtime computes it: per batch and class, boxes scoring above
// score_threshold in descending score order (ties: lower index first), each kept unless
// its IoU with a kept box exceeds iou_threshold, at most max_output_boxes_per_class.
void nms_op(NodeCtx& c) {
  c.only_outputs(1);
  HostTensor boxes = decided(c, 0), scores = decided(c, 1);
  if (boxes.rank() != 3 || boxes.shape()[2] != 4) c.fail("boxes must be [batch, boxes, 4], got " + boxes.shape_string());
  if (scores.rank() != 3 || scores.shape()[0] != boxes.shape()[0] || scores.shape()[2] != boxes.shape()[1])
    c.fail("scores must be [batch, classes, boxes], got " + scores.shape_string());
  int64_t max_out = c.has(2) ? decided(c, 2).get_i64(0) : 0;
  double iou_t = c.has(3) ? decided(c, 3).get_f64(0) : 0.0;
  bool has_st = c.has(4);
  double score_t = has_st ? decided(c, 4).get_f64(0) : 0.0;
  if (iou_t < 0 || iou_t > 1) c.fail("iou_threshold must be in [0, 1]");
  bool center = c.attr_int("center_point_box", 0) != 0;
  int64_t B = boxes.shape()[0], N = boxes.shape()[1], C = scores.shape()[1];
  auto corners = [&](int64_t b, int64_t i, double* y1, double* x1, double* y2, double* x2) {
    const int64_t o = (b * N + i) * 4;
    double a = boxes.get_f64(o), bb = boxes.get_f64(o + 1), cc = boxes.get_f64(o + 2), d = boxes.get_f64(o + 3);
    if (center) {  // [x_center, y_center, width, height]
      *x1 = a - cc / 2; *x2 = a + cc / 2; *y1 = bb - d / 2; *y2 = bb + d / 2;
    } else {
      *y1 = std::min(a, cc); *y2 = std::max(a, cc); *x1 = std::min(bb, d); *x2 = std::max(bb, d);
    }
  };
  auto suppress = [&](int64_t b, int64_t i, int64_t j) {
    double ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
    corners(b, i, &ay1, &ax1, &ay2, &ax2);
    corners(b, j, &by1, &bx1, &by2, &bx2);
    double ia = std::max(0.0, std::min(ay2, by2) - std::max(ay1, by1)) * std::max(0.0, std::min(ax2, bx2) - std::max(ax1, bx1));
    double a1 = (ay2 - ay1) * (ax2 - ax1), a2 = (by2 - by1) * (bx2 - bx1);
    if (ia <= 0 || a1 <= 0 || a2 <= 0) return false;
    return ia / (a1 + a2 - ia) > iou_t;
  };
  std::vector<std::array<int64_t, 3>> sel;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < C; ++k) {
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < N; ++i)
        if (!has_st || scores.get_f64((b * C + k) * N + i) > score_t) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) {
        return scores.get_f64((b * C + k) * N + p) > scores.get_f64((b * C + k) * N + q);
      });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool drop = false;
        for (int64_t j : kept) drop = drop || suppress(b, i, j);
        if (!drop) kept.push_back(i);
      }
      for (int64_t i : kept) sel.push_back({b, k, i});
    }
  HostTensor out(DType::I64, {static_cast<int64_t>(sel.size()), 3});
  for (size_t r = 0; r < sel.size(); ++r)
    for (int k = 0; k < 3; ++k) out.set_i64(static_cast<int64_t>(r * 3 + k), sel[r][k]);
  c.set(0, from_host(out));
}

}  // namespace

void add_extra_ops(OpTable& t) {
  t["NonMaxSuppression"] = nms_op;
  unary_float(t, "Atan", atan_t);
  unary_float(t, "Asin", [](const Tensor& x) { return atan_t(x / sqrt(1.0 - x * x)); });
  unary_float(t, "Acos", [](const Tensor& x) { return atan_t(sqrt((1.0 - x) / (1.0 + x))) * 2.0; });
  t["EyeLike"] = eye_like_op;
  t["LRN"] = lrn_op;
  t["BitShift"] = bitshift_op;
  t["ReverseSequence"] = reverse_sequence_op;
  t["Det"] = det_op;
  t["HannWindow"] = [](NodeCtx& c) { window_op(c, {0.5, 0.5}); };
  t["HammingWindow"] = [](NodeCtx& c) { window_op(c, {25.0 / 46.0, 1.0 - 25.0 / 46.0}); };
  t["BlackmanWindow"] = [](NodeCtx& c) { window_op(c, {0.42, 0.5, 0.08}); };
  // random sampling: no reference could check the values, and no exported inference model
  // needs it (Dropout in training mode is the same case, lower_shape.cpp)
  for (const char* op : {"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Multinomial"})
    t[op] = [op](NodeCtx& c) {
      c.unsupported(std::string(op) + " draws random samples (training-mode randomness; Lathe imports no random-number ops)");
    };
  t["Compress"] = compress_op;
  t["NonZero"] = nonzero_op;
  t["Unique"] = unique_op;
}

}  // namespace lathe::onnx_import
