// matmul_epilogue.h — the pieces of the packed matmul lowering shared between its files:
// index math over groups of dims, and the epilogue builder (the elementwise work of a kernel
// root computed in the matmul's write-back; see fusable_epilogue in kernel_graph.h).
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

// Coordinates of the row-major flat index `flat` over `dims` of shape `s` (dim -> expr).
std::map<int, ExprRef> group_coords(const std::vector<int>& dims, const Shape& s, ExprRef flat);

// Σ coef · coord over the terms of `a` whose dim is in `coords` (c0 not included).
ExprRef affine_part(const Affine& a, const std::map<int, ExprRef>& coords);

// The value of `root` at its element whose reduce-index is `ridx` (one expr per dim of the
// reduce's shape), with the reduce's value `acc`, lowered as lower_kernel lowers inlined
// nodes (lower_value.h). Intermediate values are bound by Lets
// appended to `lets` (named prefix0, prefix1, …); buffers are read through `param_of` (buffer id -> kernel param).
ExprRef build_epilogue(const KernelGraph& kg, NodeRef root, NodeRef reduce, const std::vector<ExprRef>& ridx,
                       ExprRef acc, const std::unordered_map<int, int>& param_of, std::vector<Stmt>& lets,
                       const std::string& prefix);

}  // namespace lathe::loop
