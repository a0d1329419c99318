// requant_epilogue_test.cpp — the requantization of an int8 contraction (i32 sum → f32 ·
// scale → round → + zero point → clamp → u8/i8, as the QDQ rules and QLinear ops build it)
// computed in the int8 GEMM's write-back: one kernel that writes the 8-bit output, its
// partial sums over K blocks kept in a scratch, exactly equal to the interpreter on the
// backend under test (LATHE_TEST_BACKEND, LATHE_INT8_DOT): per-tensor and per-channel
// scales, zero points, a bias, ReLU, odd and prime sizes, one row, 64 rows, a split M,
// convolutions with padding and strides, and a requantized convolution read by a max pool;
// constant weights packed once at build (Int8Prepack).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <tuple>

#include "../backends/diff_util.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/loop/lower.h"

#include "int8_data.h"

namespace lathe {
namespace {

using test::full_range;

// Scales that put a K-term sum of full-range products at about ±200 (some saturate), per
// channel (shape: 1 everywhere but the channel dim) from 0.5x to 2x of that.
Tensor scales(int64_t K, const std::vector<int64_t>& shape, bool per_channel) {
  const double base = 200.0 / (std::sqrt(static_cast<double>(K)) * 255 * 74);
  if (!per_channel) return scalar(base, DType::F32);
  HostTensor s(DType::F32, shape);
  for (int64_t i = 0; i < s.numel(); ++i) s.set_f64(i, static_cast<float>(base * (0.5 + 1.5 * (i % 7) / 6.0)));
  return from_host(s);
}

// y = saturate(round(f32(acc) · scale) + zp) as `out` (the importer's QuantizeLinear: a clamp
// to ±2^22, then the round-to-nearest-even by adding and subtracting 1.5 · 2^23); f32 output:
// the dequantized value (q − zp) · s_y.
Tensor requant(const Tensor& acc, const Tensor& scale, int64_t zp, DType out, bool relu = false) {
  Tensor v = to(acc, DType::F32) * scale;
  if (relu) v = maximum(v, scalar(0.0, DType::F32));
  v = clamp(v, Scalar(-4194304.0), Scalar(4194304.0));
  Tensor r = (v + scalar(12582912.0, DType::F32)) - scalar(12582912.0, DType::F32);
  Tensor q = to(r, DType::I32) + scalar(zp, DType::I32);
  bool u8 = out == DType::U8 || out == DType::F32;
  q = clamp(q, Scalar(int64_t(u8 ? 0 : -128)), Scalar(int64_t(u8 ? 255 : 127)));
  if (out != DType::F32) return to(q, out);
  return to(q - scalar(zp, DType::I32), DType::F32) * scalar(0.05, DType::F32);
}

struct MmCase {
  int64_t m, k, n;
  bool per_channel;
  int64_t zp;
  DType out;
  bool bias = false, relu = false;
};

Graph mm_requant(const MmCase& c) {
  Tensor a = input("a", {c.m, c.k}, DType::U8), b = input("b", {c.k, c.n}, DType::I8);
  Tensor acc = matmul_integer(a, b);
  if (c.bias) acc = acc + input("bias", {c.n}, DType::I32);
  return Graph::from_outputs({{"y", requant(acc, scales(c.k, {1, c.n}, c.per_channel), c.zp, c.out, c.relu).node()}});
}

TensorMap mm_inputs(const MmCase& c, uint64_t seed) {
  TensorMap in{{"a", full_range(DType::U8, {c.m, c.k}, seed)}, {"b", full_range(DType::I8, {c.k, c.n}, seed + 50)}};
  if (c.bias) {
    HostTensor bias(DType::I32, {c.n});
    for (int64_t i = 0; i < c.n; ++i) bias.set_i64(i, (i * 7919) % 20001 - 10000);
    in["bias"] = bias;
  }
  return in;
}

const std::vector<MmCase> kMmCases = {
    {65, 129, 33, false, 3, DType::U8},                // one K block, ragged tiles
    {7, 600, 13, true, -5, DType::I8},                 // three K blocks: partial sums in the scratch
    {1, 37, 40, true, 128, DType::U8, true},           // one row (batch 1), a bias
    {64, 301, 50, true, 0, DType::U8, true, true},     // 64 rows, prime K, bias and ReLU
    {300, 521, 16, false, 17, DType::U8},              // M split across threads, K prime over blocks
    {31, 263, 97, true, 100, DType::F32, true},        // dequantized f32 output
    {6, 1024, 16, false, 0, DType::I8},                // whole tiles only, several K blocks (KC 256)
    {10, 2311, 16, true, 9, DType::U8},                // K past the integer KC (int_kc: 512 i16, 1024 u8 x i8)
};

// Each requantized product is one matmul kernel writing the 8-bit output directly.
TEST(RequantEpilogue, FusesIntoTheInt8Gemm) {
  for (const MmCase& c : kMmCases) {
    if (c.m == 1) continue;  // a one-row product is a reduction kernel, not the packed GEMM
    if (c.out == DType::F32) {  // a dequantized (f32) root stays a kernel of its own (fusable_epilogue)
      EXPECT_EQ(build_program(mm_requant(c)).num_kernels(), 2);
      continue;
    }
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n));
    Program p = build_program(mm_requant(c));
    ASSERT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
    EXPECT_TRUE(loop::is_packed_matmul(p.funcs[0])) << test::loop_ir_of(p);
    const std::string& log = p.funcs[0].schedule_log.front();
    EXPECT_NE(log.find("int8"), std::string::npos) << log;
    EXPECT_NE(log.find("+epilogue(" + std::string(dtype_name(c.out)) + ")"), std::string::npos) << log;
    EXPECT_EQ(p.kg.buffers.at(p.funcs[0].buffers[0].buffer).dtype, c.out);
    // more than one K block: the partial sums go to the scratch, never to the 8-bit output
    std::string ir = test::loop_ir_of(p);
    // (the K block is the integer one, int_kc: read from the schedule line)
    const size_t at = log.find("KC=");
    ASSERT_NE(at, std::string::npos) << log;
    const int64_t kc = std::stoll(log.substr(at + 3));
    EXPECT_EQ(ir.find("Cs[") != std::string::npos, c.k > kc) << ir;
    if (c.k == 600 && getenv("SHOW_IR")) std::cout << ir;
  }
}

