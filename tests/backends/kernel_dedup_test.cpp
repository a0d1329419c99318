// kernel_dedup_test.cpp — kernels that are the same loop IR under different names are
// compiled once (backends/kernel_dedup.h) and still run on their own buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/backend.h"
#include "backends/kernel_dedup.h"
#include "core/loop/base_offsets.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

// Three layers of the same shape with different weights: the same kernels three times.
Graph three_layers() {
  Tensor h = input("x", {SymInt(5), SymInt(24)});
  for (int l = 0; l < 3; ++l)
    h = relu(matmul(h, from_host(test::sin_weights({24, 24}, l, 0.37))) + from_host(test::sin_weights({24}, 10 + l, 0.37))) * 0.5;
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

// ResNet's repeated bottlenecks: conv layers of one shape that differ only in their
// weights and biases (constants of different values, prepacked or not) are one code.
// Odd channel counts and a prime spatial size, batch 1 and 3.
TEST(KernelDedup, ConvLayersDifferingOnlyInWeightsShareCode) {
  for (int64_t n : {1, 3}) {
    Tensor h = input("x", {SymInt(n), SymInt(13), SymInt(11), SymInt(11)});
    for (int l = 0; l < 3; ++l) {
      Conv2dOptions o;
      o.padding = {1, 1};
      // weights ~1/sqrt(fan-in), so that the activations stay O(1) (the tolerance is relative)
      h = relu(conv2d(h, from_host(test::sin_weights({13, 13, 3, 3}, l, 0.37)), from_host(test::sin_weights({13}, 10 + l, 0.37)), o)) * 0.1;
    }
    Graph g = Graph::from_outputs({{"y", h.node()}});
    Program p = build_program(g);
    std::vector<const loop::LoopFunc*> fs;
    for (auto& f : p.funcs) fs.push_back(&f);
    ASSERT_GE(fs.size(), 3u);
    EXPECT_LE(same_code(fs).distinct() * 3, fs.size()) << "N=" << n << "\n" << test::loop_ir_of(p);
    std::string backend = test::test_backend();
    if (backend != "c" && backend != "llvm") continue;
    TensorMap in = random_inputs(g, 7);
    EXPECT_EQ(test::compare_outputs(compile_graph(g, backend).run(in), interpret(g, in)), "") << "N=" << n;
  }
}

// GPT-2's MLP: matmul + bias, then a GELU whose scalar constants are tensors (ONNX
// initializers) every layer shares. The first layer meets them after its own bias, the
// later ones before theirs, so the kernels list their buffers in another order: still one
// code, each launch handing the buffers in the order the code takes them.
HostTensor scalar(double v) {
  HostTensor t(DType::F32, std::vector<int64_t>{});
  t.set_f64(0, v);
  return t;
}

Graph gelu_layers(int layers, int64_t t, int64_t d) {
  // every layer's output is a graph output, so that each is one kernel (matmul + epilogue)
  Tensor h = input("x", {SymInt(t), SymInt(d)});
  std::vector<std::pair<std::string, NodeRef>> outs;
  for (int l = 0; l < layers; ++l) {
    Tensor y = matmul(h, from_host(test::sin_weights({d, d}, l, 0.37))) * 0.2 + from_host(test::sin_weights({d}, 10 + l, 0.37));
    Tensor inner = (y + from_host(scalar(0.044715)) * y * y * y) * from_host(scalar(0.7978845608));
    h = from_host(scalar(0.5)) * y * (tanh(inner) + from_host(scalar(1.0)));
    outs.push_back({"y" + std::to_string(l), h.node()});
  }
  return Graph::from_outputs(outs);
}

std::vector<const loop::LoopFunc*> funcs_of(const Program& p) {
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs) fs.push_back(&f);
  return fs;
}

