// shape.cpp — shape composites: reshape, permute, expand, squeeze, slice, pad, concat,
// split, flip, gather/index_select/embedding, one_hot, tril/triu, repeat.
// Almost everything is one View (core/ir/view.h); prim::view folds chains of views.
#include <algorithm>
#include <numeric>

#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

static Tensor make_view(const Tensor& x, const ViewSpec& v) { return Tensor(prim::view(x.node(), v)); }

// ---- reshape family ------------------------------------------------------------------------

Tensor reshape(const Tensor& x, const Shape& shape_in) {
  Shape shape = shape_in;
  SymInt numel = shape_numel(x.shape());
  int infer_at = -1;
  SymInt known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == SymInt(-1)) {
      if (infer_at >= 0) fail("reshape", "only one dim may be -1, got " + shape_to_string(shape_in));
      infer_at = static_cast<int>(i);
    } else if (shape[i].is_const() && shape[i].value() < 0) {
      fail("reshape", "negative size in target shape " + shape_to_string(shape_in));
    } else {
      known = known * shape[i];
    }
  }
  if (infer_at >= 0) {
    if (known.is_const() && numel.is_const()) {
      if (known.value() == 0 || numel.value() % known.value() != 0)
        fail("reshape", "cannot reshape " + x.describe() + " to " + shape_to_string(shape_in) + ": " +
                            std::to_string(numel.value()) + " elements do not divide into " + shape_to_string(shape_in));
      shape[infer_at] = numel.value() / known.value();
    } else {
      shape[infer_at] = floordiv(numel, known);
    }
  }
  if (shape_numel(shape) != numel)
    fail("reshape", "cannot reshape " + x.describe() + " (" + numel.to_string() + " elements) to " +
                        shape_to_string(shape) + " (" + shape_numel(shape).to_string() + " elements)");
  if (shape == x.shape()) return x;
  NodeRef n = x.node();
  if (n->op == Op::View) {
    if (auto r = view_reshape(*n->attrs.view, shape)) return Tensor(prim::view(n->inputs[0], *r));
    n = prim::copy(n);  // the view cannot be reshaped in place: materialize it first
  }
  return Tensor(prim::view(n, ViewSpec::contiguous(shape)));
}

Tensor view(const Tensor& x, const Shape& shape) { return reshape(x, shape); }

Tensor contiguous(const Tensor& x) { return x.node()->op == Op::View ? Tensor(prim::copy(x.node())) : x; }

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  if (static_cast<int>(perm.size()) != x.rank())
    fail("permute", "permutation has " + std::to_string(perm.size()) + " entries for a tensor " + x.describe() +
                        " of rank " + std::to_string(x.rank()));
  std::vector<int> p;
  std::vector<bool> seen(perm.size());
  for (int a : perm) {
    int n = normalize_axis(a, x.rank(), "permute");
    if (seen[n]) fail("permute", "axis " + std::to_string(a) + " appears twice in the permutation");
    seen[n] = true;
    p.push_back(n);
  }
  return make_view(x, view_permute(ViewSpec::contiguous(x.shape()), p));
}

Tensor transpose(const Tensor& x, int a, int b) {
  std::vector<int> p(x.rank());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[normalize_axis(a, x.rank(), "transpose")], p[normalize_axis(b, x.rank(), "transpose")]);
  return permute(x, p);
}

Tensor t(const Tensor& x) {
  if (x.rank() > 2) fail("t", "expects a tensor of rank <= 2, got " + x.describe());
  return x.rank() < 2 ? x : transpose(x, 0, 1);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (static_cast<int>(shape.size()) < x.rank())
    fail("expand", "target " + shape_to_string(shape) + " has fewer dims than " + x.describe());
  size_t lead = shape.size() - x.rank();
  Shape src(lead, 1);
  src.insert(src.end(), x.shape().begin(), x.shape().end());
  Shape target = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == SymInt(-1)) {
      if (i < lead) fail("expand", "-1 is not allowed for a new leading dim in " + shape_to_string(shape));
      target[i] = src[i];
    } else if (src[i] != target[i] && src[i] != SymInt(1)) {
      fail("expand", "cannot expand " + x.describe() + " to " + shape_to_string(shape) + ": dim " + std::to_string(i) +
                         " has size " + src[i].to_string() + " (only size-1 dims can expand)");
    }
  }
  Tensor r = lead ? reshape(x, src) : x;
  if (target == r.shape()) return r;
  return make_view(r, view_expand(ViewSpec::contiguous(src), target));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

