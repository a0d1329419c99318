// tier_test.cpp — the llvm backend's tiered compile (CompileOptions::tier): the quick tier's
// code and the full tier's, swapped in while the program runs, both give the interpreter's
// results (odd and prime sizes, batch 1 and 3); the cache keeps the quick entry and the full
// one, the full one under the key an untiered compile uses (a later start loads optimized
// code); tiering is opt-in (LATHE_TIER=1) and only where the caller allows it; a program dropped while its full tier compiles is safe.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "backends/backend.h"
#include "core/frontend/frontend.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "core/runtime/kernel_cache.h"
#include "core/runtime/random.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// Several kernels (a batched matmul, reductions, an elementwise tail); a salt unique to this
// run gives the program a cache key no earlier run wrote.
Graph tier_graph(int64_t batch, double salt) {
  Tensor x = input("x", {batch, 19, 53});
  Tensor w = input("w", {53, 23});
  Tensor h = relu(matmul(x, w)) * salt;
  Tensor y = softmax(h, -1) + layer_norm(h, 2, std::nullopt, std::nullopt, 1e-5) + sum(h, {1}, true);
  return Graph::from_outputs({{"y", y.node()}});
}

double fresh_salt() { return 1 + static_cast<double>(std::random_device{}() % 1000003) * 1e-7; }

void expect_like_interp(Executable& exe, const TensorMap& in, const TensorMap& want, const std::string& what) {
  TensorMap got = exe.run(in);
  std::string why;
  EXPECT_TRUE(allclose(got.at("y"), want.at("y"), 1e-4, 1e-4, &why)) << what << ": " << why;
}

bool is_quick(const CompiledProgram& cp) { return cp.command.find("quick tier") != std::string::npos; }