TEST(KernelDedup, BufferOrderIsNotCode) {
  // batch 1 and more, odd and prime sizes
  for (auto [t, d] : std::vector<std::pair<int64_t, int64_t>>{{1, 67}, {7, 64}, {17, 96}}) {
    Graph g = gelu_layers(3, t, d);
    Program p = build_program(g);
    std::vector<const loop::LoopFunc*> fs = funcs_of(p);
    SameCode same = same_code(fs);
    std::string what = "T=" + std::to_string(t) + " D=" + std::to_string(d) + "\n" + test::loop_ir_of(p);
    ASSERT_EQ(fs.size(), 3u) << what;
    EXPECT_EQ(same.distinct(), 1u) << what;
    bool reordered = false;
    for (size_t i = 0; i < fs.size(); ++i) {
      if (same.args[i].empty()) continue;
      reordered = true;
      // a permutation of this kernel's buffers, each of the dtype and access of the code's
      std::vector<int> sorted = same.args[i];
      std::sort(sorted.begin(), sorted.end());
      for (size_t j = 0; j < sorted.size(); ++j) EXPECT_EQ(sorted[j], static_cast<int>(j));
      const loop::LoopFunc& code = *fs[static_cast<size_t>(same.first[i])];
      ASSERT_EQ(same.args[i].size(), code.buffers.size());
      for (size_t j = 0; j < code.buffers.size(); ++j) {
        const loop::BufferParam& mine = fs[i]->buffers[static_cast<size_t>(same.args[i][j])];
        EXPECT_EQ(mine.dtype, code.buffers[j].dtype);
        EXPECT_EQ(mine.written, code.buffers[j].written);
      }
    }
    EXPECT_TRUE(reordered) << "the layers should list their buffers in different orders\n" << what;
    std::string backend = test::test_backend();
    if (backend != "c" && backend != "llvm") continue;
    TensorMap in = random_inputs(g, 11);
    CompileOptions co;
    co.use_cache = false;
    auto compiled = get_backend(backend).compile(p, co);
    if (compiled->codes_compiled >= 0) EXPECT_EQ(compiled->codes_compiled, 1) << what;  // llvm reports it
    Executable exe(std::move(p), std::move(compiled), backend);
    EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in)), "") << what;
  }
}

TEST(KernelDedup, KeysIgnoreOrderAndNamesOnly) {
  // k(out, a, b) = a + 2b and k'(out, b, a) listing the same two inputs the other way round
  // are one code; a - b against b - a is not (the body's order is code)
  auto make = [](bool swap, bool sub) {
    loop::LoopFunc f;
    f.name = swap ? "k2" : "k1";
    f.kind = "elementwise";
    int a = swap ? 2 : 1, b = swap ? 1 : 2;
    f.buffers = {{0, "out", DType::F32, true}, {0, "", DType::F32, false}, {0, "", DType::F32, false}};
    f.buffers[static_cast<size_t>(a)] = {5, swap ? "in1" : "x", DType::F32, false};
    f.buffers[static_cast<size_t>(b)] = {6, swap ? "in0" : "y", DType::F32, false};
    auto i = loop::var("i");
    auto la = loop::load(a, DType::F32, i), lb = loop::load(b, DType::F32, i);
    auto v = sub ? loop::binary(Op::Add, la, loop::unary(Op::Neg, lb))
                 : loop::binary(Op::Add, la, loop::binary(Op::Mul, lb, loop::const_float(2, DType::F32)));
    f.body.push_back(loop::make_for("i", loop::const_int(8), {loop::make_store(0, i, v)}));
    return f;
  };
  loop::LoopFunc f = make(false, false), g = make(true, false), h = make(true, true);
  EXPECT_EQ(code_key(f), code_key(g)) << loop::print_loop(f) << loop::print_loop(g);
  EXPECT_NE(code_key(f), code_key(h));
  EXPECT_EQ(canonical_buffer_order(f), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(canonical_buffer_order(g), (std::vector<int>{2, 1, 0}));
  SameCode same = same_code({&f, &g, &h});
  EXPECT_EQ(same.distinct(), 2u);
  EXPECT_TRUE(same.args[0].empty());
  // the code (f's) takes out, x, y: g's out is its 0, its x its 2, its y its 1
  EXPECT_EQ(same.args[1], (std::vector<int>{0, 2, 1}));
  EXPECT_TRUE(same.args[2].empty());
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

// A pre-LN residual stack (GPT-2's shape): h = x; h = h + linear(layer_norm(h)) per layer.
// T and D are odd/prime on purpose.
Graph residual_stack(int layers, int64_t t, int64_t d) {
  Tensor h = input("x", {SymInt(t), SymInt(d)});
  for (int l = 0; l < layers; ++l) {
    Tensor n = layer_norm(h, 1, from_host(test::sin_weights({d}, 20 + l, 0.37)), from_host(test::sin_weights({d}, 30 + l, 0.37)));
    h = h + (matmul(n, from_host(test::sin_weights({d, d}, l, 0.37))) + from_host(test::sin_weights({d}, 10 + l, 0.37)));
  }
  Tensor out = layer_norm(h, 1, std::nullopt, std::nullopt);
  return Graph::from_outputs({{"y", out.node()}});
}

size_t distinct_kernels(const Program& p) {
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs) fs.push_back(&f);
  return same_code(fs).distinct();
}

TEST(KernelDedup, ResidualStreamIsReadNotRecomputed) {
  // Each layer's layernorm kernel reads the residual sum from a buffer instead of
  // recomputing the chain from x onward (work and code growing with depth), so the layers
  // compile to the same kernels: more layers, no more distinct code.
  Program p3 = build_program(residual_stack(3, 7, 13)), p6 = build_program(residual_stack(6, 7, 13));
  EXPECT_EQ(distinct_kernels(p3), distinct_kernels(p6)) << test::loop_ir_of(p6);
  EXPECT_GT(p6.funcs.size(), p3.funcs.size());
  size_t most_nodes = 0;
  for (auto& k : p6.kg.kernels) most_nodes = std::max(most_nodes, k.nodes.size());
  for (auto& k : p3.kg.kernels) EXPECT_LE(k.nodes.size(), 40u) << k.name;
  EXPECT_LE(most_nodes, 40u) << "a kernel grows with depth:\n" << test::loop_ir_of(p6);
  std::string backend = test::test_backend();
  for (int64_t t : {1, 7, 64}) {
    Graph g = residual_stack(4, t, 13);
    TensorMap in = random_inputs(g, 11);
    EXPECT_EQ(test::compare_outputs(compile_graph(g, backend).run(in), interpret(g, in)), "") << "T=" << t;
  }
}

TEST(KernelDedup, CheapSharedValuesStayInlined) {
  // a bias add read by two kernels is recomputed in each (no extra buffer or kernel)
  Tensor a = input("a", {SymInt(11), SymInt(17)});
  Tensor b = input("b", {SymInt(17)});
  Tensor s = a + b;
  Graph g = Graph::from_outputs({{"y1", softmax(s, -1).node()}, {"y2", layer_norm(s, 1, std::nullopt, std::nullopt).node()}});
  Program p = build_program(g);
  EXPECT_EQ(p.num_kernels(), 2) << test::loop_ir_of(p);
  EXPECT_FALSE(p.kg.materialized(s.node()));
  TensorMap in = random_inputs(g, 4);
  EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in)), "");
}