Tensor squeeze(const Tensor& x, Axes axes) {
  Shape s;
  if (axes.empty()) {
    for (auto& d : x.shape()) if (d != SymInt(1)) s.push_back(d);
    return reshape(x, s);
  }
  Axes ax = normalize_axes(axes, x.rank(), "squeeze");
  for (int d = 0; d < x.rank(); ++d) {
    bool drop = std::binary_search(ax.begin(), ax.end(), d) && x.shape()[d] == SymInt(1);
    if (!drop) s.push_back(x.shape()[d]);  // like PyTorch, a non-1 dim named in axes stays
  }
  return reshape(x, s);
}

Tensor unsqueeze(const Tensor& x, int axis) {
  int a = normalize_axis(axis, x.rank() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + a, SymInt(1));
  return reshape(x, s);
}

Tensor flatten(const Tensor& x, int start, int end) {
  if (x.rank() == 0) return reshape(x, {1});
  int s = normalize_axis(start, x.rank(), "flatten"), e = normalize_axis(end, x.rank(), "flatten");
  if (s > e) fail("flatten", "start dim " + std::to_string(start) + " comes after end dim " + std::to_string(end));
  Shape r(x.shape().begin(), x.shape().begin() + s);
  SymInt m = 1;
  for (int i = s; i <= e; ++i) m = m * x.shape()[i];
  r.push_back(m);
  r.insert(r.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, r);
}

Tensor unflatten(const Tensor& x, int axis, const Shape& sizes) {
  int a = normalize_axis(axis, x.rank(), "unflatten");
  Shape r(x.shape().begin(), x.shape().begin() + a);
  Shape part = sizes;
  int infer = -1;
  SymInt known = 1;
  for (size_t i = 0; i < part.size(); ++i)
    if (part[i] == SymInt(-1)) infer = static_cast<int>(i); else known = known * part[i];
  if (infer >= 0) part[infer] = floordiv(x.shape()[a], known);
  if (shape_numel(part) != x.shape()[a])
    fail("unflatten", "sizes " + shape_to_string(sizes) + " do not multiply to dim " + std::to_string(axis) +
                          " of " + x.describe());
  r.insert(r.end(), part.begin(), part.end());
  r.insert(r.end(), x.shape().begin() + a + 1, x.shape().end());
  return reshape(x, r);
}

// ---- slicing ---------------------------------------------------------------------------------

Tensor narrow(const Tensor& x, int axis, SymInt start, SymInt length) {
  int a = normalize_axis(axis, x.rank(), "narrow");
  SymInt n = x.shape()[a];
  if (start.is_const() && length.is_const() && n.is_const() &&
      (start.value() < 0 || length.value() < 0 || start.value() + length.value() > n.value()))
    fail("narrow", "range [" + start.to_string() + ", " + (start + length).to_string() + ") is outside dim " +
                       std::to_string(axis) + " of " + x.describe());
  std::vector<std::pair<SymInt, SymInt>> ranges;
  for (int d = 0; d < x.rank(); ++d) ranges.push_back(d == a ? std::pair{start, start + length} : std::pair{SymInt(0), x.shape()[d]});
  if (start == SymInt(0) && length == n) return x;
  return make_view(x, view_shrink(ViewSpec::contiguous(x.shape()), ranges));
}

Tensor select(const Tensor& x, int axis, int64_t index) {
  int a = normalize_axis(axis, x.rank(), "select");
  SymInt n = x.shape()[a];
  SymInt i = index;
  if (index < 0) i = n + SymInt(index);
  if (n.is_const() && (i.value() < 0 || i.value() >= n.value()))
    fail("select", "index " + std::to_string(index) + " is out of range for dim " + std::to_string(axis) + " of " +
                       x.describe());
  return squeeze(narrow(x, a, i, 1), {a});
}