class LlvmTier : public ::testing::Test {
 protected:
  void SetUp() override {
    // a private cache directory when this process has not chosen one yet (ctest runs each
    // test alone); else the shared one (the salts keep the keys apart)
    dir_ = fs::temp_directory_path() / ("lathe-tier-test-" + std::to_string(std::random_device{}()));
    ::setenv("LATHE_CACHE_DIR", dir_.c_str(), 1);
    ::setenv("LATHE_TIER", "1", 1);  // tiering is opt-in
  }
  void TearDown() override {
    ::unsetenv("LATHE_CACHE_DIR");
    ::unsetenv("LATHE_TIER");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::set<fs::path> entries() const {
    std::set<fs::path> s;
    fs::path d = fs::path(cache_dir()) / "llvm";
    if (fs::exists(d))
      for (auto& e : fs::directory_iterator(d))
        if (e.is_regular_file() && e.path().extension() == ".o") s.insert(e.path());
    return s;
  }
  fs::path dir_;
};

TEST_F(LlvmTier, QuickThenFullGiveTheInterpretersResultsAndTheCacheKeepsTheFullCode) {
  Backend& b = get_backend("llvm");
  for (int64_t batch : {1, 3}) {
    Graph g = tier_graph(batch, fresh_salt());
    TensorMap in = random_inputs(g, 11 + static_cast<uint64_t>(batch));
    TensorMap want = interpret(g, in);
    CompileOptions tiered;
    tiered.tier = true;
    std::set<fs::path> before = entries();
    std::map<fs::path, fs::file_time_type> written;
    {
      Program p = build_program(g);
      auto cp = b.compile(p, tiered);
      EXPECT_TRUE(is_quick(*cp)) << cp->command;
      EXPECT_FALSE(cp->from_cache);
      Executable exe(std::move(p), cp, "llvm");
      expect_like_interp(exe, in, want, "quick tier, first run");
      for (int i = 0; i < 4; ++i)  // the second run starts the full tier: runs during the swap
        expect_like_interp(exe, in, want, "while the full tier compiles, run " + std::to_string(i + 2));
      exe.finish_tiers();
      expect_like_interp(exe, in, want, "full tier");
      for (auto& e : entries())  // the entries as the full tier left them
        if (!before.count(e)) written[e] = fs::last_write_time(e);
      exe.finish_tiers();  // again, and more runs: nothing left to compile
      expect_like_interp(exe, in, want, "full tier, again");
      cp.reset();
    }  // (the program's destructor would wait for a second compile, which would rewrite an entry)
    for (auto& [e, t] : written) EXPECT_EQ(fs::last_write_time(e), t) << e << ": compiled twice?";
    std::set<fs::path> after = entries();
    size_t added = 0;
    for (auto& e : after) added += before.count(e) ? 0 : 1;
    EXPECT_EQ(added, 2u) << "the quick entry and the full one";
    {  // a later start, tiered or not, loads the full tier's entry
      for (bool tier : {true, false}) {
        CompileOptions o;
        o.tier = tier;
        Program p = build_program(g);
        auto cp = b.compile(p, o);
        EXPECT_TRUE(cp->from_cache) << "tier " << tier;
        EXPECT_FALSE(is_quick(*cp)) << cp->command;
        Executable exe(std::move(p), cp, "llvm");
        expect_like_interp(exe, in, want, "the full tier from the cache");
      }
    }
  }
}

TEST_F(LlvmTier, QuickEntryIsReusedUntilAFullTierIsCompiled) {
  Backend& b = get_backend("llvm");
  Graph g = tier_graph(2, fresh_salt());
  TensorMap in = random_inputs(g, 5);
  TensorMap want = interpret(g, in);
  CompileOptions tiered;
  tiered.tier = true;
  for (bool expect_cached : {false, true}) {  // one-shot runs: the quick tier, then its cache entry
    Program p = build_program(g);
    auto cp = b.compile(p, tiered);
    EXPECT_TRUE(is_quick(*cp));
    EXPECT_EQ(cp->from_cache, expect_cached);
    Executable exe(std::move(p), cp, "llvm");
    expect_like_interp(exe, in, want, expect_cached ? "quick tier from the cache" : "quick tier");
  }
  // time_ms waits for the full tier before it times anything (its second run must not start
  // the full tier again: the destructor would wait for it, which rewrites the entry)
  std::set<fs::path> before = entries();
  {
    Program p = build_program(g);
    auto cp = b.compile(p, tiered);
    Executable exe(std::move(p), cp, "llvm");
    EXPECT_GT(exe.time_ms(in, 3, 0), 0);
    std::map<fs::path, fs::file_time_type> written;
    for (auto& e : entries())
      if (!before.count(e)) written[e] = fs::last_write_time(e);
    EXPECT_EQ(written.size(), 1u) << "the full tier's entry";
    expect_like_interp(exe, in, want, "after time_ms");
    cp.reset();
    exe = Executable(build_program(g), b.compile(build_program(g), tiered), "llvm");  // drops the first
    for (auto& [e, t] : written) EXPECT_EQ(fs::last_write_time(e), t) << e << ": compiled twice?";
  }
  auto full = b.compile(build_program(g), tiered);
  EXPECT_FALSE(is_quick(*full));
  EXPECT_TRUE(full->from_cache);
}

TEST_F(LlvmTier, OffSwitchAndUntieredCallers) {
  Backend& b = get_backend("llvm");
  Graph g = tier_graph(1, fresh_salt());
  CompileOptions tiered;
  tiered.tier = true;
  for (const char* v : {"0", ""}) {  // LATHE_TIER=0 or unset: no tiers even where allowed
    if (*v) ::setenv("LATHE_TIER", v, 1);
    else ::unsetenv("LATHE_TIER");
    auto off = b.compile(build_program(g), tiered);
    EXPECT_FALSE(is_quick(*off)) << "LATHE_TIER='" << v << "': " << off->command;
  }
  ::setenv("LATHE_TIER", "1", 1);
  Graph g2 = tier_graph(1, fresh_salt());
  auto plain = b.compile(build_program(g2), CompileOptions{});  // callers that do not ask: no tier
  EXPECT_FALSE(is_quick(*plain)) << plain->command;
}

TEST_F(LlvmTier, ProgramDroppedWhileItsFullTierCompilesIsSafe) {
  Graph g = tier_graph(3, fresh_salt());
  TensorMap in = random_inputs(g, 7);
  TensorMap want = interpret(g, in);
  Backend& b = get_backend("llvm");
  CompileOptions tiered;
  tiered.tier = true;
  Program p = build_program(g);
  auto cp = b.compile(p, tiered);
  {
    Executable exe(std::move(p), cp, "llvm");
    expect_like_interp(exe, in, want, "first run");
    expect_like_interp(exe, in, want, "second run (starts the full tier)");
  }
  cp.reset();  // the destructor waits for the full tier's thread
  SUCCEED();
}

}  // namespace
}  // namespace lathe
