// samples_test.cpp — the sample gallery: every sample builds and verifies, samples/*.lathe
// are up to date with the builders (regenerate with lathe_make_samples), print → parse →
// print is the identity, and small samples give sensible numbers in the interpreter
// (softmax rows sum to 1; one SGD step lowers the MLP's loss).
// A separate executable so that no other test's nodes are interned first (provenance is
// kept from a node's first creator, and the golden files come from a fresh process).
#include <fstream>
#include <sstream>

#include "core/frontend/samples.h"
#include "core/ir/diag.h"
#include "core/ir/text.h"
#include "tests/frontend/test_util.h"

namespace lathe {
namespace {

using namespace lathe::testing;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Samples, GalleryIsUpToDateAndRoundTrips) {
  // one test, in gallery order, exactly as lathe_make_samples builds them
  for (const auto& name : sample_names()) {
    Graph g = build_sample(name);
    EXPECT_TRUE(verify(g).empty()) << name;
    std::string text = print_graph(g);
    EXPECT_EQ(text, read_file(std::string(LATHE_SOURCE_DIR) + "/samples/" + name + ".lathe"))
        << name << ".lathe is stale: run lathe_make_samples";
    EXPECT_EQ(print_graph(parse_graph(text, name + ".lathe")), text) << name << ": print/parse/print";
    EXPECT_FALSE(sample_description(name).empty());
  }
  for (const auto& name : bench_workload_names()) EXPECT_FALSE(sample_description(name).empty()) << name;
  EXPECT_THROW(build_sample("nope"), UserError);
}

TEST(Samples, SoftmaxRowsSumToOne) {
  Graph g = build_sample("03-softmax");
  TensorMap out = interpret(g, random_inputs(g, 3));
  const HostTensor& y = out.at("y");
  for (int r = 0; r < 64; ++r) {
    double s = 0;
    for (int c = 0; c < 1000; ++c) s += y.get_f64(r * 1000 + c);
    EXPECT_NEAR(s, 1.0, 1e-4) << "row " << r;
  }
}

TEST(Samples, TrainStepLowersTheLoss) {
  Graph g = build_sample("07-mlp-train-step");
  TensorMap in = random_inputs(g, 5);
  for (const char* w : {"fc1.w", "fc2.w"}) {  // N(0,1) weights are too large for 784 inputs
    HostTensor& t = in.at(w);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, t.get_f64(i) * 0.05);
  }
  double first = 0, last = 0;
  for (int step = 0; step < 3; ++step) {
    TensorMap updated;
    TensorMap out = interpret(g, in, &updated);
    double loss = out.at("loss").get_f64(0);
    if (step == 0) first = loss;
    last = loss;
    ASSERT_EQ(updated.size(), 4u);
    for (auto& [name, value] : updated) in[name] = value;
  }
  EXPECT_LT(last, first);
}

}  // namespace
}  // namespace lathe
