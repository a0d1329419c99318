// c_ops_test.cpp — every primitive op, each claimed dtype, and the view kinds on the `c`
// backend, compared with the interpreter.
#include "core/ir/build.h"
#include "diff_util.h"

namespace lathe {
namespace {

using test::DiffBatch;

Graph one(NodeRef n) { return Graph::from_outputs({{"y", n}}); }
int counter = 0;
std::string label() { return "case " + std::to_string(counter++); }

const std::vector<DType> kAll = {DType::Bool, DType::U8,  DType::I8,  DType::I16, DType::I32, DType::I64,
                                 DType::F32,  DType::F64, DType::U16, DType::U32, DType::U64};

TEST(COps, Unary) {
  DiffBatch B;
  for (DType dt : kAll)
    for (Op op : {Op::Neg, Op::Recip, Op::Sin, Op::Exp2, Op::Log2, Op::Sqrt, Op::Not}) {
      NodeRef x = prim::input("x", dt, {3, 7});
      if (!prim::check_node(op, dt, x->shape, {x}, {}).empty()) continue;
      B.add(std::string(op_name(op)) + " " + std::string(dtype_name(dt)), one(prim::unary(op, x)));
    }
  B.run();
}

TEST(COps, Binary) {
  DiffBatch B;
  for (DType dt : kAll)
    for (Op op : {Op::Add, Op::Mul, Op::IDiv, Op::Mod, Op::Max, Op::And, Op::Or, Op::Xor, Op::CmpLT, Op::CmpNE}) {
      NodeRef a = prim::input("a", dt, {5, 13});
      NodeRef b = prim::input("b", dt, {5, 13});
      DType rt = (op == Op::CmpLT || op == Op::CmpNE) ? DType::Bool : dt;
      if (!prim::check_node(op, rt, a->shape, {a, b}, {}).empty()) continue;
      B.add(std::string(op_name(op)) + " " + std::string(dtype_name(dt)), one(prim::binary(op, a, b)));
    }
  B.run();
}

TEST(COps, CastsBetweenAllDtypes) {
  DiffBatch B;
  for (DType from : kAll)
    for (DType to : kAll) {
      if (from == to) continue;
      NodeRef x = prim::input("x", from, {17});
      NodeRef y = from == DType::F32 || from == DType::F64 ? prim::binary(Op::Mul, x, prim::constant(1e3, from, {17})) : x;
      B.add(label(), one(prim::cast(y, to)));
    }
  B.run();
}

TEST(COps, WhereConstIndex) {
  DiffBatch B;
  NodeRef a = prim::input("a", DType::F32, {4, 9});
  NodeRef b = prim::input("b", DType::F32, {4, 9});
  NodeRef c = prim::binary(Op::CmpLT, a, b);
  NodeRef i = prim::cast(prim::index(DType::I32, {4, 9}, 1), DType::F32);
  B.add(label(), one(prim::where(c, prim::binary(Op::Add, a, i), prim::constant(2.5, DType::F32, {4, 9}))));
  B.run();
}

TEST(COps, Reductions) {
  DiffBatch B;
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64})
    for (ReduceOp r : {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul})
      for (std::vector<int> axes : {std::vector<int>{0}, {1}, {2}, {0, 2}, {0, 1, 2}}) {
        NodeRef x = prim::input("x", dt, {3, 5, 7});
        B.add(label(), one(prim::reduce(r, x, axes)));
      }
  B.run();
}

TEST(COps, Views) {
  DiffBatch B;
  NodeRef x = prim::input("x", DType::F32, {4, 6});
  ViewSpec base = ViewSpec::contiguous(x->shape);
  B.add(label(), one(prim::view(x, view_permute(base, {1, 0}))));
  B.add(label(), one(prim::view(x, view_flip(base, {0, 1}))));
  B.add(label(), one(prim::view(x, view_shrink(base, {{1, 3}, {2, 5}}))));
  B.add(label(), one(prim::view(x, view_pad(base, {{1, 2}, {0, 3}}))));
  B.add(label(), one(prim::view(x, *view_reshape(base, {2, 12}))));
  NodeRef y = prim::input("y", DType::F32, {4, 1});
  B.add(label(), one(prim::view(y, view_expand(ViewSpec::contiguous(y->shape), {4, 6}))));
  // a view of a computed (inlined) value, padded and flipped
  NodeRef e = prim::unary(Op::Exp2, x);
  ViewSpec pf = view_flip(view_pad(base, {{2, 1}, {1, 1}}), {1});
  B.add(label(), one(prim::binary(Op::Add, prim::view(e, pf), prim::view(e, pf))));
  // a reshape of a computed permute cannot be index math: the scheduler materializes it
  NodeRef p = prim::view(e, view_permute(base, {1, 0}));
  NodeRef q = prim::unary(Op::Neg, p);
  B.add(label(), one(prim::view(q, *view_reshape(ViewSpec::contiguous(q->shape), {24}))));
  B.run();
}

TEST(COps, TakeCopyAssign) {
  DiffBatch B;
  NodeRef x = prim::input("x", DType::F32, {5, 3});
  NodeRef idx = prim::input("i", DType::I64, {4, 3});
  B.add(label(), one(prim::take(prim::unary(Op::Neg, x), idx, 0)));
  B.add(label(), one(prim::copy(prim::view(x, view_permute(ViewSpec::contiguous(x->shape), {1, 0})))));
  NodeRef w = prim::input("w", DType::F32, {5, 3});
  B.add(label(), one(prim::assign(w, prim::binary(Op::Add, w, x))));
  B.run();
}

TEST(COps, ScalarAndEmpty) {
  DiffBatch B;
  NodeRef x = prim::input("x", DType::F32, {});
  B.add(label(), one(prim::binary(Op::Add, x, prim::constant(1, DType::F32))));
  NodeRef z = prim::input("z", DType::F32, {0, 4});
  B.add(label(), one(prim::reduce(ReduceOp::Add, z, {0})));
  B.run();
}

TEST(COps, SymbolicDims) {
  NodeRef x = prim::input("x", DType::F32, {SymInt::var("B"), 8});
  NodeRef s = prim::reduce(ReduceOp::Max, x, {1});
  NodeRef e = prim::view(s, view_expand(ViewSpec::contiguous(s->shape), x->shape));
  Graph g = one(prim::binary(Op::Add, x, prim::unary(Op::Neg, e)));
  TensorMap in{{"x", random_tensor(DType::F32, {5, 8}, 3)}};
  Executable exe = compile_graph(g, test::test_backend());
  EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in)), "");
  TensorMap in2{{"x", random_tensor(DType::F32, {11, 8}, 4)}};
  EXPECT_EQ(test::compare_outputs(exe.run(in2), interpret(g, in2)), "");
}

}  // namespace
}  // namespace lathe
