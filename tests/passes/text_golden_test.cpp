// text_golden_test.cpp — golden text tests, MLIR-style: each tests/passes/golden/NAME.lathe
// is hand-written input (any ids, comments, spacing) and NAME.expected is the canonical
// text print_graph must produce for it. The expected text must itself be a fixed point.
// To bless a new golden file, run this test with LATHE_BLESS=1 (it writes the .expected
// files) and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/ir/loader.h"
#include "core/ir/text.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {
std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST(TextGolden, HandWrittenInputsPrintCanonically) {
  fs::path dir = fs::path(LATHE_SOURCE_DIR) / "tests/passes/golden";
  int n = 0;
  for (auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".lathe") continue;
    ++n;
    fs::path expected_path = entry.path();
    expected_path.replace_extension(".expected");
    std::string got = print_graph(load_graph(entry.path().string()));
    if (std::getenv("LATHE_BLESS")) {
      std::ofstream(expected_path, std::ios::binary) << got;
      continue;
    }
    ASSERT_TRUE(fs::exists(expected_path)) << expected_path << " is missing (run with LATHE_BLESS=1)";
    std::string want = read_file(expected_path);
    EXPECT_EQ(got, want) << entry.path();
    EXPECT_EQ(print_graph(parse_graph(want, expected_path.string())), want) << expected_path << " is not a fixed point";
  }
  EXPECT_GE(n, 3);
}
