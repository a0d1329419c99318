// autodiff_view.cpp — the adjoint of a View: scatter the output gradient back onto the
// input's row-major elements, using only constructible views (shrink, pad, flip, permute,
// reshape) and reductions.
//
// A view reads in_flat[offset + Σ i_d·s_d] inside its mask. The adjoint, step by step:
//  1. positions outside the mask read nothing: shrink g to the mask box;
//  2. stride-0 (broadcast) axes: Reduce add; size-1 axes: drop;
//  3. negative strides: flip g along them and make the stride positive;
//  4. sort axes by decreasing stride (a permute of g);
//  5. if that is exactly the input's contiguous layout: reshape, done;
//  6. otherwise (constant sizes only) embed: from the innermost axis outwards, pad each
//     block of length L to the next stride s and merge ([n, s] -> [n·s], keep (n-1)·s + L),
//     then pad by the offset to the input size. This needs s ≥ L for every axis (no two
//     positions read one element). Axes that break it (the window axes of pooling and
//     conv) are unrolled: g is split along them, each piece embedded at its own offset,
//     and the pieces summed. The smaller axis of a conflicting pair is the one unrolled.
#include <algorithm>
#include <numeric>

#include "core/frontend/autodiff.h"
#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

namespace {

struct Dim {
  int64_t size, stride;
};

constexpr int64_t kMaxUnrolled = 4096;

// Embeds t (shape = sizes of dims, sorted by decreasing stride, non-overlapping) into a
// flat tensor of `total` elements at `offset`.
Tensor embed(const Tensor& t, const std::vector<Dim>& dims, int64_t offset, int64_t total) {
  Shape s;
  for (auto& d : dims) s.push_back(d.size);
  s.push_back(1);
  Tensor cur = reshape(t, s);
  int64_t L = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    const Dim& d = dims[k];
    int last = cur.rank() - 1;
    if (d.stride > L) {
      std::vector<std::pair<SymInt, SymInt>> pads(cur.rank(), {0, 0});
      pads[last] = {0, d.stride - L};
      cur = pad(cur, pads);
    }
    int64_t step = std::max(d.stride, L);
    Shape merged(cur.shape().begin(), cur.shape().end() - 2);
    merged.push_back(d.size * step);
    cur = reshape(cur, merged);
    int64_t newL = (d.size - 1) * step + L;
    if (newL < d.size * step) cur = narrow(cur, -1, 0, newL);
    L = newL;
  }
  LATHE_CHECK(offset >= 0 && offset + L <= total, "view_backward: embedded view leaves its input");
  return pad(reshape(cur, {L}), {{offset, total - offset - L}});
}

}  // namespace

