// bench_graph.cpp — see bench_graph.h.
#include "core/rewrite/bench_graph.h"

#include <random>
#include <vector>

#include "core/ir/build.h"

namespace lathe {

Graph make_rewrite_benchmark_graph(size_t target_nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  NodeRef x = prim::input("x", DType::F32, {16});
  std::vector<NodeRef> pool{x};
  auto pick = [&] { return pool[pool.size() - 1 - rng() % std::min<size_t>(pool.size(), 8)]; };
  auto c = [&](double v) { return prim::constant(v, DType::F32, {16}); };
  size_t made = 0;
  NodeRef last = x;
  while (made < target_nodes) {
    NodeRef a = last, b = pick(), n;
    switch (rng() % 9) {
      case 0: n = prim::binary(Op::Add, a, b); made += 1; break;
      case 1: n = prim::binary(Op::Mul, a, b); made += 1; break;
      case 2: n = prim::unary(Op::Neg, a); made += 1; break;
      case 3: n = prim::binary(Op::Add, a, c(0)); made += 1; break;
      case 4: n = prim::binary(Op::Mul, c(1), a); made += 1; break;
      case 5: n = prim::unary(Op::Neg, prim::unary(Op::Neg, a)); made += 2; break;
      case 6: {
        double u = static_cast<double>(rng() % 100), v = static_cast<double>(rng() % 100);
        n = prim::binary(Op::Add, a, prim::binary(Op::Add, c(u), c(v)));
        made += 3;
        break;
      }
      case 7: n = prim::binary(Op::Max, a, a); made += 1; break;
      default: n = prim::binary(Op::Add, a, prim::binary(Op::Mul, b, c(static_cast<double>(rng() % 7)))); made += 2; break;
    }
    pool.push_back(n);
    last = n;
  }
  return Graph::from_outputs({{"y", last}});
}


}  // namespace lathe