// A large output with several K blocks would need a scratch over 2 MB (on a worker's
// stack): the requantization stays a kernel of its own there, and is still exact.
TEST(RequantEpilogue, LargeOutputsKeepTheirOwnKernel) {
  MmCase c{1100, 300, 500, true, 9, DType::U8};
  Graph g = mm_requant(c);
  Program p = build_program(g);
  EXPECT_EQ(p.num_kernels(), 2) << test::loop_ir_of(p);
  MmCase one{1100, 200, 500, true, 9, DType::U8};  // one K block: no scratch, fused
  EXPECT_EQ(build_program(mm_requant(one)).num_kernels(), 1);
  test::DiffBatch batch;
  batch.add("large requant", g, mm_inputs(c, 5));
  EXPECT_EQ(batch.run(), 0);
}

TEST(RequantEpilogue, MatmulMatchesInterpreter) {
  test::DiffBatch batch;
  uint64_t seed = 11;
  for (const MmCase& c : kMmCases) {
    batch.add("requant " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n), mm_requant(c),
              mm_inputs(c, seed));
    seed += 3;
  }
  EXPECT_EQ(batch.run(), 0);
}

struct ConvCase {
  int64_t n, c, h, w, k, r;
  std::vector<int64_t> stride, pad;
  int64_t x_zp;  // the input's zero point: the padding value, and − x_zp · Σw per channel
  bool per_channel, relu;
  DType out;
};

