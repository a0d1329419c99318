// completion_test.cpp — the REPL's tab completion by line (Workbench::complete_line): colon
// commands, help topics after :help, paths after :load, built-in rule sets after :rules,
// and Lua names otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "scripting/commands.h"

namespace lathe::script {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(Completion, ColonCommands) {
  Workbench wb;
  auto c = wb.complete_line(":lo", 0, ":lo");
  EXPECT_TRUE(has(c, ":load")) << c.size();
  EXPECT_TRUE(has(wb.complete_line(":", 0, ":"), ":profile"));
  EXPECT_FALSE(has(c, ":profile"));
  EXPECT_TRUE(has(wb.complete_line("  :st", 2, ":st"), ":step"));
}

TEST(Completion, HelpTopics) {
  Workbench wb;
  EXPECT_TRUE(has(wb.complete_line(":help k:sp", 6, "k:sp"), "k:split"));
  EXPECT_TRUE(has(wb.complete_line(":help lathe.ra", 6, "lathe.ra"), "lathe.randn"));
  EXPECT_TRUE(has(wb.complete_line(":help pat", 6, "pat"), "patterns"));
  EXPECT_TRUE(has(wb.complete_line(":help :st", 6, ":st"), ":step"));
}

TEST(Completion, PathsAfterLoad) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / "lathe-completion-test";
  fs::create_directories(d / "sub");
  std::ofstream(d / "model.lathe") << "";
  std::ofstream(d / "rules.lua") << "";
  std::string dir = d.string() + "/";
  auto c = Workbench().complete_line(":load " + dir + "mo", 6, dir + "mo");
  EXPECT_TRUE(has(c, dir + "model.lathe"));
  EXPECT_FALSE(has(c, dir + "rules.lua"));
  // readline breaks words at '/': the word is "mo", the rest of the path comes from the line
  std::string line = ":load " + dir + "mo";
  auto tail = Workbench().complete_line(line, static_cast<int>(line.size() - 2), "mo");
  EXPECT_TRUE(has(tail, "model.lathe")) << (tail.empty() ? "none" : tail[0]);
  auto all = Workbench().complete_line(":open " + dir, 6, dir);
  EXPECT_TRUE(has(all, dir + "sub/"));
  EXPECT_TRUE(has(all, dir + "rules.lua"));
  fs::remove_all(d);
}

TEST(Completion, RuleSetsAfterRules) {
  Workbench wb;
  auto c = wb.complete_line(":rules simp", 7, "simp");
  EXPECT_TRUE(has(c, "simplify")) << (c.empty() ? "none" : c[0]);
}

TEST(Completion, LuaOtherwise) {
  Workbench wb;
  EXPECT_TRUE(has(wb.complete_line("lathe.ra", 0, "lathe.ra"), "lathe.randn"));
}

}  // namespace
}  // namespace lathe::script
