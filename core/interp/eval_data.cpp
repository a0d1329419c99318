// eval_data.cpp — the interpreter's source and movement kernels: Const, Index, View
// (strided, masked reads with incremental index math) and Take (gather along an axis).
// Movement never converts values, so View copies raw elements of the dtype's width.
#include <algorithm>
#include <string>

#include "core/interp/kernels.h"

namespace lathe::interp {

namespace {

template <class F>
void visit_width(DType dt, F&& f) {
  switch (dtype_size(dt)) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    default: f(uint64_t{}); return;
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// The valid range of output dim d: [lo, hi) clamped to [0, size).
std::pair<int64_t, int64_t> valid_range(const ConcreteView& v, size_t d) {
  int64_t lo = 0, hi = v.shape[d];
  if (!v.mask.empty()) {
    lo = std::max(lo, v.mask[d].first);
    hi = std::min(hi, v.mask[d].second);
  }
  return {lo, std::max(lo, hi)};
}

}  // namespace

// UserError if any unmasked output element would read outside an input of n elements
// (symbolic views cannot be checked when the graph is built, so they are checked here).
void check_view_bounds(const ConcreteView& v, int64_t n) {
  int64_t lo = v.offset, hi = v.offset;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    auto [a, b] = valid_range(v, d);
    if (a >= b) return;  // nothing is read
    int64_t x = v.strides[d] * a, y = v.strides[d] * (b - 1);
    lo += std::min(x, y);
    hi += std::max(x, y);
  }
  if (lo < 0 || hi >= n)
    throw UserError("View of shape " + shape_str(v.shape) + " reads elements [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "] outside its input of " + std::to_string(n) + " elements");
}

namespace {

// An equivalent view with fewer dims, so the inner loop is as long as possible: size-1
// dims are dropped, masks covering a whole dim are dropped, and neighbouring unmasked dims
// that walk memory contiguously (stride[d] == stride[d+1]·size[d+1]) are merged.
// Returns false when some dim has no valid index (the output is all zeros).
bool simplify_view(const ConcreteView& v, ConcreteView& out) {
  out = ConcreteView{};
  out.offset = v.offset;
  std::vector<bool> masked;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    auto [lo, hi] = valid_range(v, d);
    if (lo >= hi) return false;
    if (v.shape[d] == 1) continue;  // index 0 is valid and moves nothing
    bool m = lo > 0 || hi < v.shape[d];
    size_t k = out.shape.size();
    if (k && !m && !masked.back() && out.strides[k - 1] == v.strides[d] * v.shape[d]) {
      out.shape[k - 1] *= v.shape[d];
      out.strides[k - 1] = v.strides[d];
      out.mask[k - 1] = {0, out.shape[k - 1]};
      continue;
    }
    out.shape.push_back(v.shape[d]);
    out.strides.push_back(v.strides[d]);
    out.mask.push_back({lo, hi});
    masked.push_back(m);
  }
  if (std::find(masked.begin(), masked.end(), true) == masked.end()) out.mask.clear();
  return true;
}

template <class S>
void view_copy(const S* in, S* out, const ConcreteView& v) {
  size_t rank = v.shape.size();
  if (rank == 0) {
    out[0] = in[v.offset];
    return;
  }
  // Outer dims are walked with an odometer that keeps the input offset up to date; the
  // innermost dim is a strided loop over its valid range, zeros elsewhere.
  int64_t n = v.shape[rank - 1], st = v.strides[rank - 1];
  auto [ilo, ihi] = valid_range(v, rank - 1);
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= v.shape[d];
  int64_t base = v.offset;
  for (int64_t r = 0; r < rows; ++r, out += n) {
    bool row_valid = true;
    if (!v.mask.empty())
      for (size_t d = 0; d + 1 < rank; ++d)
        if (idx[d] < v.mask[d].first || idx[d] >= v.mask[d].second) { row_valid = false; break; }
    if (!row_valid) {
      std::fill(out, out + n, S{0});
    } else {
      std::fill(out, out + ilo, S{0});
      const S* p = in + base;
      if (st == 1) std::copy(p + ilo, p + ihi, out + ilo);
      else for (int64_t j = ilo; j < ihi; ++j) out[j] = p[j * st];
      std::fill(out + ihi, out + n, S{0});
    }
    for (size_t d = rank - 1; d-- > 0;) {  // odometer step
      base += v.strides[d];
      if (++idx[d] < v.shape[d]) break;
      base -= v.strides[d] * v.shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

HostTensor kernel_const(NodeRef n, const std::vector<int64_t>& shape) {
  if (n->attrs.data) return n->attrs.data->clone();
  HostTensor out(n->dtype, shape);
  visit_dtype(n->dtype, [&](auto tr) {
    using T = decltype(tr);
    typename T::S v = is_float(n->dtype) ? store_f64<T>(n->attrs.f) : store_i64<T>(n->attrs.i);
    std::fill(out.ptr<typename T::S>(), out.ptr<typename T::S>() + out.numel(), v);
  });
  return out;
}

HostTensor kernel_index(DType dt, const std::vector<int64_t>& shape, int axis) {
  HostTensor out(dt, shape);
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  visit_dtype(dt, [&](auto tr) {
    using T = decltype(tr);
    auto* o = out.ptr<typename T::S>();
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t j = 0; j < n; ++j) {
        typename T::S v = store_i64<T>(j);
        o = std::fill_n(o, inner, v);
      }
  });
  return out;
}

HostTensor kernel_view(const HostTensor& x, const ConcreteView& v) {
  HostTensor out(x.dtype(), v.shape);
  if (out.numel() == 0) return out;
  check_view_bounds(v, x.numel());
  ConcreteView flat;
  if (!simplify_view(v, flat)) return out;  // everything is masked out: zeros
  visit_width(x.dtype(), [&](auto tag) {
    using S = decltype(tag);
    view_copy<S>(x.ptr<S>(), out.ptr<S>(), flat);
  });
  return out;
}

HostTensor kernel_take(const HostTensor& x, const HostTensor& idx, int axis) {
  HostTensor out(x.dtype(), idx.shape());
  const auto& s = idx.shape();
  int64_t outer = 1, inner = 1, n_out = s[axis], n_in = x.shape()[axis];
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  // The index tensor as int64, negative values counted from the end.
  std::vector<int64_t> ix(static_cast<size_t>(idx.numel()));
  visit_dtype(idx.dtype(), [&](auto tr) {
    using T = decltype(tr);
    const auto* p = idx.ptr<typename T::S>();
    for (size_t i = 0; i < ix.size(); ++i) ix[i] = static_cast<int64_t>(T::load(p[i]));
  });
  visit_width(x.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* in = x.ptr<S>();
    S* o = out.ptr<S>();
    const int64_t* k = ix.data();
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t j = 0; j < n_out; ++j)
        for (int64_t i = 0; i < inner; ++i, ++o, ++k) {
          int64_t t = *k < 0 ? *k + n_in : *k;
          *o = (t >= 0 && t < n_in) ? in[(a * n_in + t) * inner + i] : S{0};  // out of range -> 0
        }
  });
  return out;
}

}  // namespace lathe::interp
