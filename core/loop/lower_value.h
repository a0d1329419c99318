// lower_value.h — one primitive node's value at an index, as a loop-IR expression.
//
// The part shared by the two lowerings that inline nodes into expressions: lower_kernel
// (lower.cpp) and the matmul epilogue (matmul_epilogue.cpp). ValueLowering::compute knows
// how each fusable op becomes an expression:
//   - a materialized node is a load at its row-major position (load_buffer);
//   - a View is index math on its input: strides and offset when the input is a buffer,
//     view_dim_map when it is inlined (broadcasting is a stride or multiplier of 0); a masked
//     dim reads 0, through a masked load or a select, and its condition guards every load
//     beneath it (guarded);
//   - Const, Index, Cast, Where and every unary and binary op are one builder each.
//
// What the two lowerings do differently is the subclass's:
//   value()          how a node's value is shared: lower.cpp binds locals at the loop level
//                    where their inputs are known and reuses them (CSE, the stash); the
//                    epilogue binds one Let per node and index;
//   operands()       the order a node's inputs are lowered in (it names the locals they bind);
//   compute_other()  the ops only lower.cpp fuses (Reduce, Take, Copy, Assign).
#pragma once
#include <unordered_map>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

using Index = std::vector<ExprRef>;  // one expression per dim of a node's shape

// offset + Σ idx[d]·strides[d] over the dims of `shape` that are not 1.
ExprRef strided_index(const SymInt& offset, const std::vector<SymInt>& strides, const Shape& shape, const Index& idx);
// The position of idx in a contiguous row-major buffer of `shape`.
ExprRef row_major_index(const Index& idx, const Shape& shape);

class ValueLowering {
 public:
  virtual ~ValueLowering() = default;

 protected:
  // `root` is the kernel's root: computed, although its buffer is materialized (the output).
  // `param_of` maps a buffer id to the kernel parameter that holds it.
  ValueLowering(const KernelGraph& kg, NodeRef root, std::unordered_map<int, int> param_of = {})
      : kg_(kg), root_(root), param_of_(std::move(param_of)) {}

  // n's value at idx. Calls compute() (or load_buffer()) for what it has not lowered yet.
  virtual ExprRef value(NodeRef n, const Index& idx) = 0;
  // The values of n's inputs at idx, lowered in the subclass's order.
  virtual std::vector<ExprRef> operands(NodeRef n, const Index& idx) = 0;
  // An op compute() does not lower; the default says the scheduler should have refused it.
  virtual ExprRef compute_other(NodeRef n, const Index& idx);

  // n's value at idx from its op (a node that reads_buffer() is value()'s to load).
  ExprRef compute(NodeRef n, const Index& idx);
  // Is n read from its buffer (materialized, and not the root being computed)?
  bool reads_buffer(NodeRef n) const { return n != root_ && kg_.materialized(n); }
  // A materialized node's element at idx, under the current mask.
  ExprRef load_buffer(NodeRef n, const Index& idx);
  // in's value at in_idx where `cond` holds, else 0 of dtype dt; loads beneath carry cond.
  ExprRef guarded(const ExprRef& cond, NodeRef in, const Index& in_idx, DType dt);
  // The conditions guarding the value being lowered, ANDed (nullptr: none).
  ExprRef mask() const;

  const KernelGraph& kg_;
  NodeRef root_;
  std::unordered_map<int, int> param_of_;  // buffer id -> kernel parameter

 private:
  std::vector<ExprRef> masks_;

  int param(NodeRef n) const { return param_of_.at(kg_.buffer_of.at(n)); }
  ExprRef view_value(NodeRef n, const Index& idx);
};

}  // namespace lathe::loop
