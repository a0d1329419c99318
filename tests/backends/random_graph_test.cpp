// random_graph_test.cpp — a seeded random-graph corpus on `c` vs the interpreter: random op
// chains over every primitive (unary, binary, where, reduce, views, take, cast, copy), odd
// and prime sizes, broadcasting, each dtype the backend claims. All graphs of a batch are
// compiled in one C compiler invocation. A failure prints the smallest failing sub-graph
// (each intermediate node tried as the only output) in .lathe form.
#include <random>

#include "core/ir/build.h"
#include "diff_util.h"

namespace lathe {
namespace {

class RandomGraphs {
 public:
  explicit RandomGraphs(uint64_t seed) : rng_(seed) {}

  Graph make() {
    for (;;) {
      try {
        return attempt();
      } catch (const UserError&) {
        // an invalid combination (e.g. a float-only op on ints): draw again
      }
    }
  }

 private:
  std::mt19937_64 rng_;
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool coin(int percent) { return pick(100) < percent; }

  Graph attempt() {
    static const std::vector<DType> dtypes = {DType::F32, DType::F32, DType::F32, DType::F64, DType::I32,
                                              DType::I64, DType::I8,  DType::U8,  DType::I16, DType::Bool};
    static const std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 11, 13, 17};
    DType dt = dtypes[pick((int)dtypes.size())];
    int rank = 1 + pick(3);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(sizes[pick((int)sizes.size())]);
    std::vector<NodeRef> pool;
    int ninputs = 1 + pick(3);
    for (int i = 0; i < ninputs; ++i) {
      if (coin(30) && rank > 1) {  // a broadcast input
        Shape s = shape;
        s[pick(rank)] = 1;
        NodeRef x = prim::input("x" + std::to_string(i), dt, s);
        pool.push_back(prim::view(x, view_expand(ViewSpec::contiguous(s), shape)));
      } else {
        pool.push_back(prim::input("x" + std::to_string(i), dt, shape));
      }
    }
    std::vector<std::pair<std::string, NodeRef>> outs;
    int steps = 2 + pick(7);
    for (int s = 0; s < steps; ++s) {
      NodeRef a = pool[pick((int)pool.size())], b = pool[pick((int)pool.size())];
      NodeRef r = step(a, b, dt, shape, rank);
      pool.push_back(r);
      if (coin(10)) outs.push_back({"o" + std::to_string(outs.size()), r});
    }
    outs.push_back({"y", pool.back()});
    return Graph::from_outputs(outs);
  }

  NodeRef step(NodeRef a, NodeRef b, DType dt, const Shape& shape, int rank) {
    ViewSpec base = ViewSpec::contiguous(shape);
    int axis = pick(rank);
    switch (pick(11)) {
      case 0: case 1: {
        static const Op ops[] = {Op::Neg, Op::Recip, Op::Sin, Op::Exp2, Op::Log2, Op::Sqrt, Op::Not};
        return prim::unary(ops[pick(7)], a);
      }
      case 2: case 3: {
        static const Op ops[] = {Op::Add, Op::Mul, Op::IDiv, Op::Mod, Op::Max, Op::And, Op::Or, Op::Xor};
        return prim::binary(ops[pick(8)], a, b);
      }
      case 4: return prim::where(prim::binary(coin(50) ? Op::CmpLT : Op::CmpNE, a, b), a, b);
      case 5: {  // reduce, broadcast back
        static const ReduceOp rs[] = {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul};
        NodeRef r = prim::reduce(rs[pick(3)], a, {axis});
        return prim::view(r, view_expand(ViewSpec::contiguous(r->shape), shape));
      }
      case 6: {  // shape-preserving views: flip, shift (pad+shrink), permute there and back
        int k = pick(3);
        if (k == 0) return prim::view(a, view_flip(base, {axis}));
        if (k == 1) {
          std::vector<std::pair<SymInt, SymInt>> pad(rank, {0, 0}), shr;
          pad[axis] = {1, 0};
          ViewSpec p = view_pad(base, pad);
          for (int d = 0; d < rank; ++d) shr.push_back({0, shape[d]});
          return prim::view(a, view_shrink(p, shr));
        }
        if (rank >= 2) {
          std::vector<int> perm = rank == 3 ? std::vector<int>{1, 0, 2} : std::vector<int>{1, 0};
          NodeRef t = prim::view(a, view_permute(base, perm));
          NodeRef u = prim::unary(dt == DType::Bool ? Op::Not : Op::Neg, t);
          return prim::view(u, view_permute(ViewSpec::contiguous(u->shape), perm));
        }
        return prim::view(a, view_flip(base, {0}));
      }
      case 7: {  // take with a computed index (reversed positions, some negative)
        NodeRef i = prim::index(DType::I64, shape, axis);
        NodeRef n = prim::constant_int(-1, DType::I64, shape);
        NodeRef idx = coin(50) ? prim::binary(Op::Add, prim::unary(Op::Neg, i), n) : i;  // -i-1 counts from the end
        return prim::take(a, idx, axis);
      }
      case 8: {  // cast round trip
        static const DType others[] = {DType::F32, DType::I32, DType::F64, DType::I8, DType::Bool};
        return prim::cast(prim::cast(a, others[pick(5)]), dt);
      }
      case 9: return prim::copy(prim::binary(Op::Add, a, b));
      default: return prim::binary(Op::Mul, a, prim::constant(dt == DType::Bool ? 1 : 3, dt, shape));
    }
  }
};

// The smallest sub-graph (one intermediate node as the only output) that still fails.
std::string minimal_reproducer(const Graph& g) {
  std::vector<NodeRef> nodes = g.toposort();
  test::DiffBatch batch;
  std::vector<Graph> subs;
  for (NodeRef n : nodes) {
    if (n->op == Op::Input || n->op == Op::Const) continue;
    subs.push_back(Graph::from_outputs({{"y", n}}));
    batch.add("sub", subs.back(), 11);
  }
  auto whys = batch.run_each(false);
  for (size_t i = 0; i < whys.size(); ++i)
    if (!whys[i].empty()) return "smallest failing sub-graph (" + whys[i] + "):\n" + print_graph(subs[i]);
  return "(no single-output sub-graph fails; the whole graph is the reproducer)\n" + print_graph(g);
}

TEST(RandomGraphs, CorpusMatchesInterpreter) {
  const int kGraphs = 320, kBatch = 160;
  RandomGraphs gen(20240601);
  int failures = 0;
  for (int start = 0; start < kGraphs; start += kBatch) {
    test::DiffBatch batch;
    std::vector<Graph> graphs;
    for (int i = start; i < std::min(kGraphs, start + kBatch); ++i) {
      graphs.push_back(gen.make());
      batch.add("random graph " + std::to_string(i), graphs.back(), 1000 + i);
    }
    auto whys = batch.run_each(false);
    for (size_t i = 0; i < whys.size(); ++i) {
      if (whys[i].empty()) continue;
      if (++failures <= 3)
        ADD_FAILURE() << "random graph " << start + i << ": " << whys[i] << "\n" << minimal_reproducer(graphs[i]);
    }
  }
  EXPECT_EQ(failures, 0) << "of " << kGraphs << " random graphs";
}

}  // namespace
}  // namespace lathe