Tensor slice(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  int a = normalize_axis(axis, x.rank(), "slice");
  if (step == 0) fail("slice", "step must be non-zero");
  SymInt n = x.shape()[a];
  if (!n.is_const()) {
    // symbolic dim: positive steps with Python bounds, no clamping beyond the end
    if (step < 0) fail("slice", "negative steps need a constant dim, got " + n.to_string() + " in " + x.describe());
    SymInt b = !start ? SymInt(0) : *start < 0 ? smax(n + SymInt(*start), 0) : smin(SymInt(*start), n);
    SymInt e = !stop ? n : *stop < 0 ? smax(n + SymInt(*stop), 0) : smin(SymInt(*stop), n);
    if (step == 1) return narrow(x, a, b, e - b);
    ViewSpec v = ViewSpec::contiguous(x.shape());
    v.offset = b * v.strides[a];
    v.shape[a] = floordiv(smax(e - b, 0) + SymInt(step - 1), SymInt(step));
    v.strides[a] = v.strides[a] * SymInt(step);
    return make_view(x, v);
  }
  int64_t len = n.value();
  auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
  int64_t b, e;
  if (step > 0) {
    b = start ? clampi(*start < 0 ? *start + len : *start, 0, len) : 0;
    e = stop ? clampi(*stop < 0 ? *stop + len : *stop, 0, len) : len;
  } else {
    b = start ? clampi(*start < 0 ? *start + len : *start, -1, len - 1) : len - 1;
    e = stop ? clampi(*stop < 0 ? *stop + len : *stop, -1, len - 1) : -1;
  }
  int64_t count = step > 0 ? (e > b ? (e - b + step - 1) / step : 0) : (b > e ? (b - e + (-step) - 1) / (-step) : 0);
  if (step == 1) return narrow(x, a, b, count);
  ViewSpec v = ViewSpec::contiguous(x.shape());
  if (count > 0) v.offset = SymInt(b) * v.strides[a];
  v.shape[a] = count;
  v.strides[a] = v.strides[a] * SymInt(step);
  return make_view(x, v);
}

// ---- pad, concat, split, flip ------------------------------------------------------------

Tensor pad(const Tensor& x, const std::vector<std::pair<SymInt, SymInt>>& pads, Scalar value) {
  if (static_cast<int>(pads.size()) > x.rank())
    fail("pad", std::to_string(pads.size()) + " (before, after) pairs given for a tensor " + x.describe() +
                    " of rank " + std::to_string(x.rank()));
  ProvenanceScope ps("pad");
  // negative amounts crop first
  std::vector<std::pair<SymInt, SymInt>> crop, grow;
  bool any_crop = false, any_grow = false;
  for (int d = 0; d < x.rank(); ++d) {
    SymInt b = d < (int)pads.size() ? pads[d].first : SymInt(0), a = d < (int)pads.size() ? pads[d].second : SymInt(0);
    bool nb = b.is_const() && b.value() < 0, na = a.is_const() && a.value() < 0;
    crop.push_back({nb ? -b : SymInt(0), x.shape()[d] - (na ? -a : SymInt(0))});
    grow.push_back({nb ? SymInt(0) : b, na ? SymInt(0) : a});
    any_crop |= nb || na;
    any_grow |= grow.back().first != SymInt(0) || grow.back().second != SymInt(0);
  }
  Tensor r = x;
  if (any_crop) {
    for (int d = 0; d < x.rank(); ++d)
      if (crop[d].second.is_const() && crop[d].second.value() < crop[d].first.value())
        fail("pad", "negative padding crops more than dim " + std::to_string(d) + " of " + x.describe());
    r = make_view(r, view_shrink(ViewSpec::contiguous(r.shape()), crop));
  }
  if (!any_grow) return r;
  Tensor padded = make_view(r, view_pad(ViewSpec::contiguous(r.shape()), grow));
  bool zero = value.is_float ? value.f == 0 : value.i == 0;
  if (zero) return padded;
  Tensor inside = make_view(ones(r.shape(), DType::Bool), view_pad(ViewSpec::contiguous(r.shape()), grow));
  return where(inside, padded, full({}, value, r.dtype()));
}