Tensor view_backward(const Tensor& g_in, const ViewSpec& v, const Shape& in_shape) {
  Tensor g = g_in;
  int r = static_cast<int>(v.shape.size());
  LATHE_CHECK(g.shape() == v.shape, "view_backward: gradient shape differs from the view's");
  std::vector<SymInt> sizes(v.shape), strides(v.strides);
  SymInt offset = v.offset;
  // 1. mask
  if (v.has_mask()) {
    std::vector<std::pair<SymInt, SymInt>> box;
    for (int d = 0; d < r; ++d) {
      SymInt lo = smax(v.mask[d].first, 0), hi = smin(v.mask[d].second, sizes[d]);
      if (lo.is_const() && hi.is_const() && hi.value() <= lo.value()) return zeros(in_shape, g.dtype());
      box.push_back({lo, hi});
    }
    g = Tensor(prim::view(g.node(), view_shrink(ViewSpec::contiguous(g.shape()), box)));
    for (int d = 0; d < r; ++d) {
      offset = offset + box[d].first * strides[d];
      sizes[d] = box[d].second - box[d].first;
    }
  }
  // 2. broadcast axes and size-1 axes
  Axes bcast;
  for (int d = 0; d < r; ++d)
    if (strides[d] == SymInt(0) && sizes[d] != SymInt(1)) bcast.push_back(d);
  if (!bcast.empty()) g = Tensor(prim::reduce(ReduceOp::Add, g.node(), bcast));
  std::vector<SymInt> ks, kst;
  for (int d = 0; d < r; ++d)
    if (strides[d] != SymInt(0) && sizes[d] != SymInt(1)) { ks.push_back(sizes[d]); kst.push_back(strides[d]); }
  g = reshape(g, ks);
  // 3. negative strides
  Axes flips;
  for (size_t d = 0; d < ks.size(); ++d)
    if (kst[d].is_const() && kst[d].value() < 0) {
      flips.push_back(static_cast<int>(d));
      offset = offset + (ks[d] - SymInt(1)) * kst[d];
      kst[d] = -kst[d];
    }
  if (!flips.empty()) g = flip(g, flips);
  // 4. sort by decreasing stride (constant strides; symbolic ones keep their order)
  bool all_const = std::all_of(kst.begin(), kst.end(), [](const SymInt& s) { return s.is_const(); });
  std::vector<int> order(ks.size());
  std::iota(order.begin(), order.end(), 0);
  if (all_const)
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return kst[a].value() > kst[b].value(); });
  g = permute(g, order);
  Shape sorted;
  std::vector<SymInt> sorted_strides;
  for (int o : order) { sorted.push_back(ks[o]); sorted_strides.push_back(kst[o]); }
  // 5. exactly the input's layout?
  SymInt in_numel = shape_numel(in_shape);
  if (offset == SymInt(0) && shape_numel(sorted) == in_numel && sorted_strides == contiguous_strides(sorted))
    return reshape(g, in_shape);
  // 6. general: constant sizes and strides
  bool consts = all_const && offset.is_const() && in_numel.is_const() && shape_is_const(sorted);
  if (!consts)
    fail("grad", "cannot differentiate through the view " + v.to_string() + " of an input " +
                     shape_to_string(in_shape) + ": symbolic strides or sizes (make the shapes concrete)");
  std::vector<Dim> dims;
  for (size_t i = 0; i < sorted.size(); ++i) dims.push_back({sorted[i].value(), sorted_strides[i].value()});
  // choose the axes to unroll, innermost first
  std::vector<bool> unrolled(dims.size(), false);
  auto extent = [&](size_t from) {  // 1 + Σ (n-1)s over kept axes after `from`
    int64_t L = 1;
    for (size_t j = from; j < dims.size(); ++j)
      if (!unrolled[j]) L += (dims[j].size - 1) * dims[j].stride;
    return L;
  };
  for (size_t i = dims.size(); i-- > 0;) {
    while (!unrolled[i] && dims[i].stride < extent(i + 1)) {
      size_t smallest = i;
      for (size_t j = i + 1; j < dims.size(); ++j)
        if (!unrolled[j] && dims[j].size < dims[smallest].size) smallest = j;
      unrolled[smallest] = true;
    }
  }
  int64_t combos = 1;
  for (size_t j = 0; j < dims.size(); ++j)
    if (unrolled[j]) {
      combos *= dims[j].size;
      if (combos > kMaxUnrolled)
        fail("grad", "the view " + v.to_string() + " reads input elements more than " + std::to_string(kMaxUnrolled) +
                         " times over; its gradient would be too large to build");
    }
  std::vector<Dim> kept;
  for (size_t j = 0; j < dims.size(); ++j)
    if (!unrolled[j]) kept.push_back(dims[j]);
  Tensor total;
  for (int64_t c = 0; c < combos; ++c) {
    // decode c into indices of the unrolled axes; select them out of g
    int64_t rest = c, off = offset.value();
    std::vector<std::pair<SymInt, SymInt>> box;
    for (size_t j = dims.size(); j-- > 0;) {
      if (!unrolled[j]) { box.push_back({0, dims[j].size}); continue; }
      int64_t idx = rest % dims[j].size;
      rest /= dims[j].size;
      off += idx * dims[j].stride;
      box.push_back({idx, idx + 1});
    }
    std::reverse(box.begin(), box.end());
    Tensor piece(prim::view(g.node(), view_shrink(ViewSpec::contiguous(g.shape()), box)));
    Tensor e = embed(piece, kept, off, in_numel.value());
    total = total.defined() ? total + e : e;
  }
  return reshape(total, in_shape);
}

}  // namespace lathe
