// qdq_sat16_test.cpp — `qdq-sat16` (core/rewrite/qdq_rules.h) on tiny QDQ models whose u8 × s8
// neighbouring products overflow int16 (qdq_sat16/, make_qdq_sat16.py), against ONNX Runtime's
// own fused run on an AVX2 host without VNNI (output_0.pb): convolutions with even input channels
// per group (3×3, strided with a padding zero point at batch 3, grouped), a 1×1 conv with an odd
// K, a MatMul with an odd K; odd channels per group (pairs across taps in ORT) stay exact. The
// interpreter (the oracle) must land within one quantization step of ORT where the rule fires
// (and the exact sums must not: the data saturates), the backend under test must match the
// interpreter through the int8 GEMM's dot4sat16, and loading applies the rule by default exactly
// where the host's ORT saturates (forced through the test hook).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "../backends/diff_util.h"
#include "core/import/onnx_import.h"
#include "core/loop/cost.h"
#include "core/loop/lower.h"
#include "core/rewrite/qdq_rules.h"
#include "core/rewrite/rewriter.h"

#ifndef QDQ_SAT16_DIR
#error "QDQ_SAT16_DIR must point at tests/quant/qdq_sat16"
#endif

namespace lathe {
namespace {

std::string dir(const std::string& c) { return std::string(QDQ_SAT16_DIR) + "/" + c; }

Graph load(const std::string& c, int sat16) {
  OnnxOptions o;
  o.qdq_sat16 = sat16;
  return load_onnx(dir(c) + "/model.onnx", o);
}
TensorMap inputs_of(const std::string& c) { return {{"x", read_onnx_tensor(dir(c) + "/test_data_set_0/input_0.pb")}}; }
HostTensor ort_of(const std::string& c) { return read_onnx_tensor(dir(c) + "/test_data_set_0/output_0.pb"); }

// Reductions in qdq-sat16's form (a Reduce over the clamped pair sums: Neg(Max(Neg(Max(…)))))
int sat16_sums(const Graph& g) {
  int n = 0;
  for (NodeRef x : topo_order(g))
    if (x->op == Op::Reduce && !x->inputs.empty() && x->inputs[0]->op == Op::Neg) ++n;
  return n;
}

struct Case {
  std::string name;
  bool fires;
  bool gemm;  // the saturating sums as the int8 GEMM (an odd K, its last k alone, is a plain reduction)
};
const std::vector<Case> kCases = {
    {"conv3x3_c8", true, true},     {"conv3x3_c6_s2_b3_zp", true, true}, {"conv3x3_c12_g3", true, true},
    {"conv1x1_c5", true, false},    {"matmul_k13_b3", true, false},      {"conv3x3_c10_g2", false, false},
    {"conv3x3_c3", false, false},
    // N <= 64 (49; 2 x 25 at stride 2): the 12 x 8 tile where AVX2 has no VNNI
    {"conv3x3_c16_o29", true, true}, {"conv3x3_c8_o13_s2_b2", true, true},
};

// The output's quantization step: the smallest nonzero difference between two output values.
double step_of(const HostTensor& y) {
  std::vector<double> v(y.numel());
  for (int64_t i = 0; i < y.numel(); ++i) v[i] = y.get_f64(i);
  std::sort(v.begin(), v.end());
  double s = INFINITY;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[i - 1]) s = std::min(s, v[i] - v[i - 1]);
  return s;
}
double steps_off(const HostTensor& got, const HostTensor& want, double step) {
  EXPECT_EQ(got.shape(), want.shape());
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::fabs(got.get_f64(i) - want.get_f64(i)) / step);
  return worst;
}

TEST(QdqSat16Models, InterpreterMatchesOnnxRuntimesFusedRun) {
  for (auto& c : kCases) {
    SCOPED_TRACE(c.name);
    Graph sat = load(c.name, 1), exact = load(c.name, 0);
    EXPECT_EQ(sat16_sums(sat), c.fires ? 1 : 0);
    EXPECT_EQ(sat16_sums(exact), 0);
    if (!c.fires) continue;
    HostTensor ort = ort_of(c.name);
    const double step = step_of(ort);
    EXPECT_LE(steps_off(interpret(sat, inputs_of(c.name)).at("y"), ort, step), 1.01);
    EXPECT_GT(steps_off(interpret(exact, inputs_of(c.name)).at("y"), ort, step), 3.0);  // it does saturate
  }
}

