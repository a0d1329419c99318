// tier_detach_test.cpp — the llvm full tier of a one-shot run compiled in a detached child
// process (CompileOptions::detach_tier, detach_background_compiles): the runs never start it in
// process; the child writes the full entry (the partial ones go) and a later start loads it
// with the interpreter's results; a child killed at any point leaves no entry a start would
// trust, and the next one-shot run writes it; a start that finds the entry's lock held waits
// for it (LATHE_TIER_WAIT_MS) and loads what the writer left, or starts on the quick code and
// does not start a second writer; nothing detaches without the cache or under tier_up false.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "backends/backend.h"
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

// Several kernels (a batched matmul at prime sizes, reductions, an elementwise tail); the salt
// gives the program a cache key no earlier run wrote.
Graph detach_graph(int64_t batch, double salt) {
  Tensor x = input("x", {batch, 17, 41});
  Tensor w = input("w", {41, 29});
  Tensor h = relu(matmul(x, w)) * salt;
  Tensor y = softmax(h, -1) + layer_norm(h, 2, std::nullopt, std::nullopt, 1e-5) + sum(h, {1}, true);
  return Graph::from_outputs({{"y", y.node()}});
}

int wait_child(int pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

class LlvmTierDetach : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lathe-tier-detach-" + std::to_string(std::random_device{}()));
    ::setenv("LATHE_CACHE_DIR", dir_.c_str(), 1);
    ::unsetenv("LATHE_TIER");
    ::unsetenv("LATHE_TIER_WAIT_MS");
  }
  void TearDown() override {
    ::unsetenv("LATHE_CACHE_DIR");
    ::unsetenv("LATHE_TIER_WAIT_MS");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::set<fs::path> files(const std::string& ext) const {
    std::set<fs::path> s;
    fs::path d = fs::path(cache_dir()) / "llvm";
    if (fs::exists(d))
      for (auto& e : fs::directory_iterator(d))
        if (e.is_regular_file() && e.path().extension() == ext) s.insert(e.path());
    return s;
  }
  // A one-shot run: compile (detached full tier), one run, the program dropped.
  void one_shot(const Graph& g, const TensorMap& in, const TensorMap& want, const std::string& what,
                bool expect_quick = true, bool use_cache = true, bool tier_up = true) {
    CompileOptions o;
    o.tier = true;
    o.detach_tier = true;
    o.use_cache = use_cache;
    o.tier_up = tier_up;
    Program p = build_program(g);
    auto cp = b_.compile(p, o);
    EXPECT_EQ(is_quick(*cp), expect_quick) << what << ": " << cp->command;
    Executable exe(std::move(p), cp, "llvm");
    for (int i = 0; i < 3; ++i) expect_like_interp(exe, in, want, what + ", run " + std::to_string(i + 1));
    wait_background_compiles();  // no in-process full tier was started by the runs
  }
  // A later start, tiered or not, loads the full code from the cache.
  void expect_full_from_cache(const Graph& g, const TensorMap& in, const TensorMap& want, const std::string& what) {
    tier_test::expect_full_from_cache(b_, g, in, want, what);
  }
  Backend& b_ = get_backend("llvm");
  fs::path dir_;
};