Graph conv_requant(const ConvCase& c, bool pool = false) {
  Tensor x = input("x", {c.n, c.c, c.h, c.w}, DType::U8), w = input("w", {c.k, c.c, c.r, c.r}, DType::I8);
  Conv2dOptions o;
  o.stride = c.stride;
  o.padding = c.pad;
  Tensor acc = conv2d_integer(x, w, o, c.x_zp);
  if (c.x_zp != 0)  // − x_zp · Σ w per output channel (the QDQ rules fold it from the weights)
    acc = acc - input("wz", {1, c.k, 1, 1}, DType::I32);
  Tensor y = requant(acc, scales(c.c * c.r * c.r, {1, c.k, 1, 1}, c.per_channel), 0, c.out, c.relu);
  if (pool) {
    Pool2dOptions po;
    po.kernel = {3, 3};
    po.stride = {2, 2};
    po.padding = {1, 1};
    y = to(max_pool2d(to(y, DType::F32), po), c.out);
  }
  return Graph::from_outputs({{"y", y.node()}});
}

const std::vector<ConvCase> kConvCases = {
    {1, 5, 9, 7, 11, 3, {2, 1}, {1, 1}, 131, true, true, DType::U8},     // odd channels, strided, padded with zp
    {2, 67, 13, 11, 19, 3, {1, 1}, {1, 1}, 0, true, false, DType::I8},  // K = 603: three K blocks
    {1, 3, 23, 23, 16, 7, {2, 2}, {3, 3}, 7, false, true, DType::U8},   // a stem: 7x7 stride 2
    {1, 256, 7, 7, 64, 1, {1, 1}, {0, 0}, 0, true, true, DType::U8},    // 1x1, few positions
    {1, 8, 14, 14, 24, 3, {1, 1}, {1, 1}, 5, true, true, DType::U8},     // even K: B packed by runs
    {2, 32, 9, 17, 13, 3, {2, 2}, {1, 1}, 0, false, false, DType::U8},  // by runs, two K blocks, batch 2
    {1, 64, 28, 28, 37, 1, {2, 2}, {0, 0}, 0, true, false, DType::I8},  // strided 1x1 (a downsample)
};

TEST(RequantEpilogue, ConvMatchesInterpreter) {
  test::DiffBatch batch;
  uint64_t seed = 40;
  for (const ConvCase& c : kConvCases) {
    HostTensor w = full_range(DType::I8, {c.k, c.c, c.r, c.r}, seed + 1);
    TensorMap in{{"x", full_range(DType::U8, {c.n, c.c, c.h, c.w}, seed)}, {"w", w}};
    if (c.x_zp != 0) {
      HostTensor wz(DType::I32, {1, c.k, 1, 1});
      const int64_t per = c.c * c.r * c.r;
      for (int64_t o = 0; o < c.k; ++o) {
        int64_t sum = 0;
        for (int64_t i = 0; i < per; ++i) sum += w.get_i64(o * per + i);
        wz.set_i64(o, c.x_zp * sum);
      }
      in["wz"] = wz;
    }
    batch.add("conv requant C=" + std::to_string(c.c) + " K=" + std::to_string(c.k), conv_requant(c), in);
    batch.add("conv requant + max pool C=" + std::to_string(c.c), conv_requant(c, true), in);
    seed += 2;
  }
  EXPECT_EQ(batch.run(), 0);
}

