// text_roundtrip_test.cpp — print → parse → print is the identity: over the graph zoo in
// test_graphs.h (every op, dtype, symbolic shape, view kind, literal and provenance) and
// over every samples/*.lathe file (globbed at run time, so new samples are covered).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/ir/diag.h"
#include "core/ir/loader.h"
#include "core/ir/text.h"
#include "core/ir/verify.h"
#include "tests/passes/test_graphs.h"

using namespace lathe;

namespace {

void expect_round_trip(const Graph& g, const std::string& what) {
  std::string first = print_graph(g);
  Graph parsed;
  try {
    parsed = parse_graph(first, what);
  } catch (const UserError& e) {
    FAIL() << what << ": the printed text does not parse:\n" << e.what() << "\n--- text ---\n" << first;
  }
  std::string second = print_graph(parsed);
  EXPECT_EQ(first, second) << what;
  EXPECT_TRUE(verify(parsed).empty()) << what;
  EXPECT_EQ(parsed.inputs.size(), g.inputs.size()) << what;
  EXPECT_EQ(parsed.outputs.size(), g.outputs.size()) << what;
}

}  // namespace

TEST(TextRoundTrip, EveryTestGraph) {
  for (auto& [name, g] : test_graphs::all_test_graphs()) {
    ASSERT_TRUE(verify(g).empty()) << name << ": the fixture itself must verify";
    expect_round_trip(g, name);
  }
}

TEST(TextRoundTrip, ParsedNodesAreTheSameNodes) {
  // Hash-consing: parsing the printed form of a graph finds the very same nodes.
  Graph g = test_graphs::mlp_graph();
  Graph parsed = parse_graph(print_graph(g));
  EXPECT_EQ(parsed.outputs[0].second, g.outputs[0].second);
}

TEST(TextRoundTrip, ProvenanceIsKept) {
  Graph g = test_graphs::names_and_provenance_graph();
  std::string text = print_graph(g);
  EXPECT_NE(text.find("@ \"block0/attention/soft max\" step=3"), std::string::npos) << text;
  EXPECT_NE(text.find("@ step=3 backward"), std::string::npos) << text;
  EXPECT_NE(text.find("@ backward"), std::string::npos) << text;
  EXPECT_NE(text.find("in %1 \"unused \\\"quoted\\\" \\\\ name\" : i8[]"), std::string::npos) << text;
}

TEST(TextRoundTrip, ConstantsAreExact) {
  Graph g = test_graphs::constants_graph();
  Graph parsed = parse_graph(print_graph(g));
  ASSERT_EQ(parsed.outputs.size(), g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    NodeRef a = g.outputs[i].second, b = parsed.outputs[i].second;
    EXPECT_TRUE(a->attrs == b->attrs) << g.outputs[i].first << ": " << print_node(a) << " vs " << print_node(b);
  }
}

TEST(TextRoundTrip, EverySample) {
  std::filesystem::path dir = std::filesystem::path(LATHE_SOURCE_DIR) / "samples";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no samples/ folder yet";
  int n = 0;
  for (auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".lathe") continue;
    ++n;
    Graph g = load_graph(entry.path().string());
    expect_round_trip(g, entry.path().string());
  }
  if (n == 0) GTEST_SKIP() << "no samples/*.lathe yet";
}

TEST(TextRoundTrip, UnsignedLiteralsAreValuesNotBits) {
  // u64 prints and parses as 0 … 2^64-1 (not as its bits read as i64); u32 rejects -1
  const std::string text =
      "# lathe 1\ngraph {\n  %0 = Const {value=18446744073709551615} : u64[2]\n  out y = %0\n}\n";
  Graph g = parse_graph(text, "u64.lathe");
  EXPECT_EQ(static_cast<uint64_t>(g.outputs[0].second->attrs.i), ~uint64_t(0));
  EXPECT_NE(print_graph(g).find("value=18446744073709551615"), std::string::npos) << print_graph(g);
  expect_round_trip(g, "u64.lathe");
  for (const char* bad : {"-1} : u64[2]", "18446744073709551616} : u64[2]", "-1} : u32[2]", "4294967296} : u32[2]"}) {
    std::string t = "# lathe 1\ngraph {\n  %0 = Const {value=" + std::string(bad) + "\n  out y = %0\n}\n";
    EXPECT_THROW(parse_graph(t, "bad.lathe"), UserError) << bad;
  }
}
