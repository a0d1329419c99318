// qdq_rules_test.cpp — the `qdq` rule set (core/rewrite/qdq_rules.h) on small QDQ models
// (qdq_rules/, written by make_qdq_rules.py: grouped strided padded conv with a zero point, a
// conv and QuantizeLinear over tensors larger than what is evaluated whole (conv_big_input),
// Gemm transB with an int32 bias at batch 1, 3-D MatMul at 64 rows, per-channel and
// per-tensor weights, Relu, a contraction read in float). The importer keeps Q/DQ as plain
// ops when asked (OnnxOptions::qdq_rules = false); the rules must fire where expected, the
// rewritten graph must match the plain one on the interpreter (the oracle; float sums and
// the one-multiplier requant round differently, so a requantized value may move by one
// step), its contractions must be int8 GEMMs, and the backend under test must match the
// interpreter on it. Loading with the default options gives the rewritten graph.
#include <cmath>
#include <map>

#include "../backends/diff_util.h"
#include "core/import/onnx_import.h"
#include "core/ir/build.h"
#include "core/loop/lower.h"
#include "core/rewrite/qdq_rules.h"

#ifndef QDQ_RULES_DIR
#error "QDQ_RULES_DIR must point at tests/quant/qdq_rules"
#endif

namespace lathe {
namespace {

std::string dir(const std::string& c) { return std::string(QDQ_RULES_DIR) + "/" + c; }

Graph plain(const std::string& c) {
  OnnxOptions o;
  o.qdq_rules = false;
  return load_onnx(dir(c) + "/model.onnx", o);
}

TensorMap inputs_of(const std::string& c) {
  return {{"x", read_onnx_tensor(dir(c) + "/test_data_set_0/input_0.pb")}};
}

int int8_gemms(const Graph& g) {
  Program p = build_program(g);
  int n = 0;
  for (auto& f : p.funcs)
    if (loop::is_packed_matmul(f) && !f.schedule_log.empty() && f.schedule_log.front().find("int8") != std::string::npos) ++n;
  return n;
}

struct Case {
  std::string name;
  std::map<std::string, int> fired;
  int gemms;    // int8 GEMM kernels (a one-row product is a reduction kernel over the 8-bit operands)
  double step;  // the output's quantization step (or a bound on what one intermediate step moves)
};

const std::vector<Case> kCases = {
    {"conv", {{"qdq-contraction", 2}, {"qdq-bias", 1}, {"qdq-requant", 2}}, 2, 0.02},
    {"gemm_b1", {{"qdq-contraction", 2}, {"qdq-bias", 1}, {"qdq-requant", 2}}, 0, 0.03},
    {"matmul_b64", {{"qdq-contraction", 2}, {"qdq-requant", 1}}, 2, 0.02},
    {"conv_big_input", {{"qdq-contraction", 1}, {"qdq-requant", 1}}, 1, 0.02},
};

TEST(QdqRules, FireAndMatchThePlainGraphOnTheInterpreter) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    Graph g0 = plain(c.name);
    EXPECT_EQ(int8_gemms(g0), 0);
    std::map<std::string, int> fired;
    Graph g1 = apply_qdq_rules(g0, &fired);
    EXPECT_EQ(fired, c.fired);
    EXPECT_EQ(int8_gemms(g1), c.gemms);
    TensorMap in = inputs_of(c.name);
    TensorMap a = interpret(g0, in), b = interpret(g1, in);
    for (auto& [name, want] : a) {
      const HostTensor& got = b.at(name);
      ASSERT_EQ(got.shape(), want.shape());
      int64_t moved = 0;
      double worst = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        double d = std::fabs(got.get_f64(i) - want.get_f64(i));
        worst = std::max(worst, d);
        if (d > 1e-5) ++moved;
      }
      EXPECT_LE(worst, 1.01 * c.step) << name;
      EXPECT_LE(moved, want.numel() / 50) << name << ": " << moved << " of " << want.numel() << " elements moved";
    }
  }
}

TEST(QdqRules, LoadingAppliesThemByDefault) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    Graph g = load_onnx(dir(c.name) + "/model.onnx");
    EXPECT_EQ(int8_gemms(g), c.gemms);
  }
}

TEST(QdqRules, BackendMatchesInterpreterOnTheRewrittenGraph) {
  test::DiffBatch batch;
  for (auto& c : kCases) batch.add(c.name, apply_qdq_rules(plain(c.name)), inputs_of(c.name));
  EXPECT_EQ(batch.run(), 0);
}

// QuantizeLinear rounds through float -> int casts; the llvm backend converts to 8/16/32-bit
// integers with a clamp and a vector conversion (not the per-lane fptosi.sat): saturation at
// both ends, truncation toward zero and NaN -> 0 as the interpreter defines them, in the
// vector body and the tail (37 elements).
TEST(QuantCasts, FloatToIntSaturatesLikeTheInterpreter) {
  const double edge[] = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 2147483520.0, 2147483648.0, -2147483648.0,
                         -2147483904.0, 65535.5, 65536.0, -32768.9, 32767.9, 255.9, 256.0, -0.9, -1.0,
                         127.5, -128.5, -129.0, 0.0, -0.0, 1.5, -2.5, 4e9, 70000.7, -70000.7};
  test::DiffBatch batch;
  for (DType from : {DType::F32, DType::F64}) {
    HostTensor x(from, {37});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, edge[i % (sizeof(edge) / sizeof(edge[0]))]);
    for (DType to : {DType::I8, DType::U8, DType::I16, DType::U16, DType::I32, DType::U32, DType::I64}) {
      NodeRef in = prim::input("x", from, {37});
      batch.add(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)), Graph::from_outputs({{"y", prim::cast(in, to)}}),
                TensorMap{{"x", x}});
    }
  }
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