// A residual (an f32 input of the output's shape, ResNet's skip tensor) added before the
// requantization: one kernel, the residual's rows of each tile prefetched for reading like
// the output's (`prefetch.r`), equal to the interpreter at odd and prime sizes, batch rows 1 to 3.
TEST(RequantEpilogue, ResidualIsPrefetchedAndExact) {
  test::DiffBatch batch;
  uint64_t seed = 90;
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{37, 67, 45}, {3, 64, 29}, {16, 131, 33}}) {
    Tensor a = input("a", {m, k}, DType::U8), b = input("b", {k, n}, DType::I8), r = input("r", {m, n}, DType::F32);
    Tensor v = maximum(to(matmul_integer(a, b), DType::F32) * scales(k, {1, n}, true) + r, scalar(0.0, DType::F32));
    v = clamp(v, Scalar(-4194304.0), Scalar(4194304.0));
    Tensor q = to((v + scalar(12582912.0, DType::F32)) - scalar(12582912.0, DType::F32), DType::I32) + scalar(int64_t(7), DType::I32);
    Graph g = Graph::from_outputs({{"y", to(clamp(q, Scalar(int64_t(0)), Scalar(int64_t(255))), DType::U8).node()}});
    Program p = build_program(g);
    ASSERT_EQ(p.num_kernels(), 1) << test::loop_ir_of(p);
    std::string ir = test::loop_ir_of(p);
    EXPECT_NE(ir.find("prefetch.r "), std::string::npos) << ir;
    HostTensor rv(DType::F32, {m, n});
    for (int64_t i = 0; i < rv.numel(); ++i) rv.set_f64(i, ((i * 37) % 101 - 50) * 0.5);
    batch.add("residual requant " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), g,
              TensorMap{{"a", full_range(DType::U8, {m, k}, seed)}, {"b", full_range(DType::I8, {k, n}, seed + 1)}, {"r", rv}});
    seed += 2;
  }
  EXPECT_EQ(batch.run(), 0);
}

// A requantized convolution read through a max pool's padded windows: the GEMM writes the
// 8-bit values once (the narrowest value of the chain is the buffer), the pool reads them.
TEST(RequantEpilogue, MaxPoolReadsTheRequantizedBuffer) {
  const ConvCase& c = kConvCases[2];
  Program p = build_program(conv_requant(c, true));
  int gemms = 0;
  for (auto& f : p.funcs) {
    if (!loop::is_packed_matmul(f)) continue;
    ++gemms;
    EXPECT_NE(f.schedule_log.front().find("+epilogue(u8)"), std::string::npos) << f.schedule_log.front();
    EXPECT_EQ(p.kg.buffers.at(f.buffers[0].buffer).dtype, DType::U8) << test::loop_ir_of(p);
  }
  EXPECT_EQ(gemms, 1) << test::loop_ir_of(p);
}

// Constant 8-bit weights are packed once when the program is built, into the integer panels
// the kernel reads (prepack.h): B for a matmul's weight (the N side), A for a convolution's
// (the M side). Odd K (a zero-padded last group), several K blocks, one row and 64 rows,
// per-channel requantization; equal to the interpreter.
TEST(Int8Prepack, ConstantWeightsArePackedOnceAndMatch) {
  struct W { int64_t m, k, n; };
  test::DiffBatch batch;
  int prepacked = 0, gemms = 0;
  uint64_t seed = 70;
  for (W c : {W{64, 301, 50}, W{7, 600, 13}, W{2, 37, 97}, W{65, 129, 33}}) {
    Tensor a = input("a", {c.m, c.k}, DType::U8);
    Tensor acc = matmul_integer(a, from_host(full_range(DType::I8, {c.k, c.n}, seed)));
    Graph g = Graph::from_outputs({{"y", requant(acc, scales(c.k, {1, c.n}, true), 3, DType::U8).node()}});
    Program p = build_program(g);
    for (auto& f : p.funcs)
      if (loop::is_packed_matmul(f)) {
        ++gemms;
        prepacked += f.schedule_log.front().find("B prepacked") != std::string::npos;
      }
    batch.add("prepacked B " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n), g,
              TensorMap{{"a", full_range(DType::U8, {c.m, c.k}, seed + 1)}});
    seed += 2;
  }
  for (const ConvCase& c : kConvCases) {
    if (c.x_zp != 0) continue;
    Tensor x = input("x", {c.n, c.c, c.h, c.w}, DType::U8);
    Conv2dOptions o;
    o.stride = c.stride;
    o.padding = c.pad;
    Tensor acc = conv2d_integer(x, from_host(full_range(DType::I8, {c.k, c.c, c.r, c.r}, seed)), o, 0);
    Graph g = Graph::from_outputs({{"y", requant(acc, scales(c.c * c.r * c.r, {1, c.k, 1, 1}, c.per_channel), 0, c.out, c.relu).node()}});
    Program p = build_program(g);
    for (auto& f : p.funcs)
      if (loop::is_packed_matmul(f)) {
        ++gemms;
        prepacked += f.schedule_log.front().find("prepacked") != std::string::npos;
      }
    batch.add("prepacked conv C=" + std::to_string(c.c) + " K=" + std::to_string(c.k), g,
              TensorMap{{"x", full_range(DType::U8, {c.n, c.c, c.h, c.w}, seed + 1)}});
    seed += 2;
  }
  EXPECT_EQ(gemms, prepacked);
  EXPECT_GE(gemms, 6);
  EXPECT_EQ(batch.run(), 0);
}

