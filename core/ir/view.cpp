// view.cpp — view builders and composition.
#include "core/ir/view.h"

#include "core/ir/diag.h"

namespace lathe {

ViewSpec ViewSpec::contiguous(const Shape& s) {
  ViewSpec v;
  v.shape = s;
  v.strides = contiguous_strides(s);
  v.offset = 0;
  return v;
}

bool ViewSpec::is_contiguous_of(const Shape& input_shape) const {
  if (has_mask() || !(offset == SymInt(0)) || shape.size() != input_shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != input_shape[i]) return false;
  auto cs = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != SymInt(1) && strides[i] != cs[i]) return false;
  return true;
}

static std::string syms(const std::vector<SymInt>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? "," : "") + v[i].to_string();
  return r + "]";
}

std::string ViewSpec::to_string() const {
  std::string r = "shape=" + syms(shape) + " strides=" + syms(strides) + " offset=" + offset.to_string();
  if (has_mask()) {
    r += " mask=[";
    for (size_t i = 0; i < mask.size(); ++i)
      r += (i ? "," : "") + std::string("[") + mask[i].first.to_string() + "," + mask[i].second.to_string() + "]";
    r += "]";
  }
  return r;
}

size_t ViewSpec::hash() const {
  size_t h = offset.hash();
  auto mix = [&](size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (auto& d : shape) mix(d.hash());
  for (auto& d : strides) mix(d.hash() * 31);
  for (auto& m : mask) { mix(m.first.hash() * 7); mix(m.second.hash() * 13); }
  return h;
}

bool operator==(const ViewSpec& a, const ViewSpec& b) {
  return a.shape == b.shape && a.strides == b.strides && a.offset == b.offset && a.mask == b.mask;
}

ViewSpec view_permute(const ViewSpec& v, const std::vector<int>& perm) {
  ViewSpec r;
  r.offset = v.offset;
  for (int p : perm) {
    r.shape.push_back(v.shape[p]);
    r.strides.push_back(v.strides[p]);
    if (v.has_mask()) r.mask.push_back(v.mask[p]);
  }
  return r;
}

ViewSpec view_expand(const ViewSpec& v, const Shape& new_shape) {
  ViewSpec r = v;
  for (size_t i = 0; i < new_shape.size(); ++i) {
    if (v.shape[i] != new_shape[i]) {
      LATHE_CHECK(v.shape[i] == SymInt(1), "view_expand: only size-1 dims can expand");
      r.shape[i] = new_shape[i];
      r.strides[i] = 0;
      if (r.has_mask()) {
        // a broadcast dim is valid everywhere if its single element was valid
        auto [lo, hi] = v.mask[i];
        bool valid = !(lo.is_const() && hi.is_const()) || (lo.value() <= 0 && hi.value() > 0);
        r.mask[i] = valid ? std::pair<SymInt, SymInt>{0, new_shape[i]} : std::pair<SymInt, SymInt>{0, 0};
      }
    }
  }
  return r;
}

ViewSpec view_shrink(const ViewSpec& v, const std::vector<std::pair<SymInt, SymInt>>& ranges) {
  ViewSpec r = v;
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto [b, e] = ranges[i];
    r.offset = r.offset + b * v.strides[i];
    r.shape[i] = e - b;
    if (r.has_mask()) r.mask[i] = {smax(v.mask[i].first - b, 0), smin(v.mask[i].second - b, e - b)};
  }
  return r;
}

ViewSpec view_pad(const ViewSpec& v, const std::vector<std::pair<SymInt, SymInt>>& ba) {
  ViewSpec r = v;
  if (!r.has_mask())
    for (auto& d : v.shape) r.mask.push_back({0, d});
  for (size_t i = 0; i < ba.size(); ++i) {
    auto [b, a] = ba[i];
    r.offset = r.offset - b * v.strides[i];
    r.shape[i] = v.shape[i] + b + a;
    r.mask[i] = {r.mask[i].first + b, r.mask[i].second + b};
  }
  return r;
}

ViewSpec view_flip(const ViewSpec& v, const std::vector<int>& axes) {
  ViewSpec r = v;
  for (int a : axes) {
    r.offset = r.offset + (v.shape[a] - 1) * v.strides[a];
    r.strides[a] = -v.strides[a];
    if (r.has_mask()) r.mask[a] = {v.shape[a] - v.mask[a].second, v.shape[a] - v.mask[a].first};
  }
  return r;
}

