// test_graphs.h — a zoo of small graphs built with prim:: that together use every op, every
// dtype, symbolic shapes, masked/flipped views, tensor literals, quoted names and every kind
// of provenance. The text round-trip tests run over all of them.
#pragma once
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/build.h"
#include "core/ir/graph.h"

namespace lathe::test_graphs {

using NamedGraph = std::pair<std::string, Graph>;

inline const DType kAllDTypes[] = {DType::Bool, DType::U8,  DType::I8,   DType::I16, DType::I32,
                                   DType::I64,  DType::F16, DType::BF16, DType::F32, DType::F64,
                                   DType::U16,  DType::U32, DType::U64};

// y = relu(x @ w + 1.5) with the matmul spelled as broadcast-multiply-reduce.
inline Graph mlp_graph() {
  SymInt B = SymInt::var("B");
  NodeRef x = prim::input("x", DType::F32, {B, 784});
  NodeRef w = prim::input("w", DType::F32, {784, 10});
  NodeRef r;
  {
    ProvenanceScope s1("mlp");
    NodeRef z;
    {
      ProvenanceScope s2("matmul");
      NodeRef xb = prim::view(x, ViewSpec{{B, 784, 10}, {784, 1, 0}, 0, {}});
      NodeRef wb = prim::view(w, ViewSpec{{B, 784, 10}, {0, 10, 1}, 0, {}});
      z = prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, xb, wb), {1});
    }
    NodeRef y = prim::binary(Op::Add, z, prim::constant(1.5, DType::F32, {B, 1, 10}));
    ProvenanceScope s3("relu");
    r = prim::binary(Op::Max, y, prim::constant(0, DType::F32, {B, 1, 10}));
  }
  return Graph::from_outputs({{"y", r}});
}

inline Graph unary_graph() {
  NodeRef x = prim::input("x", DType::F32, {3, 4});
  NodeRef a = x;
  for (Op op : {Op::Neg, Op::Recip, Op::Sin, Op::Exp2, Op::Log2, Op::Sqrt}) a = prim::unary(op, a);
  std::vector<std::pair<std::string, NodeRef>> outs{{"chain", a}};
  for (DType dt : kAllDTypes)
    if (dt != DType::F32) outs.push_back({"cast_" + std::string(dtype_name(dt)), prim::cast(x, dt)});
  NodeRef b = prim::input("b", DType::Bool, {3, 4});
  outs.push_back({"not_bool", prim::unary(Op::Not, b)});
  outs.push_back({"not_i32", prim::unary(Op::Not, prim::cast(x, DType::I32))});
  return Graph::from_outputs(outs);
}

inline Graph binary_graph() {
  SymInt N = SymInt::var("N");
  NodeRef a = prim::input("a", DType::I32, {N, 2});
  NodeRef b = prim::input("b", DType::I32, {N, 2});
  std::vector<std::pair<std::string, NodeRef>> outs;
  for (Op op : {Op::Add, Op::Mul, Op::IDiv, Op::Mod, Op::Max, Op::And, Op::Or, Op::Xor, Op::CmpLT, Op::CmpNE})
    outs.push_back({std::string(op_name(op)), prim::binary(op, a, b)});
  NodeRef lt = prim::binary(Op::CmpLT, a, b);
  outs.push_back({"where", prim::where(lt, a, b)});
  for (ReduceOp r : {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul})
    outs.push_back({"reduce_" + std::string(reduce_op_name(r)), prim::reduce(r, a, {0, 1})});
  return Graph::from_outputs(outs);
}

inline Graph movement_graph() {
  SymInt T = SymInt::var("T");
  NodeRef x = prim::input("x", DType::F32, {T, 8});
  NodeRef idx = prim::index(DType::I64, {T, 3}, 1);
  NodeRef taken = prim::take(x, idx, 1);
  ViewSpec v = ViewSpec::contiguous({T, 8});
  NodeRef padded = prim::view(x, view_pad(v, {{1, 1}, {0, 2}}));          // masked
  NodeRef flipped = prim::view(x, view_flip(v, {1}));                      // negative stride, offset
  NodeRef sliced = prim::view(x, view_shrink(v, {{0, T}, {2, 6}}));
  NodeRef half = prim::view(x, ViewSpec{{floordiv(T + 1, 2), smax(T, 1) - T + 8}, {16, 1}, 0, {}});
  NodeRef perm = prim::view(x, view_permute(v, {1, 0}));
  NodeRef state = prim::input("state", DType::F32, {T, 8});
  NodeRef upd = prim::assign(state, prim::copy(prim::binary(Op::Add, state, x)));
  NodeRef fidx = prim::index(DType::F16, {4}, 0);
  return Graph::from_outputs({{"taken", taken}, {"padded", padded}, {"flipped", flipped}, {"sliced", sliced},
                              {"half", half}, {"perm", perm}, {"state", upd}, {"fidx", fidx}});
}

