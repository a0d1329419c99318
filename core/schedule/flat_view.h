// flat_view.h — a View that reads the first elements of its input in order (a reshape of a
// contiguous tensor, or leading rows of one): a library kernel handed the input's buffer
// reads exactly the view. The scheduler lets the fused recurrence (Extern "rnn") read such a
// view from its source buffer, without a copy kernel; lower_one passes that buffer.
#pragma once
#include "core/ir/node.h"

namespace lathe {

inline bool reads_flat_prefix(NodeRef n) {
  if (!n || n->op != Op::View || !n->attrs.view || n->inputs.size() != 1 || n->inputs[0]->op == Op::View) return false;
  const ViewSpec& v = *n->attrs.view;
  if (v.has_mask() || !(v.offset == SymInt(0)) || v.strides.size() != v.shape.size()) return false;
  SymInt stride(1);
  for (size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] == SymInt(1)) continue;
    if (!(v.strides[d] == stride)) return false;
    stride = stride * v.shape[d];
  }
  return n->dtype == n->inputs[0]->dtype;
}

}  // namespace lathe