TEST(KernelDedup, SlicesOfAValueAreNotSharing) {
  // z is read one row per kernel (a recurrence over its rows, an LSTM's input projection):
  // no kernel recomputes another's part, so z stays inlined; the recurrence's state s_t,
  // read in full by the next step and its own output, is nested and materialized.
  int64_t t = 5, d = 7;
  Tensor a = input("a", {SymInt(t), SymInt(d)}), b = input("b", {SymInt(d)});
  Tensor z = a * b;
  Tensor s = select(z, 0, 0);
  std::vector<std::pair<std::string, NodeRef>> outs;
  std::vector<NodeRef> states;
  for (int64_t i = 1; i < t; ++i) {
    s = s * 0.5 + tanh(select(z, 0, i));
    states.push_back(s.node());
    outs.push_back({"y" + std::to_string(i), (s * s).node()});
  }
  Graph g = Graph::from_outputs(outs);
  Program p = build_program(g);
  EXPECT_FALSE(p.kg.materialized(z.node())) << test::loop_ir_of(p);
  for (size_t i = 0; i + 1 < states.size(); ++i) EXPECT_TRUE(p.kg.materialized(states[i])) << i;
  TensorMap in = random_inputs(g, 2);
  EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in)), "");
}

TEST(KernelDedup, RowsAtOtherOffsetsShareCode) {
  // a recurrence over the rows of a materialized tensor (an RNN's input projections): each
  // step's kernel reads its row at another constant offset. The offset moves from the code
  // to the launch (core/loop/base_offsets.h), so the steps are one kernel compiled once.
  for (int64_t t : {3, 9, 17}) {
    int64_t d = 13;
    Tensor a = input("a", {SymInt(t), SymInt(d)}), b = input("b", {SymInt(d)});
    Tensor z = Tensor(prim::copy((a * b).node()));
    Tensor s = tanh(select(z, 0, 0));
    std::vector<std::pair<std::string, NodeRef>> outs;
    for (int64_t i = 1; i < t; ++i) {
      s = Tensor(prim::copy((s * 0.5 + tanh(select(z, 0, i))).node()));
      outs.push_back({"y" + std::to_string(i), s.node()});
    }
    Graph g = Graph::from_outputs(outs);
    Program p = build_program(g);
    std::vector<const loop::LoopFunc*> fs;
    int64_t moved = 0;
    for (auto& f : p.funcs) {
      fs.push_back(&f);
      for (auto& bp : f.buffers) moved += bp.offset != 0;
    }
    EXPECT_GE(moved, t - 2) << test::loop_ir_of(p);
    EXPECT_LE(same_code(fs).distinct(), 4u) << "T=" << t << "\n" << test::loop_ir_of(p);
    TensorMap in = random_inputs(g, 5);
    EXPECT_EQ(test::compare_outputs(compile_graph(g, test::test_backend()).run(in), interpret(g, in)), "") << "T=" << t;
  }
}