std::optional<ViewSpec> view_reshape(const ViewSpec& v, const Shape& new_shape) {
  if (v.has_mask()) return std::nullopt;
  // drop size-1 dims; then merge runs of old dims that are contiguous with each other,
  // and split them into new dims.
  std::vector<std::pair<SymInt, SymInt>> dims;  // (size, stride), no size-1
  for (size_t i = 0; i < v.shape.size(); ++i)
    if (v.shape[i] != SymInt(1)) dims.push_back({v.shape[i], v.strides[i]});
  ViewSpec r;
  r.shape = new_shape;
  r.offset = v.offset;
  r.strides.assign(new_shape.size(), 0);
  size_t j = 0;  // index into dims
  size_t i = 0;  // index into new_shape
  while (i < new_shape.size()) {
    if (new_shape[i] == SymInt(1)) { r.strides[i] = 0; ++i; continue; }
    if (j >= dims.size()) return std::nullopt;
    // Group new dims [i, i2) and old dims [j, j2) with equal products.
    SymInt pn = new_shape[i], po = dims[j].first;
    size_t i2 = i + 1, j2 = j + 1;
    while (pn != po) {
      if (!pn.is_const() || !po.is_const()) return std::nullopt;
      if (pn.value() < po.value()) {
        if (i2 >= new_shape.size()) return std::nullopt;
        pn = pn * new_shape[i2++];
      } else {
        if (j2 >= dims.size()) return std::nullopt;
        po = po * dims[j2++].first;
      }
    }
    // old dims j..j2 must be mutually contiguous: stride_k = stride_{k+1} * size_{k+1}
    for (size_t k = j; k + 1 < j2; ++k)
      if (dims[k].second != dims[k + 1].second * dims[k + 1].first) return std::nullopt;
    SymInt st = dims[j2 - 1].second;
    for (size_t k = i2; k-- > i;) {
      if (new_shape[k] == SymInt(1)) { r.strides[k] = 0; continue; }
      r.strides[k] = st;
      st = st * new_shape[k];
    }
    i = i2;
    j = j2;
  }
  if (j != dims.size()) return std::nullopt;
  return r;
}

