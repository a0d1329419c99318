// view_index.h — a view as per-dimension index math: input coordinate j of output position
// idx is base_j + Σ_d mult_dj · (idx_d − lo_d). This is what lets a kernel read a View of
// an inlined (not materialized) node inside the same loop nest. Views that wrap across
// input dims (a reshape that merges or splits non-contiguous dims) have no such form;
// the scheduler materializes their input instead.
#pragma once
#include <optional>
#include <vector>

#include "core/ir/view.h"

namespace lathe {

struct ViewDimMap {
  bool all_masked = false;               // no output position is valid: every read is 0
  std::vector<SymInt> base;              // per input dim: coordinate at the low corner
  std::vector<std::vector<std::pair<int, SymInt>>> terms;  // per input dim: (output dim, mult)
  std::vector<SymInt> lo;                // per output dim: low corner (mask lo, or 0)
};

// nullopt when the view is not per-dimension affine over `input_shape`.
std::optional<ViewDimMap> view_dim_map(const ViewSpec& v, const Shape& input_shape);

}  // namespace lathe
