// text_errors_test.cpp — every malformed file in tests/errors/bad gives a UserError at the
// line:col its `# expect:` header names, with that message; truncating valid files at any
// byte never crashes; the loader reports unknown kinds and missing files by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/ir/diag.h"
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

struct Expectation {
  int line = 0, col = 0;
  std::string message;
};

// "# expect: 4:8: unknown op 'Addd'" on the first line.
Expectation read_expectation(const std::string& text) {
  Expectation e;
  std::string first = text.substr(0, text.find('\n'));
  const std::string tag = "# expect: ";
  if (first.rfind(tag, 0) != 0) return e;
  std::istringstream in(first.substr(tag.size()));
  char colon = 0;
  in >> e.line >> colon >> e.col >> colon;
  std::getline(in, e.message);
  if (!e.message.empty() && e.message[0] == ' ') e.message.erase(0, 1);
  return e;
}

}  // namespace

TEST(TextErrors, EveryBadFileGivesItsLocatedMessage) {
  fs::path dir = fs::path(LATHE_SOURCE_DIR) / "tests/errors/bad";
  int n = 0;
  for (auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".lathe") continue;
    ++n;
    std::string path = entry.path().string();
    Expectation want = read_expectation(read_file(entry.path()));
    ASSERT_GT(want.line, 0) << path << ": the first line must be `# expect: LINE:COL: MESSAGE`";
    try {
      load_graph(path);
      ADD_FAILURE() << path << ": parsed without an error";
    } catch (const UserError& e) {
      const Diagnostic& d = e.diag();
      EXPECT_EQ(d.file, path);
      EXPECT_EQ(d.line, want.line) << path << "\n" << e.what();
      EXPECT_EQ(d.col, want.col) << path << "\n" << e.what();
      EXPECT_NE(d.message.find(want.message), std::string::npos) << path << "\n" << e.what();
      EXPECT_FALSE(d.source_line.empty() && d.line > 1) << path << ": the diagnostic should show the source line";
      std::string located = path + ":" + std::to_string(want.line) + ":" + std::to_string(want.col) + ": error: ";
      EXPECT_EQ(std::string(e.what()).rfind(located, 0), 0u) << e.what();
    }
  }
  EXPECT_GE(n, 30);
}

TEST(TextErrors, EmptyInputIsAnError) {
  EXPECT_THROW(parse_graph(""), UserError);
  EXPECT_THROW(parse_graph("\n\n"), UserError);
  EXPECT_THROW(parse_graph(std::string_view("\0", 1)), UserError);
}

TEST(TextErrors, EveryPrefixOfAValidFileIsHandled) {
  // Truncation at any byte either parses (a prefix can be a whole graph) or is a UserError.
  fs::path dir = fs::path(LATHE_SOURCE_DIR) / "tests/passes/golden";
  for (auto& entry : fs::directory_iterator(dir)) {
    std::string text = read_file(entry.path());
    for (size_t k = 0; k <= text.size(); ++k) {
      try {
        parse_graph(std::string_view(text).substr(0, k), "prefix");
      } catch (const UserError&) {
      } catch (const std::exception& e) {
        FAIL() << entry.path() << " cut at " << k << ": not a UserError: " << e.what();
      }
    }
  }
}

TEST(Loader, UnknownKindAndMissingFile) {
  try {
    load_graph("model.xyz");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown file kind '.xyz'; known kinds: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(".lathe"), std::string::npos);
  }
  try {
    load_graph("/nonexistent/dir/g.lathe");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open /nonexistent/dir/g.lathe: No such file"), std::string::npos)
        << e.what();
  }
}

TEST(Loader, RegisteredLoaderAndAtomicSave) {
  register_graph_loader(".fake", [](const std::string& path) { return parse_graph("graph {\n in %0 x : f32[2]\n out y = %0\n}\n", path); });
  fs::path tmp = fs::temp_directory_path() / ("lathe_loader_test_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::ofstream(tmp / "g.fake") << "";
  Graph g = load_graph((tmp / "g.fake").string());
  save_graph(g, (tmp / "g.lathe").string());
  EXPECT_EQ(print_graph(load_graph((tmp / "g.lathe").string())), print_graph(g));
  int files = 0;
  for (auto& e : fs::directory_iterator(tmp)) files += e.path().extension() != ".fake";
  EXPECT_EQ(files, 1) << "save_graph must leave no temporary file behind";
  EXPECT_THROW(save_graph(g, (tmp / "g.onnx").string()), UserError);
  EXPECT_THROW(save_graph(g, "/nonexistent/dir/g.lathe"), UserError);
  fs::remove_all(tmp);
}