// Did the lowering of kernel i (a packed GEMM) put the weights on the B side and the
// positions on A? loop::orient_matmul at the tile its log names ("matmul: MR=8 int8 … NR=32").
bool weights_on_b(const Program& p, int i) {
  const std::string& log = p.funcs[i].schedule_log.front();
  const size_t mr = log.find("MR="), nr = log.find("NR=");
  EXPECT_TRUE(mr != std::string::npos && nr != std::string::npos) << log;
  if (mr == std::string::npos || nr == std::string::npos) return false;
  loop::MatmulParams tile;
  tile.mr = std::atoi(log.c_str() + mr + 3), tile.nr = std::atoi(log.c_str() + nr + 3);
  const Kernel& k = p.kg.kernels[i];
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  EXPECT_TRUE(mm) << log;
  return mm && loop::orient_matmul(*mm, tile);
}

// A convolution with prepacked weights and more channels than positions (a 14 x 14 layer)
// splits N across the threads, not M: an M split made every job pack all of B. Odd channel
// counts, stride 1 and 2, batch 1 and 2; equal to the interpreter. Where the lowering puts
// the positions on A (loop::orient_matmul: 9 x 11 under AVX-512's NR=32, never under AVX2's
// 16), the weights are B, packed once, and no job packs them.
TEST(Int8Prepack, PrepackedConvSplitsPositions) {
  struct C { std::vector<int64_t> x; int64_t k, stride; };
  test::DiffBatch batch;
  uint64_t seed = 90;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (C c : {C{{1, 13, 9, 11}, 150, 1}, C{{2, 13, 9, 11}, 151, 1}, C{{1, 11, 15, 15}, 97, 2}}) {
    Tensor x = input("x", Shape(c.x.begin(), c.x.end()), DType::U8);
    Conv2dOptions o;
    o.stride = {c.stride, c.stride};
    o.padding = {1, 1};
    Tensor acc = conv2d_integer(x, from_host(full_range(DType::I8, {c.k, c.x[1], 3, 3}, seed)), o, 0);
    Graph g = Graph::from_outputs({{"y", requant(acc, scales(c.x[1] * 9, {1, c.k, 1, 1}, true), 0, DType::U8, true).node()}});
    Program p = build_program(g);
    for (int i = 0; i < p.num_kernels(); ++i) {
      const loop::LoopFunc& f = p.funcs[i];
      if (!loop::is_packed_matmul(f)) continue;
      const std::string& log = f.schedule_log.front();
      if (weights_on_b(p, i)) {
        EXPECT_NE(log.find("B prepacked"), std::string::npos) << log;
        EXPECT_EQ(log.find("A prepacked"), std::string::npos) << log;
        continue;
      }
      EXPECT_NE(log.find("A prepacked"), std::string::npos) << log;
      const int64_t oh = (c.x[2] + 2 - 3) / c.stride + 1, ow = (c.x[3] + 2 - 3) / c.stride + 1;
      if (c.x[0] == 1 && (oh * ow + 15) / 16 >= static_cast<int64_t>(threads) && !std::getenv("LATHE_INT8_SPLIT_N"))
        EXPECT_NE(log.find("msplit=1"), std::string::npos) << log;
    }
    batch.add("prepacked conv split N " + std::to_string(c.k), g, TensorMap{{"x", full_range(DType::U8, c.x, seed + 1)}});
    seed += 2;
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