TEST(KernelDedup, OffsetsStayOutOfDivisions) {
  // in0[(i + 160) / 4] cannot become in0'[i / 4 + ...]: only outermost constants move, and
  // only when every load of the buffer has one
  loop::LoopFunc f;
  f.name = "k";
  f.kind = "elementwise";
  f.buffers = {{0, "out", DType::F32, true}, {1, "in0", DType::F32, false}, {2, "in1", DType::F32, false}};
  auto i = loop::var("i");
  auto v = loop::binary(Op::Add, loop::load(1, DType::F32, loop::add(i, loop::const_int(40))),
                        loop::load(2, DType::F32, loop::binary(Op::IDiv, loop::add(i, loop::const_int(160)), loop::const_int(4))));
  v = loop::binary(Op::Add, v, loop::load(1, DType::F32, loop::add(i, loop::const_int(41))));
  f.body.push_back(loop::make_for("i", loop::const_int(8), {loop::make_store(0, i, v)}));
  EXPECT_EQ(loop::hoist_base_offsets(f), 1);
  EXPECT_EQ(f.buffers[1].offset, 40);
  EXPECT_EQ(f.buffers[2].offset, 0);
  std::string text = loop::print_loop(f);
  EXPECT_NE(text.find("in0[i]"), std::string::npos) << text;
  EXPECT_NE(text.find("in0[(i + 1)]"), std::string::npos) << text;
  EXPECT_NE(text.find("in0: f32 [r] @+40"), std::string::npos) << text;
}

// shape_free_key: two convolution layers that differ only in their spatial size (and a
// matching channel count) are different code, equal up to constants; a different activation
// or kernel size is different code even so. Prime sizes, batch 1 and 64.
TEST(KernelDedup, LayersOfOtherSizesAreEqualOnlyUpToConstants) {
  Conv2dOptions same;
  same.padding = {1, 1};
  for (int64_t n : {1, 64}) {
    auto layer = [&](int64_t hw, bool sigmoid_act, int64_t r) {
      Tensor x = input("x", {n, 5, hw, hw});
      Conv2dOptions o = r == 3 ? same : Conv2dOptions{};
      Tensor c = conv2d(x, from_host(test::sin_weights({7, 5, r, r}, static_cast<double>(hw), 0.37)), std::nullopt, o);
      Graph g = Graph::from_outputs({{"y", (sigmoid_act ? sigmoid(c) : relu(c)).node()}});
      return build_program(g);
    };
    Program a = layer(11, false, 3), b = layer(13, false, 3), c = layer(13, true, 3), d = layer(13, false, 1);
    ASSERT_EQ(a.funcs.size(), 1u) << test::loop_ir_of(a);
    ASSERT_EQ(b.funcs.size(), 1u);
    std::string what = "batch " + std::to_string(n) + "\n" + test::loop_ir_of(a) + test::loop_ir_of(b);
    EXPECT_NE(code_key(a.funcs[0]), code_key(b.funcs[0])) << what;
    EXPECT_EQ(shape_free_key(a.funcs[0]), shape_free_key(b.funcs[0])) << what;
    EXPECT_NE(shape_free_key(b.funcs[0]), shape_free_key(c.funcs[0])) << "relu vs sigmoid";
    EXPECT_NE(shape_free_key(b.funcs[0]), shape_free_key(d.funcs[0])) << "3x3 vs 1x1";
    EXPECT_EQ(distinct_up_to_constants({&a.funcs[0], &b.funcs[0], &c.funcs[0], &d.funcs[0]}), 3u);
    EXPECT_EQ(same_code({&a.funcs[0], &b.funcs[0], &c.funcs[0], &d.funcs[0]}).distinct(), 4u);
  }
}

}  // namespace
}  // namespace lathe
