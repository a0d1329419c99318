// kernel_dedup_test.cpp — kernels that are the same loop IR under different names are
// compiled once (backends/kernel_dedup.h) and still run on their own buffers.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "backends/kernel_dedup.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "diff_util.h"

namespace lathe {
namespace {

HostTensor values(std::vector<int64_t> shape, double seed) {
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, std::sin(seed + 0.37 * static_cast<double>(i)));
  return t;
}

// Three layers of the same shape with different weights: the same kernels three times.
Graph three_layers() {
  Tensor h = input("x", {SymInt(5), SymInt(24)});
  for (int l = 0; l < 3; ++l)
    h = relu(matmul(h, from_host(values({24, 24}, l))) + from_host(values({24}, 10 + l))) * 0.5;
  return Graph::from_outputs({{"y", h.node()}});
}

TEST(KernelDedup, RepeatedLayersShareCode) {
  Graph g = three_layers();
  Program p = build_program(g);
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs) fs.push_back(&f);
  SameCode same = same_code(fs);
  ASSERT_GE(fs.size(), 3u);
  EXPECT_LE(same.distinct() * 3, fs.size()) << test::loop_ir_of(p);
  for (size_t i = 0; i < fs.size(); ++i) {
    EXPECT_LE(same.first[i], static_cast<int>(i));
    EXPECT_EQ(same.keys[i], same.keys[same.first[i]]);
    EXPECT_EQ(same.keys[i].find(fs[i]->name + "("), std::string::npos) << "the key must not name the kernel";
  }
}

TEST(KernelDedup, SharedCodeRunsOnEachLayersBuffers) {
  std::string backend = test::test_backend();
  if (backend != "c" && backend != "llvm") GTEST_SKIP() << "host backends only";
  Graph g = three_layers();
  TensorMap in = random_inputs(g, 3);
  Executable exe = compile_graph(g, backend);
  TensorMap got = exe.run(in), want = interpret(g, in);
  EXPECT_EQ(test::compare_outputs(got, want), "");
}

TEST(KernelDedup, DifferentCodeIsKept) {
  // Same shapes, different ops: nothing may be merged across them.
  Tensor x = input("x", {SymInt(7), SymInt(9)});
  Graph g = Graph::from_outputs({{"a", exp(x).node()}, {"b", (exp(x) + 1.0).node()}, {"c", tanh(x).node()}});
  Program p = build_program(g);
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs) fs.push_back(&f);
  EXPECT_EQ(same_code(fs).distinct(), fs.size()) << test::loop_ir_of(p);
  std::string backend = test::test_backend();
  if (backend != "c" && backend != "llvm") return;
  TensorMap in = random_inputs(g, 5);
  EXPECT_EQ(test::compare_outputs(compile_graph(g, backend).run(in), interpret(g, in)), "");
}

}  // namespace
}  // namespace lathe