std::optional<ViewSpec> view_compose(const ViewSpec& inner, const ViewSpec& outer) {
  // outer reads inner's output row-major. Express each outer dim d (non-zero stride) as
  // stepping one inner dim j by a multiplier m: stride_d = m * rowmajor_stride(inner.shape)_j.
  const Shape& is = inner.shape;
  size_t ni = is.size(), no = outer.shape.size();
  auto rm = contiguous_strides(is);
  // coordinates of outer.offset in inner's shape (constant shapes only, or zero offset)
  std::vector<SymInt> base(ni, 0);
  if (outer.offset != SymInt(0)) {
    if (!outer.offset.is_const() || !shape_is_const(is)) return std::nullopt;
    int64_t off = outer.offset.value();
    auto isv = shape_values(is);
    int64_t numel = 1;
    for (auto d : isv) numel *= d;
    if (off < 0 || off >= std::max<int64_t>(numel, 1)) return std::nullopt;
    for (size_t j = ni; j-- > 0;) {
      if (isv[j] == 0) return std::nullopt;
      base[j] = off % isv[j];
      off /= isv[j];
    }
  }
  std::vector<int> dim_of(no, -1);
  std::vector<SymInt> mult(no, 0);
  std::vector<int> users(ni, 0);
  for (size_t d = 0; d < no; ++d) {
    const SymInt& s = outer.strides[d];
    if (s == SymInt(0) || outer.shape[d] == SymInt(1)) continue;
    int found = -1;
    SymInt m = 0;
    for (size_t j = ni; j-- > 0;) {
      if (is[j] == SymInt(1)) continue;
      if (s == rm[j]) { found = (int)j; m = 1; break; }
      if (s.is_const() && rm[j].is_const() && rm[j].value() != 0 && s.value() % rm[j].value() == 0) {
        int64_t q = s.value() / rm[j].value();
        // the multiplier must keep us inside dim j (checked below); prefer the innermost j
        // whose next-outer stride does not also divide
        if (is[j].is_const() && std::llabs(q) < is[j].value()) { found = (int)j; m = q; break; }
      }
      if (s == SymInt(-1) * rm[j]) { found = (int)j; m = -1; break; }
    }
    if (found < 0) return std::nullopt;
    dim_of[d] = found;
    mult[d] = m;
    users[found]++;
  }
  // range check: along every inner dim, the coordinate base_j + Σ m_d·i_d must stay in
  // [0, size_j) for all outer indices (constant case), otherwise the outer view wraps
  // across inner dims and is not a per-dim affine map.
  for (size_t j = 0; j < ni; ++j) {
    SymInt lo = base[j], hi = base[j];
    bool all_const = base[j].is_const();
    for (size_t d = 0; d < no; ++d) {
      if (dim_of[d] != (int)j) continue;
      if (!outer.shape[d].is_const() || !mult[d].is_const()) { all_const = false; continue; }
      int64_t span = mult[d].value() * (outer.shape[d].value() - 1);
      if (span < 0) lo = lo + span; else hi = hi + span;
    }
    if (all_const && is[j].is_const()) {
      if (lo.value() < 0 || hi.value() >= is[j].value()) return std::nullopt;
    } else if (users[j] > 1 || !(base[j] == SymInt(0))) {
      return std::nullopt;
    } else {
      // symbolic: a single outer dim with multiplier ±1 spanning at most the inner dim
      for (size_t d = 0; d < no; ++d)
        if (dim_of[d] == (int)j && (!(mult[d] == SymInt(1)) || outer.shape[d] != is[j])) return std::nullopt;
    }
  }
  ViewSpec r;
  r.shape = outer.shape;
  r.offset = inner.offset;
  for (size_t j = 0; j < ni; ++j) r.offset = r.offset + base[j] * inner.strides[j];
  r.strides.resize(no);
  for (size_t d = 0; d < no; ++d)
    r.strides[d] = dim_of[d] < 0 ? SymInt(0) : mult[d] * inner.strides[dim_of[d]];
  // masks: outer's own mask, intersected with inner's mask transported to outer coords
  if (outer.has_mask()) r.mask = outer.mask;
  if (inner.has_mask()) {
    if (!r.has_mask())
      for (auto& d : outer.shape) r.mask.push_back({0, d});
    for (size_t j = 0; j < ni; ++j) {
      auto [lo, hi] = inner.mask[j];
      bool full = lo == SymInt(0) && hi == is[j];
      if (full) continue;
      if (users[j] == 0) {
        // fixed coordinate base_j along j: either always valid or never
        if (!lo.is_const() || !hi.is_const() || !base[j].is_const()) return std::nullopt;
        if (base[j].value() >= lo.value() && base[j].value() < hi.value()) continue;
        for (auto& m : r.mask) m = {0, 0};
        continue;
      }
      if (users[j] > 1) return std::nullopt;
      size_t d = 0;
      while (dim_of[d] != (int)j) ++d;
      if (mult[d] == SymInt(1)) {
        // lo <= base + i < hi  =>  i in [lo-base, hi-base)
        r.mask[d] = {smax(r.mask[d].first, lo - base[j]), smin(r.mask[d].second, hi - base[j])};
      } else if (mult[d] == SymInt(-1)) {
        // lo <= base - i < hi  =>  i in (base-hi, base-lo]
        r.mask[d] = {smax(r.mask[d].first, base[j] - hi + 1), smin(r.mask[d].second, base[j] - lo + 1)};
      } else {
        return std::nullopt;
      }
    }
  }
  return r;
}

int64_t ConcreteView::index_of(const std::vector<int64_t>& idx) const {
  int64_t off = offset;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!mask.empty() && (idx[d] < mask[d].first || idx[d] >= mask[d].second)) return -1;
    off += idx[d] * strides[d];
  }
  return off;
}

ConcreteView view_eval(const ViewSpec& v, const Bindings& b) {
  ConcreteView c;
  c.shape = shape_eval(v.shape, b);
  c.strides = shape_eval(v.strides, b);
  c.offset = shape_eval({v.offset}, b)[0];
  for (auto& m : v.mask) c.mask.push_back({*m.first.eval(b), *m.second.eval(b)});
  return c;
}

}  // namespace lathe
