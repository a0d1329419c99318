// view.h — views: how a View node reads its input without copying.
//
// A View reads its input as the input's row-major (C-order) elements and produces a
// tensor of `shape` where element i = (i inside mask) ? in_flat[offset + Σ i_d·strides_d]
//                                                     : 0.
// Strides may be 0 (broadcast/expand) or negative (flip). The mask, one [lo, hi) range per
// output dim, makes padding a view. Reshape of a contiguous tensor, permute, expand,
// shrink/slice, pad and flip are all ViewSpecs; compose() folds a view of a view into one
// when that is exactly representable, and says no otherwise (the frontend then inserts a
// Copy, and lowering can always index through a chain of views).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/symbolic.h"

namespace lathe {

struct ViewSpec {
  Shape shape;                                   // output shape
  std::vector<SymInt> strides;                   // per output dim, in input elements
  SymInt offset = 0;                             // in input elements
  std::vector<std::pair<SymInt, SymInt>> mask;   // per output dim [lo, hi); empty = all valid

  // The identity view of a tensor of shape s (contiguous, no mask).
  static ViewSpec contiguous(const Shape& s);
  bool is_contiguous_of(const Shape& input_shape) const;  // reads the input exactly as is
  bool has_mask() const { return !mask.empty(); }
  std::string to_string() const;  // "shape=[..] strides=[..] offset=.. mask=[[lo,hi],..]"
  size_t hash() const;
  friend bool operator==(const ViewSpec& a, const ViewSpec& b);
};

// Builders. Each takes the view so far (of some input) and returns the view of the result.
// They assume valid arguments (the frontend checks and reports user errors).
ViewSpec view_permute(const ViewSpec& v, const std::vector<int>& perm);
ViewSpec view_expand(const ViewSpec& v, const Shape& new_shape);  // size-1 dims -> new size
ViewSpec view_shrink(const ViewSpec& v, const std::vector<std::pair<SymInt, SymInt>>& ranges);
ViewSpec view_pad(const ViewSpec& v, const std::vector<std::pair<SymInt, SymInt>>& before_after);
ViewSpec view_flip(const ViewSpec& v, const std::vector<int>& axes);
// Reshape succeeds only when it needs no copy (v unmasked and its strides allow it).
std::optional<ViewSpec> view_reshape(const ViewSpec& v, const Shape& new_shape);

// outer ∘ inner: `outer` reads the (row-major) output of `inner`, whose input has shape
// `inner_input_shape`. Returns one view of that input equivalent to both, or nullopt.
std::optional<ViewSpec> view_compose(const ViewSpec& inner, const ViewSpec& outer);

// Concrete evaluation helpers (interpreter, tests): the input flat index of output
// position `idx`, or -1 when masked out. All dims must be bound.
struct ConcreteView {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
  std::vector<std::pair<int64_t, int64_t>> mask;
  int64_t index_of(const std::vector<int64_t>& idx) const;
};
ConcreteView view_eval(const ViewSpec& v, const Bindings& b);

}  // namespace lathe
