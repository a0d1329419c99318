// build.h — primitive node builders: the only sanctioned way to make valid nodes.
//
// Each builder checks its operands (arity, dtypes, shapes, attributes) and throws
// UserError with a message that names the operands and what was expected. The same
// checks back the verifier (check_node), so a graph built here always verifies.
// Primitive binary/ternary ops want equal shapes and dtypes: broadcasting and promotion
// belong to the frontend (core/frontend), which emits View and Cast nodes for them.
#pragma once
#include <string>
#include <vector>

#include "core/ir/node.h"
#include "core/runtime/host_tensor.h"

namespace lathe::prim {

NodeRef input(const std::string& name, DType dt, Shape shape);
NodeRef constant(double value, DType dt, Shape shape = {});   // a scalar broadcast to shape
NodeRef constant_int(int64_t value, DType dt, Shape shape = {});
NodeRef constant_tensor(const HostTensor& t);                  // a tensor literal
NodeRef index(DType dt, Shape shape, int axis);
NodeRef view(NodeRef x, const ViewSpec& v);   // folds View(View(x)) when exactly representable
NodeRef take(NodeRef x, NodeRef idx, int axis);
NodeRef copy(NodeRef x);
NodeRef assign(NodeRef target, NodeRef value);
NodeRef unary(Op op, NodeRef x);
NodeRef cast(NodeRef x, DType dt);             // returns x when dt == x->dtype
NodeRef binary(Op op, NodeRef a, NodeRef b);
NodeRef where(NodeRef c, NodeRef a, NodeRef b);
NodeRef reduce(ReduceOp r, NodeRef x, std::vector<int> axes);  // axes keep size 1
NodeRef extern_call(const std::string& name, std::vector<NodeRef> inputs, DType dt, Shape shape,
                    std::vector<int64_t> ints = {});

// Generic builder used by parsers and rewrite engines: validates, then make_node().
NodeRef build(Op op, DType dt, Shape shape, std::vector<NodeRef> inputs, Attrs attrs);

// Returns "" when a node with these fields is well-formed, else what is wrong
// ("Add: operand shapes differ: [4, 3] vs [4]; broadcast with a View first").
std::string check_node(Op op, DType dt, const Shape& shape, const std::vector<NodeRef>& inputs, const Attrs& attrs);

// The result dtype/shape a node of this op would have (for ops where it is determined
// by inputs and attrs); used by parsers to fill defaults and by rewrite replacements.
struct TypeShape { DType dtype; Shape shape; };
TypeShape infer(Op op, const std::vector<NodeRef>& inputs, const Attrs& attrs, DType hint_dtype = DType::F32);

// Extern kernels known to the runtime, with their result-shape rule; backends provide the
// implementation. "sgemm": ints = {M, N, K, transA, transB}, inputs (A, B) -> [M, N] f32.
bool extern_known(const std::string& name);

}  // namespace lathe::prim