TEST_F(LlvmTierDetach, ChildWritesTheFullEntryAndLaterStartsLoadIt) {
  for (int64_t batch : {1, 3}) {
    std::string what = "batch " + std::to_string(batch);
    Graph g = detach_graph(batch, fresh_salt());
    TensorMap in = random_inputs(g, 7 + static_cast<uint64_t>(batch));
    TensorMap want = interpret(g, in);
    std::set<fs::path> before = files(".o");
    one_shot(g, in, want, what);
    std::set<fs::path> parts = files(".o");
    EXPECT_GE(parts.size(), before.size() + 1) << what << ": the partial entries, no full one yet";
    int pid = detach_background_compiles();
    ASSERT_GT(pid, 0) << what;
    int status = wait_child(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << what << ": status " << status;
    std::set<fs::path> after = files(".o");
    size_t added = 0;
    for (auto& e : after) added += before.count(e) ? 0 : 1;
    EXPECT_EQ(added, 1u) << what << ": the full entry alone, the partial ones removed";
    for (auto& lock : files(".lock")) {  // the child released its lock
      int fd = try_lock_exclusive(lock.string());
      EXPECT_GE(fd, 0) << lock;
      if (fd >= 0) ::close(fd);
    }
    expect_full_from_cache(g, in, want, what);
    EXPECT_EQ(detach_background_compiles(), 0) << what << ": nothing left to detach";
  }
}

TEST_F(LlvmTierDetach, KilledChildLeavesNoEntryAStartWouldTrust) {
  Graph g = detach_graph(2, fresh_salt());
  TensorMap in = random_inputs(g, 31);
  TensorMap want = interpret(g, in);
  for (int delay_ms : {0, 5, 40}) {  // killed before, during or after its compile
    std::string what = "killed after " + std::to_string(delay_ms) + " ms";
    bool full_before = false;
    {
      CompileOptions o;
      o.tier = true;
      o.detach_tier = true;
      Program p = build_program(g);
      auto cp = b_.compile(p, o);
      full_before = !is_quick(*cp);
      Executable exe(std::move(p), cp, "llvm");
      expect_like_interp(exe, in, want, what + ", first start");
    }
    if (full_before) break;  // an earlier child finished before its kill: the entry is complete
    int pid = detach_background_compiles();
    ASSERT_GT(pid, 0) << what;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    wait_child(pid);
    // the lock is free at once (the kernel dropped it with the child)
    for (auto& lock : files(".lock")) EXPECT_EQ(wait_unlocked(lock.string(), 0), LockWait::kFree) << what << " " << lock;
  }
  // whatever the kills left, a one-shot run gives the interpreter's results and its child
  // writes a complete full entry
  {
    CompileOptions o;
    o.tier = true;
    o.detach_tier = true;
    Program p = build_program(g);
    auto cp = b_.compile(p, o);
    Executable exe(std::move(p), cp, "llvm");
    expect_like_interp(exe, in, want, "after the kills");
  }
  int pid = detach_background_compiles();
  if (pid > 0) {
    EXPECT_EQ(wait_child(pid), 0);
  }
  expect_full_from_cache(g, in, want, "after the kills");
}

TEST_F(LlvmTierDetach, StartWaitsForTheWriterOrStartsQuickWithoutASecondWriter) {
  Graph g = detach_graph(1, fresh_salt());
  TensorMap in = random_inputs(g, 5);
  TensorMap want = interpret(g, in);
  std::set<fs::path> old_locks = files(".lock");  // (one cache per test process: other tests' too)
  one_shot(g, in, want, "first start");
  int pid = detach_background_compiles();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(wait_child(pid), 0);
  std::set<fs::path> locks;
  for (auto& l : files(".lock"))
    if (!old_locks.count(l)) locks.insert(l);
  ASSERT_EQ(locks.size(), 1u);
  std::string lock = locks.begin()->string();
  std::string entry = lock.substr(0, lock.size() - 5);
  std::string bytes;
  {
    std::ifstream f(entry, std::ios::binary);
    ASSERT_TRUE(f) << entry;
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // another writer (this test) holds the lock, the entry not yet there
  fs::remove(entry);
  int fd = try_lock_exclusive(lock);
  ASSERT_GE(fd, 0);
  ::setenv("LATHE_TIER_WAIT_MS", "30", 1);
  auto t0 = std::chrono::steady_clock::now();
  {
    CompileOptions o;
    o.tier = true;
    o.detach_tier = true;
    Program p = build_program(g);
    auto cp = b_.compile(p, o);
    EXPECT_TRUE(is_quick(*cp)) << cp->command;
    EXPECT_NE(cp->command.find("still compiling in another process"), std::string::npos) << cp->command;
    Executable exe(std::move(p), cp, "llvm");
    expect_like_interp(exe, in, want, "quick while the lock is held");
  }
  double quick_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(quick_ms, 30) << "waited LATHE_TIER_WAIT_MS for the lock";
  EXPECT_EQ(detach_background_compiles(), 0) << "the lock is held: no second writer";
  EXPECT_FALSE(fs::exists(entry));
  // the writer finishes 200 ms later: a start allowed to wait loads its entry
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    atomic_write(entry, bytes);
    ::close(fd);
  });
  ::setenv("LATHE_TIER_WAIT_MS", "20000", 1);
  t0 = std::chrono::steady_clock::now();
  {
    CompileOptions o;
    o.tier = true;
    o.detach_tier = true;
    Program p = build_program(g);
    auto cp = b_.compile(p, o);
    EXPECT_TRUE(cp->from_cache);
    EXPECT_FALSE(is_quick(*cp)) << cp->command;
    Executable exe(std::move(p), cp, "llvm");
    expect_like_interp(exe, in, want, "the writer's entry");
  }
  double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  writer.join();
  EXPECT_GE(waited, 150);
  EXPECT_LT(waited, 15000);
  EXPECT_EQ(detach_background_compiles(), 0);
}

TEST_F(LlvmTierDetach, NothingDetachesWithoutTheCacheOrTierUp) {
  Graph g = detach_graph(3, fresh_salt());
  TensorMap in = random_inputs(g, 13);
  TensorMap want = interpret(g, in);
  std::set<fs::path> before = files(".o"), locks = files(".lock");
  one_shot(g, in, want, "no cache", true, /*use_cache=*/false);
  EXPECT_EQ(detach_background_compiles(), 0) << "no cache: nothing to write";
  EXPECT_EQ(files(".o"), before);
  one_shot(g, in, want, "tier_up false", true, true, /*tier_up=*/false);
  EXPECT_EQ(detach_background_compiles(), 0) << "tier_up false: the quick code stays cached";
  one_shot(g, in, want, "tier_up false, again", true, true, false);  // loads the quick entry
  EXPECT_EQ(detach_background_compiles(), 0);
  EXPECT_EQ(files(".lock"), locks) << "no lock taken";
}

}  // namespace
}  // namespace lathe
