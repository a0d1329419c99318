// tier_test.cpp — the llvm backend's tiered compile (CompileOptions::tier): the quick tier's
// code and the full tier's, swapped in while the program runs, both give the interpreter's
// results (odd and prime sizes, batch 1 and 3); the full tier starts at the end of the first
// run and, when the program is dropped (a one-shot run), still finishes: the cache then holds
// the full code under the key an untiered compile uses, the partial entries gone (a later
// start loads optimized code); heavy codes (tier_plan.h) are optimized at once; tiering is on
// by default where the caller allows it, LATHE_TIER=0 turns it off; a program dropped while
// its full tier compiles is safe.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "backends/backend.h"
#include "backends/llvm/tier_plan.h"
#include "core/frontend/frontend.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "core/runtime/kernel_cache.h"
#include "core/runtime/random.h"
#include "tests/llvm/tier_helpers.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using namespace tier_test;

// Several kernels (a batched matmul, reductions, an elementwise tail); a salt unique to this
// run gives the program a cache key no earlier run wrote.
Graph tier_graph(int64_t batch, double salt) {
  Tensor x = input("x", {batch, 19, 53});
  Tensor w = input("w", {53, 23});
  Tensor h = relu(matmul(x, w)) * salt;
  Tensor y = softmax(h, -1) + layer_norm(h, 2, std::nullopt, std::nullopt, 1e-5) + sum(h, {1}, true);
  return Graph::from_outputs({{"y", y.node()}});
}

