// row_reduce_test.cpp — reductions that get rows of accumulators (core/loop/row_reduce.h):
// depthwise and grouped convolutions with their epilogues, pooling, reductions over
// non-innermost axes and vector-matrix products, at odd and prime sizes, batch 1 and 64,
// against the interpreter on the backend under test; and that the default schedule takes
// the path (and leaves contiguous reductions alone).
#include "core/frontend/nn.h"
#include "core/ir/build.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/row_reduce.h"
#include "diff_util.h"

namespace lathe {
namespace {

Graph one(const Tensor& y) { return Graph::from_outputs({{"y", y.node()}}); }

bool has_rows(const Program& p) {
  for (auto& f : p.funcs)
    for (auto& l : f.schedule_log)
      if (l.rfind("reduce_rows", 0) == 0) return true;
  return false;
}

struct Dw {
  int64_t n, c, h, w, r, s, stride, pad, dil, mult;  // mult: output channels per group
};

Tensor depthwise(const Dw& t, bool epilogue) {
  Conv2dOptions o;
  o.stride = {t.stride, t.stride};
  o.padding = {t.pad, t.pad};
  o.dilation = {t.dil, t.dil};
  o.groups = t.c;
  Tensor x = input("x", {t.n, t.c, t.h, t.w});
  Tensor w = input("w", {t.c * t.mult, 1, t.r, t.s});
  Tensor y = conv2d(x, w, std::nullopt, o);
  if (!epilogue) return y;
  Tensor scale = input("scale", {t.c * t.mult, 1, 1}), shift = input("shift", {t.c * t.mult, 1, 1});
  return clamp(y * scale + shift, Scalar(0.0), Scalar(6.0));  // BatchNorm + ReLU6
}

const std::vector<Dw> kDepthwise = {
    {1, 3, 7, 9, 3, 3, 1, 1, 1, 1},      // batch 1, odd sizes, padding
    {2, 5, 13, 17, 3, 3, 2, 1, 1, 1},    // stride 2
    {1, 4, 5, 3, 5, 5, 1, 2, 1, 1},      // window wider than the row
    {3, 2, 11, 40, 3, 3, 1, 2, 2, 1},    // dilation 2
    {1, 3, 6, 300, 3, 3, 1, 1, 1, 1},    // a row of several blocks (300 = 2 x 152 - 4)
    {64, 3, 4, 5, 3, 3, 1, 1, 1, 1},     // batch 64, tiny planes
    {1, 7, 9, 31, 3, 3, 2, 0, 1, 2},     // no padding, two outputs per channel
    {2, 2, 8, 23, 1, 7, 1, 3, 1, 1},     // a 1x7 window
    {1, 3, 19, 19, 7, 1, 3, 3, 1, 1},    // a 7x1 window, stride 3
    {1, 2, 10, 97, 3, 11, 1, 5, 1, 1},   // a window wider than 8: not unrolled
};

// a depthwise convolution (one output per channel) takes the direct nest
// (depthwise_test.cpp); with two outputs per channel it is a batched GEMM; rows serve the rest
TEST(RowReduce, DepthwiseConvTakesTheDirectNest) {
  for (bool ep : {false, true}) {
    Program p = build_program(one(depthwise(kDepthwise[1], ep)));
    EXPECT_FALSE(has_rows(p)) << test::loop_ir_of(p);
    EXPECT_TRUE(loop::is_depthwise(p.funcs.at(0))) << test::loop_ir_of(p);
    EXPECT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);  // the epilogue stays fused
  }
}

TEST(RowReduce, DepthwiseConvMatchesInterpreter) {
  test::DiffBatch batch;
  int i = 0;
  for (auto& t : kDepthwise)
    for (bool ep : {false, true}) batch.add("depthwise " + std::to_string(i++), one(depthwise(t, ep)));
  EXPECT_EQ(batch.run(), 0);
}

TEST(RowReduce, GroupedConvWithOneOutputPerGroup) {
  // groups = C / 3, one output channel per group: no matmul rows, a reduction over (3, R, S),
  // which the direct depthwise nest takes (three input planes per output)
  test::DiffBatch batch;
  for (auto [n, c, h, w, s] : std::vector<std::array<int64_t, 5>>{{1, 6, 9, 13, 1}, {2, 9, 7, 30, 2}}) {
    Conv2dOptions o;
    o.stride = {s, s};
    o.padding = {1, 1};
    o.groups = c / 3;
    Tensor x = input("x", {n, c, h, w});
    Tensor wt = input("w", {c / 3, 3, 3, 3});
    Tensor b = input("b", {c / 3});
    Graph g = one(relu(conv2d(x, wt, b, o)));
    EXPECT_TRUE(loop::is_depthwise(build_program(g).funcs.at(0)));  // the direct nest (depthwise_test.cpp)
    batch.add("grouped " + std::to_string(c), g);
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(RowReduce, PoolingMatchesInterpreter) {
  test::DiffBatch batch;
  for (auto [n, c, h, w, k, s, pd] : std::vector<std::array<int64_t, 7>>{
           {1, 3, 17, 23, 3, 2, 1}, {2, 4, 8, 9, 2, 2, 0}, {64, 2, 5, 7, 3, 1, 1}, {1, 2, 11, 290, 3, 2, 1}}) {
    Pool2dOptions o;
    o.kernel = {k, k};
    o.stride = {s, s};
    o.padding = {pd, pd};
    Tensor x = input("x", {n, c, h, w});
    Graph mp = one(max_pool2d(x, o));
    EXPECT_TRUE(has_rows(build_program(mp))) << test::loop_ir_of(build_program(mp));
    batch.add("max pool " + std::to_string(w), mp);
    batch.add("avg pool " + std::to_string(w), one(avg_pool2d(x, o)));
    o.count_include_pad = false;
    batch.add("avg pool (no pad count) " + std::to_string(w), one(avg_pool2d(x, o)));
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(RowReduce, ReductionsOverOuterAxes) {
  test::DiffBatch batch;
  Tensor a = input("x", {37, 1031});
  Graph colsum = one(sum(a, {0}));
  EXPECT_TRUE(has_rows(build_program(colsum)));
  batch.add("column sum", colsum);
  batch.add("column max", one(amax(a, {0})));
  batch.add("column mean * 2 + 1", one(mean(a, {0}) * 2.0 + 1.0));
  Tensor b = input("x", {5, 7, 300});
  batch.add("sum over the middle axis", one(sum(b, {1})));
  batch.add("sum over two outer axes", one(sum(b, {0, 1})));
  // softmax along a non-innermost axis: a max row, then a sum row that reads it
  Tensor m = amax(b, {1}, true);
  Tensor e = exp(b - m);
  batch.add("softmax over axis 1", one(e / sum(e, {1}, true)));
  EXPECT_EQ(batch.run(), 0);
}

TEST(RowReduce, VectorMatrixProducts) {
  test::DiffBatch batch;
  for (auto [k, n] : std::vector<std::array<int64_t, 2>>{{37, 301}, {64, 1031}, {3, 17}}) {
    Tensor x = input("x", {1, k}), w = input("w", {k, n}), bias = input("b", {n});
    Graph g = one(relu(matmul(x, w) + bias));
    EXPECT_TRUE(has_rows(build_program(g))) << test::loop_ir_of(build_program(g));
    batch.add("x @ W " + std::to_string(n), g);
    // x @ W^T reads W along its rows (contiguous): the plain vectorized reduction stays
    Tensor wt = input("wt", {n, k});
    batch.add("x @ W^T " + std::to_string(n), one(matmul(x, transpose(wt, 0, 1))));
  }
  EXPECT_EQ(batch.run(), 0);
}

// a long reduction over several blocks whose row loop is the kernel's outermost (parallel)
// loop: a multiple of the cores' count of blocks, each up to kMaxThreadRow (a 50k-wide
// GEMV: 2 runs of 100 KB per reduction step, not 25 of 8 KB); inner row loops, rows of one
// block and a window's rows keep the caps
TEST(RowReduce, OutermostLongRowsSplitOverTheCores) {
  EXPECT_EQ(loop::row_block(50257, true, true, 2), 25136);
  EXPECT_EQ(loop::row_block(50257, true, true, 1), 2016);    // one core: the 2048 cap
  EXPECT_EQ(loop::row_block(50257, true, false, 2), 2016);   // not the parallel loop
  EXPECT_EQ(loop::row_block(1024, true, true, 2), 1024);     // one block: stays on one core
  EXPECT_EQ(loop::row_block(4099, true, true, 2), 2056);     // 2 blocks, not 3
  EXPECT_EQ(loop::row_block(70001, true, true, 3), 23336);   // 3 blocks (the last 23329)
  EXPECT_EQ(loop::row_block(100003, true, true, 2), 25008);  // 4 blocks of up to 32768
  EXPECT_EQ(loop::row_block(5000, false, true, 2), 256);     // a window's row: 256 at most
  // against the interpreter: prime widths, several blocks with a short last one
  test::DiffBatch batch;
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 8, 70001}, {1, 3, 4099}, {1, 5, 257}}) {
    Tensor x = input("x", {m, k}), w = input("w", {k, n});
    Graph g = one(matmul(x, w));
    EXPECT_TRUE(has_rows(build_program(g))) << test::loop_ir_of(build_program(g));
    batch.add("x @ W " + std::to_string(k) + "x" + std::to_string(n), g);
  }
  batch.add("column sum 97 x 2053", one(sum(input("x", {97, 2053}), {0})));
  batch.add("column max 263 x 1031", one(amax(input("x", {263, 1031}), {0})));
  EXPECT_EQ(batch.run(), 0);
}

// conv → bias → ReLU6 → depthwise conv / max pool: the bias and activation are the first
// conv's epilogue (computed once), not recomputed by the window for each of its taps
TEST(RowReduce, ActivationBeforeAWindowIsTheMatmulsEpilogue) {
  test::DiffBatch batch;
  for (int64_t w : {9, 23}) {
    Tensor x = input("x", {2, 5, 11, w});
    Tensor w1 = input("w1", {6, 5, 1, 1}), b1 = input("b1", {6});
    Tensor a = clamp(conv2d(x, w1, b1), Scalar(0.0), Scalar(6.0));
    Conv2dOptions dw;
    dw.padding = {1, 1};
    dw.groups = 6;
    Tensor wd = input("wd", {6, 1, 3, 3});
    Pool2dOptions po;
    po.kernel = {3, 3};
    po.stride = {2, 2};
    po.padding = {1, 1};
    for (Graph g : {one(conv2d(a, wd, std::nullopt, dw)), one(max_pool2d(relu(conv2d(x, w1, b1)), po))}) {
      Program p = build_program(g);
      ASSERT_EQ(p.num_kernels(), 2) << test::loop_ir_of(p);
      const Kernel& k = p.kg.kernels[0];
      EXPECT_EQ(k.kind, "matmul");
      EXPECT_NE(k.root, k.matmul) << "the activation should be the conv's epilogue\n" << test::loop_ir_of(p);
      batch.add("conv, activation, window " + std::to_string(w), g);
    }
  }
  EXPECT_EQ(batch.run(), 0);
}

// symbolic sizes: blocks of 256 with a last partial block; f16 and integer rows (llvm)
TEST(RowReduce, SymbolicSizesAndOtherDtypes) {
  Tensor x = input("x", {SymInt::var("R"), SymInt::var("C")});
  Graph g = one(sum(x, {0}) * 0.5);
  EXPECT_TRUE(has_rows(build_program(g)));
  Executable exe = compile_graph(g, test::test_backend());
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{5, 8}, {3, 1}, {1, 1}, {17, 257}, {2, 600}}) {
    TensorMap in{{"x", random_tensor(DType::F32, {r, c}, static_cast<uint64_t>(r * 1000 + c))}};
    EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in)), "") << r << "x" << c;
  }
  test::DiffBatch batch;
  std::vector<DType> dts{DType::I32, DType::F64};
  if (test::test_backend() == "llvm") dts.push_back(DType::F16);
  for (DType dt : dts) {
    Tensor a = input("a", {9, 301}, dt);
    batch.add("column sum " + std::string(dtype_name(dt)), one(sum(a, {0})));
    batch.add("column max " + std::string(dtype_name(dt)), one(amax(a, {0})));
  }
  for (ReduceOp r : {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul}) {  // logical or / and on bool
    NodeRef b = prim::input("b", DType::Bool, {7, 45});
    Graph g = Graph::from_outputs({{"y", prim::reduce(r, b, {0})}});
    EXPECT_TRUE(has_rows(build_program(g)));
    batch.add("bool column reduce", g);
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(RowReduce, ContiguousReductionsAreLeftAlone) {
  Tensor a = input("x", {37, 1031});
  EXPECT_FALSE(has_rows(build_program(one(sum(a, {1})))));
  Tensor x = input("x", {1, 300}), wt = input("wt", {301, 300});
  EXPECT_FALSE(has_rows(build_program(one(matmul(x, transpose(wt, 0, 1))))));
}

}  // namespace
}  // namespace lathe