Tensor concat(const std::vector<Tensor>& parts, int axis) {
  if (parts.empty()) fail("concat", "needs at least one tensor");
  int rank = parts[0].rank();
  int a = normalize_axis(axis, rank, "concat");
  DType dt = parts[0].dtype();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].rank() != rank)
      fail("concat", "tensor " + std::to_string(i) + " " + parts[i].describe() + " has rank " +
                         std::to_string(parts[i].rank()) + ", expected " + std::to_string(rank) + " like " + parts[0].describe());
    for (int d = 0; d < rank; ++d)
      if (d != a && parts[i].shape()[d] != parts[0].shape()[d])
        fail("concat", "tensor " + std::to_string(i) + " " + parts[i].describe() + " differs from " + parts[0].describe() +
                           " in dim " + std::to_string(d) + " (only the concat axis " + std::to_string(axis) + " may differ)");
    dt = promote(dt, parts[i].dtype());
  }
  if (parts.size() == 1) return to(parts[0], dt);
  ProvenanceScope ps("concat");
  SymInt total = 0;
  for (auto& p : parts) total = total + p.shape()[a];
  Tensor acc;
  SymInt off = 0;
  for (auto& p : parts) {
    std::vector<std::pair<SymInt, SymInt>> pads(rank, {0, 0});
    pads[a] = {off, total - off - p.shape()[a]};
    off = off + p.shape()[a];
    Tensor piece = pad(to(p, dt), pads);
    acc = acc.defined() ? acc + piece : piece;
  }
  return acc;
}

Tensor stack(const std::vector<Tensor>& parts, int axis) {
  if (parts.empty()) fail("stack", "needs at least one tensor");
  int a = normalize_axis(axis, parts[0].rank() + 1, "stack");
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i].shape() != parts[0].shape())
      fail("stack", "tensor " + std::to_string(i) + " " + parts[i].describe() + " differs in shape from " + parts[0].describe());
  ProvenanceScope ps("stack");
  std::vector<Tensor> u;
  for (auto& p : parts) u.push_back(unsqueeze(p, a));
  return concat(u, a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  int a = normalize_axis(axis, x.rank(), "split");
  int64_t n = detail::const_dim(x.shape()[a], "split", "the split dim");
  int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) fail("split", "negative part size " + std::to_string(s));
    total += s;
  }
  if (total != n)
    fail("split", "part sizes add up to " + std::to_string(total) + " but dim " + std::to_string(axis) + " of " +
                      x.describe() + " has " + std::to_string(n));
  std::vector<Tensor> r;
  int64_t off = 0;
  for (auto s : sizes) { r.push_back(narrow(x, a, off, s)); off += s; }
  return r;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int axis) {
  int a = normalize_axis(axis, x.rank(), "split");
  int64_t n = detail::const_dim(x.shape()[a], "split", "the split dim");
  if (size <= 0) fail("split", "part size must be positive, got " + std::to_string(size));
  std::vector<int64_t> sizes;
  for (int64_t off = 0; off < n; off += size) sizes.push_back(std::min(size, n - off));
  return split(x, sizes, a);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int axis) {
  int a = normalize_axis(axis, x.rank(), "chunk");
  int64_t n = detail::const_dim(x.shape()[a], "chunk", "the chunked dim");
  if (chunks <= 0) fail("chunk", "number of chunks must be positive, got " + std::to_string(chunks));
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, 1), a);
}

Tensor flip(const Tensor& x, Axes axes) {
  Axes ax = normalize_axes(axes, x.rank(), "flip");
  if (ax.empty()) return x;
  return make_view(x, view_flip(ViewSpec::contiguous(x.shape()), ax));
}

// ---- gathers -----------------------------------------------------------------------------------