inline Graph extern_graph() {
  NodeRef a = prim::input("A", DType::F32, {64, 32});
  NodeRef b = prim::input("B", DType::F32, {32, 16});
  NodeRef c = prim::extern_call("sgemm", {a, b}, DType::F32, {64, 16}, {64, 16, 32, 0, 0});
  return Graph::from_outputs({{"C", c}});
}

// Scalar constants at the edges of every dtype, and tensor literals of every dtype.
inline Graph constants_graph() {
  std::vector<std::pair<std::string, NodeRef>> outs;
  double inf = std::numeric_limits<double>::infinity();
  int k = 0;
  auto add = [&](NodeRef n) { outs.push_back({"c" + std::to_string(k++), n}); };
  for (double v : {0.0, -0.0, 1.5, 0.1, -1e-30, 1e30, 3.4e38, inf, -inf, std::nan(""), 65504.0, 1.0 / 3.0})
    for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) add(prim::constant(v, dt, {2}));
  add(prim::constant(1e300, DType::F64));
  add(prim::constant(5e-324, DType::F64));
  for (int64_t v : {int64_t(0), int64_t(1), int64_t(-1), int64_t(127), int64_t(-128), int64_t(255)})
    for (DType dt : {DType::U8, DType::I8, DType::I16, DType::I32, DType::I64, DType::Bool})
      add(prim::constant_int(v, dt, {}));
  add(prim::constant_int(std::numeric_limits<int64_t>::max(), DType::I64));
  add(prim::constant_int(std::numeric_limits<int64_t>::min(), DType::I64));
  add(prim::constant_int(-2147483648LL, DType::I32));
  for (DType dt : kAllDTypes) {
    HostTensor t(dt, {2, 3});
    for (int i = 0; i < 6; ++i) t.set_f64(i, (i - 2) * (is_float(dt) ? 0.3 : 7));
    if (is_float(dt)) t.set_f64(5, std::nan(""));
    if (is_float(dt)) t.set_f64(4, -inf);
    add(prim::constant_tensor(t));
  }
  add(prim::constant_tensor(HostTensor(DType::F32, {0, 3})));  // empty literal
  add(prim::constant_tensor(HostTensor(DType::I64, {})));      // rank-0 literal
  return Graph::from_outputs(outs);
}

// Names that need quoting, an unused input, and rewrite/backward provenance.
inline Graph names_and_provenance_graph() {
  NodeRef x = prim::input("onnx::input:0", DType::F32, {4});
  NodeRef unused = prim::input("unused \"quoted\" \\ name", DType::I8, {});
  (void)unused;
  ProvenanceContext saved = current_provenance();
  current_provenance().stack = {"block0", "attention", "soft max"};
  current_provenance().step = 3;
  NodeRef a = prim::unary(Op::Exp2, x);
  current_provenance().stack.clear();
  current_provenance().backward = true;
  NodeRef b = prim::unary(Op::Neg, a);
  current_provenance().step = -1;
  NodeRef c = prim::unary(Op::Sqrt, b);
  current_provenance() = saved;
  Graph g = Graph::from_outputs({{"out put", c}, {"again", c}, {"ünïcode", a}});
  g.inputs.push_back(prim::input("unused \"quoted\" \\ name", DType::I8, {}));
  return g;
}

inline std::vector<NamedGraph> all_test_graphs() {
  return {{"mlp", mlp_graph()},         {"unary", unary_graph()},     {"binary", binary_graph()},
          {"movement", movement_graph()}, {"extern", extern_graph()}, {"constants", constants_graph()},
          {"names", names_and_provenance_graph()}};
}

}  // namespace lathe::test_graphs
