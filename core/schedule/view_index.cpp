// view_index.cpp — view_dim_map: turn a view into per-dimension index math (see header).
#include "core/schedule/view_index.h"

#include <cstdlib>

namespace lathe {

namespace {

bool all_const(const std::vector<SymInt>& v) {
  for (auto& s : v)
    if (!s.is_const()) return false;
  return true;
}

// Symbolic shapes: only permutes/expands of whole dims (offset 0, no mask, strides equal
// to the input's row-major strides) are accepted.
std::optional<ViewDimMap> symbolic_map(const ViewSpec& v, const Shape& in) {
  if (v.has_mask() || v.offset != SymInt(0)) return std::nullopt;
  auto rm = contiguous_strides(in);
  ViewDimMap m;
  m.base.assign(in.size(), 0);
  m.terms.resize(in.size());
  m.lo.assign(v.shape.size(), 0);
  std::vector<bool> used(in.size(), false);
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.strides[d] == SymInt(0) || v.shape[d] == SymInt(1)) continue;
    int found = -1;
    for (size_t j = 0; j < in.size(); ++j)
      if (!used[j] && in[j] != SymInt(1) && v.strides[d] == rm[j] && v.shape[d] == in[j]) { found = (int)j; break; }
    if (found < 0) return std::nullopt;
    used[found] = true;
    m.terms[found].push_back({(int)d, 1});
  }
  return m;
}

}  // namespace

std::optional<ViewDimMap> view_dim_map(const ViewSpec& v, const Shape& in) {
  if (!shape_is_const(in) || !shape_is_const(v.shape) || !all_const(v.strides) || !v.offset.is_const())
    return symbolic_map(v, in);
  for (auto& mk : v.mask)
    if (!mk.first.is_const() || !mk.second.is_const()) return std::nullopt;
  auto isz = shape_values(in);
  auto osz = shape_values(v.shape);
  size_t ni = isz.size(), no = osz.size();
  ViewDimMap m;
  m.base.assign(ni, 0);
  m.terms.resize(ni);
  std::vector<int64_t> lo(no, 0), hi(osz);
  for (size_t d = 0; d < no; ++d) {
    if (v.has_mask()) {
      lo[d] = std::max<int64_t>(0, v.mask[d].first.value());
      hi[d] = std::min<int64_t>(osz[d], v.mask[d].second.value());
    }
    if (lo[d] >= hi[d]) {
      m.all_masked = true;
      return m;
    }
  }
  // low corner: flat input position of the first valid output element
  int64_t flat = v.offset.value();
  for (size_t d = 0; d < no; ++d) flat += lo[d] * v.strides[d].value();
  int64_t numel = 1;
  for (auto s : isz) numel *= s;
  if (flat < 0 || flat >= std::max<int64_t>(numel, 1)) return std::nullopt;
  std::vector<int64_t> rm(ni, 1), base(ni, 0);
  for (size_t j = ni; j-- > 1;) rm[j - 1] = rm[j] * isz[j];
  for (size_t j = ni; j-- > 0;) {
    if (isz[j] == 0) return std::nullopt;
    base[j] = flat % isz[j];
    flat /= isz[j];
  }
  std::vector<int64_t> cmin(base), cmax(base);
  for (size_t d = 0; d < no; ++d) {
    int64_t s = v.strides[d].value(), span = hi[d] - lo[d] - 1;
    if (s == 0 || span == 0) continue;
    int found = -1;
    int64_t mult = 0;
    for (size_t j = ni; j-- > 0;) {  // innermost dim whose stride divides s and stays in range
      if (isz[j] == 1 || s % rm[j] != 0) continue;
      int64_t q = s / rm[j];
      if (std::llabs(q) * span >= isz[j]) continue;
      found = (int)j;
      mult = q;
      break;
    }
    if (found < 0) return std::nullopt;
    m.terms[found].push_back({(int)d, mult});
    if (mult > 0) cmax[found] += mult * span; else cmin[found] += mult * span;
  }
  for (size_t j = 0; j < ni; ++j)
    if (cmin[j] < 0 || cmax[j] >= isz[j]) return std::nullopt;
  for (size_t j = 0; j < ni; ++j) m.base[j] = base[j];
  for (size_t d = 0; d < no; ++d) m.lo.push_back(lo[d]);
  return m;
}

}  // namespace lathe