static void check_index(const Tensor& idx, const char* op) {
  if (!is_int(idx.dtype())) fail(op, "index must be an integer tensor, got " + idx.describe());
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  check_index(index, "gather");
  if (index.rank() != x.rank())
    fail("gather", "index " + index.describe() + " must have the rank of the data " + x.describe());
  int a = normalize_axis(axis, x.rank(), "gather");
  std::vector<std::pair<SymInt, SymInt>> crop;
  bool need = false;
  for (int d = 0; d < x.rank(); ++d) {
    SymInt xi = x.shape()[d], ii = index.shape()[d];
    if (d == a || xi == ii) { crop.push_back({0, xi}); continue; }
    if (!xi.is_const() || !ii.is_const() || ii.value() > xi.value())
      fail("gather", "index " + index.describe() + " is larger than data " + x.describe() + " in dim " + std::to_string(d));
    crop.push_back({0, ii});
    need = true;
  }
  Tensor src = need ? make_view(x, view_shrink(ViewSpec::contiguous(x.shape()), crop)) : x;
  return Tensor(prim::take(src.node(), index.node(), a));
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  check_index(index, "index_select");
  if (index.rank() != 1) fail("index_select", "index must be 1-D, got " + index.describe());
  int a = normalize_axis(axis, x.rank(), "index_select");
  ProvenanceScope ps("index_select");
  Shape s(x.rank(), 1);
  s[a] = index.shape()[0];
  Shape full_shape = x.shape();
  full_shape[a] = index.shape()[0];
  Tensor idx = expand(reshape(index, s), full_shape);
  return Tensor(prim::take(x.node(), idx.node(), a));
}

Tensor embedding(const Tensor& index, const Tensor& weight) {
  check_index(index, "embedding");
  if (weight.rank() != 2) fail("embedding", "weight must be [num_embeddings, dim], got " + weight.describe());
  ProvenanceScope ps("embedding");
  Tensor flat = reshape(index, {-1});
  Tensor rows = index_select(weight, 0, flat);
  Shape s = index.shape();
  s.push_back(weight.shape()[1]);
  return reshape(rows, s);
}

Tensor one_hot(const Tensor& index, int64_t num_classes, DType dtype) {
  check_index(index, "one_hot");
  if (num_classes <= 0) fail("one_hot", "num_classes must be positive, got " + std::to_string(num_classes));
  ProvenanceScope ps("one_hot");
  Shape s = index.shape();
  s.push_back(num_classes);
  Tensor cls(prim::index(DType::I64, s, static_cast<int>(s.size()) - 1));
  Tensor idx = expand(unsqueeze(to(index, DType::I64), -1), s);
  return to(eq(idx, cls), dtype);
}

static Tensor tri(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  if (x.rank() < 2) fail(op, "expects a tensor of rank >= 2, got " + x.describe());
  ProvenanceScope ps(op);
  Shape s{x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]};
  Tensor row(prim::index(DType::I64, s, 0)), col(prim::index(DType::I64, s, 1));
  Tensor d = col - row;
  Tensor keep = lower ? le(d, Scalar(diagonal)) : ge(d, Scalar(diagonal));
  return where(keep, x, zeros({}, x.dtype()));
}
Tensor tril(const Tensor& x, int64_t diagonal) { return tri(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return tri(x, diagonal, false, "triu"); }

Tensor repeat(const Tensor& x, const std::vector<int64_t>& reps) {
  if (static_cast<int>(reps.size()) < x.rank())
    fail("repeat", std::to_string(reps.size()) + " repeat counts given for " + x.describe() + " (need at least its rank)");
  for (auto r : reps) if (r < 0) fail("repeat", "negative repeat count " + std::to_string(r));
  ProvenanceScope ps("repeat");
  Shape src(reps.size() - x.rank(), 1);
  src.insert(src.end(), x.shape().begin(), x.shape().end());
  Shape inter, expanded, out;
  for (size_t d = 0; d < reps.size(); ++d) {
    inter.push_back(1); inter.push_back(src[d]);
    expanded.push_back(reps[d]); expanded.push_back(src[d]);
    out.push_back(SymInt(reps[d]) * src[d]);
  }
  return reshape(expand(reshape(x, inter), expanded), out);
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& reps) {
  std::vector<int64_t> r = reps;
  while (static_cast<int>(r.size()) < x.rank()) r.insert(r.begin(), 1);
  return repeat(x, r);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, int axis) {
  int a = normalize_axis(axis, x.rank(), "repeat_interleave");
  if (repeats < 0) fail("repeat_interleave", "negative repeat count");
  ProvenanceScope ps("repeat_interleave");
  Tensor u = unsqueeze(x, a + 1);
  Shape e = u.shape();
  e[a + 1] = repeats;
  Shape out = x.shape();
  out[a] = out[a] * SymInt(repeats);
  return reshape(expand(u, e), out);
}

}  // namespace lathe