TEST(QdqSat16Models, BackendMatchesInterpreterThroughTheSaturatingGemm) {
  test::DiffBatch batch;
  for (auto& c : kCases) {
    Graph g = load(c.name, 1);
    if (c.gemm) {
      Program p = build_program(g);
      bool dot = false;
      for (auto& f : p.funcs) dot = dot || loop::print_loop(f).find("dot4sat16(") != std::string::npos;
      EXPECT_TRUE(dot) << c.name << ": no saturating dot in an int8 GEMM";
      if (c.name.rfind("conv3x3_c16_o29", 0) == 0 || c.name.rfind("conv3x3_c8_o13", 0) == 0) {
        bool narrow = false;  // N <= 64 on two B vectors a step: one vector, 12 rows (sat16_params)
        for (auto& f : p.funcs)
          for (auto& l : f.schedule_log) narrow = narrow || l.find("NR=8") != std::string::npos;
        EXPECT_EQ(narrow, loop::host_int8_dot_group() != 4 && loop::host_matmul_params().nr == 16) << c.name;
      }
    }
    batch.add(c.name, g, inputs_of(c.name));
  }
  EXPECT_EQ(batch.run(), 0);
}

// The profile's op count (core/loop/cost.h, `lathe run --profile`'s GFLOP/s column): 2 per
// u8 x i8 multiply-add, as the bench counts 2·M·N·K, whether the sums saturate in pairs
// (qdq-sat16: a Reduce over K/2 pair sums) or not (a stem's odd channels), in the int8 GEMM
// (exactly 2·M·N·K) or a plain reduction (on top of its float arithmetic: qdq-sat16's odd K
// fuses the input's quantization into the sum, recomputed per product).
TEST(QdqSat16Models, ProfileCountsTwoOpsPerMultiplyAdd) {
  const std::vector<std::pair<std::string, double>> macs = {
      {"conv3x3_c8", 16.0 * 49 * 72},       {"conv3x3_c6_s2_b3_zp", 3.0 * 5 * 25 * 54}, {"conv3x3_c12_g3", 9.0 * 25 * 36},
      {"conv3x3_c3", 4.0 * 36 * 27},        {"conv1x1_c5", 2.0 * 7 * 25 * 5},          {"matmul_k13_b3", 3.0 * 5 * 11 * 13}};
  for (auto& [name, n] : macs) {
    double ops[2] = {0, 0};
    bool gemm[2] = {false, false};
    for (int sat : {1, 0}) {
      SCOPED_TRACE(name + (sat ? " (saturating pairs)" : " (exact sums)"));
      Program p = build_program(load(name, sat));
      int found = 0;
      for (auto& f : p.funcs) {
        const Kernel& k = p.kg.kernels.at(f.kernel);
        bool contraction = false;
        for (NodeRef x : k.nodes) contraction |= x->op == Op::Reduce && x->dtype == DType::I32;
        if (!contraction) continue;
        ++found;
        ops[sat] = loop::estimate_cost(f, p.kg, {}).flops;
        gemm[sat] = f.kind == "matmul";
        if (gemm[sat]) EXPECT_EQ(ops[sat], 2 * n) << "the int8 GEMM";
        else EXPECT_GE(ops[sat], 2 * n) << "a plain reduction (" << f.kind << ")";
      }
      EXPECT_EQ(found, 1) << "one kernel holds the contraction";
    }
    if (gemm[0] && gemm[1]) EXPECT_EQ(ops[1], ops[0]) << name << ": saturating pairs and exact sums count alike";
  }
}

// The default: qdq-sat16 where ONNX Runtime's kernels saturate (x86 with AVX2, no VNNI), exact
// sums elsewhere; LATHE_QDQ_SAT16=0/1 overrides either way.
TEST(QdqSat16Models, LoadingFollowsTheHostsInt8Kernels) {
  const char* old = std::getenv("LATHE_QDQ_SAT16");
  std::string saved = old ? old : "";
  unsetenv("LATHE_QDQ_SAT16");
  force_host_int8_pairs_saturate(1);
  EXPECT_TRUE(qdq_sat16_default());
  EXPECT_EQ(sat16_sums(load("conv3x3_c8", -1)), 1);
  force_host_int8_pairs_saturate(0);  // a VNNI host (vpdpbusd sums exactly), or not x86
  EXPECT_FALSE(qdq_sat16_default());
  EXPECT_EQ(sat16_sums(load("conv3x3_c8", -1)), 0);
  EXPECT_EQ(sat16_sums(load("conv3x3_c8", 1)), 1);  // asked for
  setenv("LATHE_QDQ_SAT16", "1", 1);
  EXPECT_EQ(sat16_sums(load("conv3x3_c8", -1)), 1);
  force_host_int8_pairs_saturate(1);
  setenv("LATHE_QDQ_SAT16", "0", 1);
  EXPECT_EQ(sat16_sums(load("conv3x3_c8", -1)), 0);
  EXPECT_EQ(sat16_sums(load("conv3x3_c8", 1)), 1);  // the option beats the variable
  setenv("LATHE_QDQ_SAT16", "maybe", 1);
  EXPECT_THROW(qdq_sat16_default(), UserError);
  force_host_int8_pairs_saturate(-1);
  if (old) setenv("LATHE_QDQ_SAT16", saved.c_str(), 1);
  else unsetenv("LATHE_QDQ_SAT16");
}

}  // namespace
}  // namespace lathe
