// qdq_tiers_test.cpp — QDQ graphs (qdq_tiers/, make_qdq_tiers.py: residual sums of two
// dequantized u8 tensors requantized, over every pair of u8 values and after a 3x3 conv at odd
// channels, stride 1 and 2, maps 7/9/13/14, batch 1 and 3, zero points 0…255) give the
// interpreter's u8 outputs exactly on the backend under test: on llvm untiered (the optimized
// code), on the quick code a tiered start runs first (LATHE_TIER=all) and on the optimized code
// that replaces it. The dequantized products f32(q − z)·s must stay rounded on their own, as
// the interpreter rounds them: an FMA with the sum that reads them moved resnet50_qdq's u8
// activations a step here and there from layer3 on (logits off by up to 1.0 of 151).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "../backends/diff_util.h"
#include "backends/backend.h"
#include "core/import/onnx_import.h"
#include "core/interp/interp.h"

#ifndef QDQ_TIERS_DIR
#error "QDQ_TIERS_DIR must point at tests/quant/qdq_tiers"
#endif

namespace lathe {
namespace {

namespace fs = std::filesystem;

const char* kCases[] = {"pairs_z0", "pairs_z", "conv_c5_m14_s2_b3", "conv_c17_m13_s1", "conv_c3_m9_s2", "conv_c8_m7_s1_b3"};

std::string dir(const std::string& c) { return std::string(QDQ_TIERS_DIR) + "/" + c; }

TensorMap inputs_of(const Graph& g, const std::string& c) {
  TensorMap in;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    in[g.inputs[i]->attrs.name] = read_onnx_tensor(dir(c) + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
  return in;
}

// The u8 outputs equal the interpreter's, element for element
int count_differ(const TensorMap& got, const TensorMap& want, const std::string& what) {
  int bad = 0;
  for (auto& [name, w] : want) {
    const HostTensor& t = got.at(name);
    EXPECT_EQ(t.dtype(), DType::U8) << what << " " << name;
    EXPECT_EQ(t.shape(), w.shape()) << what << " " << name;
    int n = 0;
    for (int64_t i = 0; i < w.numel() && i < t.numel(); ++i)
      if (t.get_f64(i) != w.get_f64(i)) {
        if (n++ < 3) ADD_FAILURE() << what << " " << name << "[" << i << "] = " << t.get_f64(i) << ", the interpreter's " << w.get_f64(i);
      }
    if (n) ADD_FAILURE() << what << " " << name << ": " << n << " of " << w.numel() << " differ";
    bad += n;
  }
  return bad;
}

class QdqTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lathe-qdq-tiers-" + std::to_string(std::random_device{}()));
    ::setenv("LATHE_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("LATHE_CACHE_DIR");
    ::unsetenv("LATHE_TIER");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(QdqTiers, U8OutputsEqualTheInterpreterOnEveryTier) {
  const std::string backend = test::test_backend();
  Backend& b = get_backend(backend);
  if (!b.available().empty()) GTEST_SKIP() << backend << ": " << b.available();
  for (const char* c : kCases) {
    SCOPED_TRACE(c);
    Graph g = load_onnx(dir(c) + "/model.onnx");
    TensorMap in = inputs_of(g, c);
    TensorMap want = interpret(g, in);
    for (auto& [name, w] : want) ASSERT_EQ(w.dtype(), DType::U8) << name;
    {  // untiered: the optimized code from the start
      CompileOptions o;
      o.use_cache = false;
      Program p = build_program(g);
      auto cp = b.compile(p, o);
      Executable exe(std::move(p), cp, backend);
      count_differ(exe.run(in), want, std::string(c) + " untiered");
    }
    if (backend != "llvm") continue;
    ::setenv("LATHE_TIER", "all", 1);  // every code starts quick
    CompileOptions o;
    o.tier = true;
    Program p = build_program(g);
    auto cp = b.compile(p, o);
    EXPECT_NE(cp->command.find("quick tier"), std::string::npos) << cp->command;
    Executable exe(std::move(p), cp, backend);
    count_differ(exe.run(in), want, std::string(c) + " quick tier");
    exe.finish_tiers();
    count_differ(exe.run(in), want, std::string(c) + " optimized tier");
    ::unsetenv("LATHE_TIER");
  }
}

}  // namespace
}  // namespace lathe