class LlvmTier : public ::testing::Test {
 protected:
  void SetUp() override {
    // a private cache directory when this process has not chosen one yet (ctest runs each
    // test alone); else the shared one (the salts keep the keys apart)
    dir_ = fs::temp_directory_path() / ("lathe-tier-test-" + std::to_string(std::random_device{}()));
    ::setenv("LATHE_CACHE_DIR", dir_.c_str(), 1);
    ::unsetenv("LATHE_TIER");  // tiering is on by default
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
  std::set<fs::path> added_since(const std::set<fs::path>& before) const {
    std::set<fs::path> s;
    for (auto& e : entries())
      if (!before.count(e)) s.insert(e);
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
    EXPECT_EQ(added, 1u) << "the full entry only (the quick one is removed once the full one is written)";
    expect_full_from_cache(b, g, in, want, "quick then full, batch " + std::to_string(batch));
  }
}

TEST_F(LlvmTier, QuickEntryIsReusedUntilAFullTierIsCompiled) {
  Backend& b = get_backend("llvm");
  Graph g = tier_graph(2, fresh_salt());
  TensorMap in = random_inputs(g, 5);
  TensorMap want = interpret(g, in);
  CompileOptions tiered;
  tiered.tier = true;
  std::set<fs::path> start = entries();
  for (bool expect_cached : {false, true}) {  // compiled and dropped before any run: no full tier yet
    auto cp = b.compile(build_program(g), tiered);
    EXPECT_TRUE(is_quick(*cp));
    EXPECT_EQ(cp->from_cache, expect_cached);
    EXPECT_EQ(cp->quick_codes, cp->codes_compiled) << "small codes all start quick";
  }
  wait_background_compiles();
  EXPECT_EQ(added_since(start).size(), 1u) << "the quick entry";
  // time_ms waits for the full tier before it times anything (its later runs must not start
  // the full tier again: that would rewrite the entry)
  {
    Program p = build_program(g);
    auto cp = b.compile(p, tiered);
    EXPECT_TRUE(cp->from_cache);
    Executable exe(std::move(p), cp, "llvm");
    EXPECT_GT(exe.time_ms(in, 3, 0), 0);
    std::map<fs::path, fs::file_time_type> written;
    for (auto& e : added_since(start)) written[e] = fs::last_write_time(e);
    EXPECT_EQ(written.size(), 1u) << "the full tier's entry, the quick one removed";
    expect_like_interp(exe, in, want, "after time_ms");
    cp.reset();
    exe = Executable(build_program(g), b.compile(build_program(g), tiered), "llvm");  // drops the first
    wait_background_compiles();
    for (auto& [e, t] : written) EXPECT_EQ(fs::last_write_time(e), t) << e << ": compiled twice?";
  }
  auto full = b.compile(build_program(g), tiered);
  EXPECT_FALSE(is_quick(*full));
  EXPECT_TRUE(full->from_cache);
}

// A one-shot run (compile, one run, the program dropped) leaves the full code in the cache:
// the next start, tiered or not, loads it, and its results are the interpreter's.
TEST_F(LlvmTier, OneShotRunLeavesTheFullCodeInTheCache) {
  Backend& b = get_backend("llvm");
  for (int64_t batch : {1, 4}) {
    Graph g = tier_graph(batch, fresh_salt());
    TensorMap in = random_inputs(g, 3 + static_cast<uint64_t>(batch));
    TensorMap want = interpret(g, in);
    CompileOptions tiered;
    tiered.tier = true;
    std::set<fs::path> before = entries();
    {
      Program p = build_program(g);
      auto cp = b.compile(p, tiered);  // LATHE_TIER unset: on
      EXPECT_TRUE(is_quick(*cp)) << cp->command;
      Executable exe(std::move(p), cp, "llvm");
      expect_like_interp(exe, in, want, "one-shot run, quick tier");
    }  // dropped: its full tier finishes on its own
    wait_background_compiles();
    size_t added = 0;
    for (auto& e : entries()) added += before.count(e) ? 0 : 1;
    EXPECT_EQ(added, 1u) << "the full entry alone";
    expect_full_from_cache(b, g, in, want, "one-shot run, batch " + std::to_string(batch));
  }
}

// tier_up false (`lathe run` one-shot under LATHE_TIER_UP=0): runs do not start the full tier
// and a dropped program leaves no compile behind; the cache keeps the quick entry, which the
// next start loads (tiered, quick, from the cache); finish_tiers() still compiles the full
// tier, after which the cache holds the full code. Results are the interpreter's throughout.
TEST_F(LlvmTier, NoTierUpKeepsTheQuickCodeCached) {
  Backend& b = get_backend("llvm");
  for (int64_t batch : {1, 3}) {
    Graph g = tier_graph(batch, fresh_salt());
    TensorMap in = random_inputs(g, 21 + static_cast<uint64_t>(batch));
    TensorMap want = interpret(g, in);
    CompileOptions once;
    once.tier = true;
    once.tier_up = false;
    std::set<fs::path> before = entries();
    std::string what = "batch " + std::to_string(batch);
    for (bool cached : {false, true}) {
      Program p = build_program(g);
      auto cp = b.compile(p, once);
      EXPECT_TRUE(is_quick(*cp)) << cp->command;
      EXPECT_EQ(cp->from_cache, cached) << what;
      EXPECT_NE(cp->command.find("only when asked"), std::string::npos) << cp->command;
      Executable exe(std::move(p), cp, "llvm");
      for (int i = 0; i < 3; ++i) expect_like_interp(exe, in, want, what + ", quick, run " + std::to_string(i + 1));
    }  // dropped: nothing compiles on
    wait_background_compiles();
    EXPECT_EQ(added_since(before).size(), 1u) << what << ": the quick entry alone";
    {
      Program p = build_program(g);
      auto cp = b.compile(p, once);
      EXPECT_TRUE(cp->from_cache && is_quick(*cp)) << cp->command;
      Executable exe(std::move(p), cp, "llvm");
      exe.finish_tiers();  // asked: the full tier compiles
      expect_like_interp(exe, in, want, what + ", full tier");
    }
    wait_background_compiles();
    EXPECT_EQ(added_since(before).size(), 1u) << what << ": the full entry, the quick one removed";
    expect_full_from_cache(b, g, in, want, "after finish_tiers, " + what);
  }
}

// A heavy code (tier_plan.h: its quick code would cost a run more than the compile it saves;
// here a kernel streaming 34 MB) is optimized at once, the light ones start quick; the cache
// after a one-shot run holds the full code of both, and every stage gives the interpreter's
// results.
TEST_F(LlvmTier, HeavyCodesAreOptimizedAtOnceLightOnesStartQuick) {
  Backend& b = get_backend("llvm");
  double salt = fresh_salt();
  Tensor big = input("big", {4099, 1031});
  Tensor x = input("x", {3, 19, 53});
  Tensor w = input("w", {53, 23});
  Tensor h = relu(matmul(x, w)) * salt;
  Tensor y = softmax(h, -1) + sum(h, {1}, true);
  Graph g = Graph::from_outputs({{"y", y.node()}, {"z", (relu(big) * salt + 1.0).node()}});
  Program p = build_program(g);
  std::vector<const loop::LoopFunc*> codes;
  std::unordered_map<std::string, std::string> code_name;
  for (auto& f : p.funcs) {
    if (f.kind == "extern") continue;
    codes.push_back(&f);
    code_name[f.name] = f.name;
  }
  auto est = llvmjit::plan_tiers(p, codes, code_name, 2, "cost");
  size_t heaviest = 0, quick = 0;
  for (size_t c = 0; c < codes.size(); ++c) {
    EXPECT_TRUE(est[c].known) << codes[c]->name;
    EXPECT_GT(est[c].run_ms, 0) << codes[c]->name;
    EXPECT_GT(est[c].compile_ms, 0) << codes[c]->name;
    if (est[c].run_ms > est[heaviest].run_ms) heaviest = c;
    quick += est[c].quick;
  }
  EXPECT_FALSE(est[heaviest].quick) << codes[heaviest]->name << ": run " << est[heaviest].run_ms << " ms, compile "
                                    << est[heaviest].compile_ms << " ms";
  EXPECT_GT(quick, 0u);
  for (auto& e : llvmjit::plan_tiers(p, codes, code_name, 2, "all")) EXPECT_TRUE(e.quick);
  {  // a dim not known at compile time: optimized at once
    Tensor xs = input("x", {SymInt::var("n"), 37});
    Graph gs = Graph::from_outputs({{"y", (relu(xs) * salt).node()}});
    Program ps = build_program(gs);
    std::vector<const loop::LoopFunc*> cs;
    std::unordered_map<std::string, std::string> names;
    for (auto& f : ps.funcs) cs.push_back(&f), names[f.name] = f.name;
    for (auto& e : llvmjit::plan_tiers(ps, cs, names, 2, "cost")) EXPECT_FALSE(e.quick || e.known);
  }

  TensorMap in = random_inputs(g, 17);
  TensorMap want = interpret(g, in);
  CompileOptions tiered;
  tiered.tier = true;
  std::set<fs::path> before = entries();
  {
    auto cp = b.compile(p, tiered);
    EXPECT_TRUE(is_quick(*cp)) << cp->command;
    EXPECT_GT(cp->quick_codes, 0);
    EXPECT_LT(cp->quick_codes, cp->codes_compiled) << "the heavy code is optimized at once";
    Executable exe(Program(p), cp, "llvm");
    expect_like_interp(exe, in, want, "mixed tiers, first run");
    expect_like_interp(exe, in, want, "mixed tiers, while the full tier compiles");
    exe.finish_tiers();
    expect_like_interp(exe, in, want, "full tier");
  }
  wait_background_compiles();
  EXPECT_EQ(added_since(before).size(), 1u) << "the full entry; the partial ones removed";
  expect_full_from_cache(b, g, in, want, "mixed tiers");
}

TEST_F(LlvmTier, OffSwitchAndUntieredCallers) {
  Backend& b = get_backend("llvm");
  Graph g = tier_graph(1, fresh_salt());
  CompileOptions tiered;
  tiered.tier = true;
  ::setenv("LATHE_TIER", "0", 1);  // LATHE_TIER=0: no tiers even where allowed
  auto off = b.compile(build_program(g), tiered);
  EXPECT_FALSE(is_quick(*off)) << off->command;
  EXPECT_EQ(off->quick_codes, 0);
  ::unsetenv("LATHE_TIER");
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
  cp.reset();  // the thread goes on without the program
  wait_background_compiles();
  expect_full_from_cache(b, g, in, want, "dropped while compiling");
}

}  // namespace
}  // namespace lathe
