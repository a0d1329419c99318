// compile_program_test.cpp — the llvm backend's cold-compile path: kernels compiled in
// groups on several threads load into one JITDylib and all resolve; the cache bundle
// round-trips and refuses truncated or foreign blobs; a corrupt or old-format cache entry
// is rebuilt, not trusted; several programs compile at once from different threads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "backends/backend.h"
#include "backends/llvm/compile_program.h"
#include "backends/llvm/jit.h"
#include "core/frontend/frontend.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "core/runtime/kernel_cache.h"
#include "core/runtime/random.h"

namespace lathe {
namespace {

// Several kernels: two reductions that must be materialized, an elementwise tail.
Graph several_kernels() {
  Tensor x = input("x", {19, 53});
  Tensor w = input("w", {53, 23});
  Tensor h = relu(matmul(x, w));
  Tensor y = softmax(h, -1) + layer_norm(h, 1, std::nullopt, std::nullopt, 1e-5) + sum(h, {0}, true);
  return Graph::from_outputs({{"y", y.node()}});
}

std::vector<const loop::LoopFunc*> machine_kernels(const Program& p) {
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs)
    if (f.kind != "extern") fs.push_back(&f);
  return fs;
}

TEST(LlvmCompile, GroupsOnThreadsLoadIntoOneDylib) {
  Program p = build_program(several_kernels());
  auto fs = machine_kernels(p);
  ASSERT_GE(fs.size(), 3u) << "the graph should need several kernels";
  for (int threads : {1, 2, 3, 64}) {
    auto objects = llvmjit::compile_kernels(fs, threads);
    EXPECT_EQ(objects.size(), std::min<size_t>(threads, fs.size()));
    auto code = llvmjit::load_objects(objects, "groups");
    for (auto* f : fs) EXPECT_NE(code->lookup(f->name), nullptr) << f->name << " with " << threads << " threads";
  }
}

TEST(LlvmCompile, BundleRoundTripsAndRefusesGarbage) {
  std::vector<std::vector<char>> objs = {{'a', 'b', 'c'}, {'d'}, std::vector<char>(1000, 'z')};
  std::string packed = llvmjit::pack_objects(objs);
  std::vector<char> blob(packed.begin(), packed.end());
  std::vector<std::vector<char>> back;
  ASSERT_TRUE(llvmjit::unpack_objects(blob, back));
  EXPECT_EQ(back, objs);
  for (size_t cut : {size_t(0), size_t(5), size_t(20), blob.size() - 1}) {
    std::vector<char> t(blob.begin(), blob.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_FALSE(llvmjit::unpack_objects(t, back)) << "truncated at " << cut;
  }
  std::vector<char> longer = blob;
  longer.push_back('x');
  EXPECT_FALSE(llvmjit::unpack_objects(longer, back));
  std::vector<char> elf = {'\x7f', 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(llvmjit::unpack_objects(elf, back));  // an old single-object cache entry
}

TEST(LlvmCompile, CorruptCacheEntryIsRebuilt) {
  namespace fs = std::filesystem;
  // a constant unique to this run gives the program a cache key no earlier run wrote
  double salt = 1 + static_cast<double>(std::random_device{}() % 1000003) * 1e-7;
  Tensor x = input("x", {19, 53});
  Graph g = Graph::from_outputs({{"y", (softmax(x, -1) * salt).node()}, {"z", (sum(x, {1}, true) + salt).node()}});
  TensorMap in = random_inputs(g, 5);
  TensorMap want = interpret(g, in);
  Backend& b = get_backend("llvm");
  CompileOptions o;
  o.use_cache = true;
  auto check = [&](bool expect_cached, const std::string& what) {
    Program p = build_program(g);
    auto cp = b.compile(p, o);
    EXPECT_EQ(cp->from_cache, expect_cached) << what;
    Executable exe(std::move(p), cp, "llvm");
    TensorMap got = exe.run(in);
    for (const char* out : {"y", "z"}) {
      std::string why;
      EXPECT_TRUE(allclose(got.at(out), want.at(out), 1e-4, 1e-4, &why)) << what << ": " << why;
    }
  };
  // a private cache directory when this process has not chosen one yet (ctest runs each
  // test alone); else the shared one, where other processes may add entries meanwhile
  fs::path mine_dir = fs::temp_directory_path() / ("lathe-cache-test-" + std::to_string(std::random_device{}()));
  ::setenv("LATHE_CACHE_DIR", mine_dir.c_str(), 1);
  fs::path dir = fs::path(cache_dir()) / "llvm";
  auto entries = [&] {
    std::set<fs::path> s;
    if (fs::exists(dir))
      for (auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".o") s.insert(e.path());
    return s;
  };
  std::set<fs::path> before = entries();
  check(false, "cold");
  check(true, "warm");
  std::vector<fs::path> mine;  // ours, and in a shared directory maybe others' (harmless:
  for (auto& e : entries())    // a corrupt entry is rebuilt, which is what is tested here)
    if (!before.count(e)) mine.push_back(e);
  ASSERT_FALSE(mine.empty());
  for (const char* junk : {"garbage", "\x7f" "ELF not really an object file"}) {
    for (auto& e : mine) std::ofstream(e, std::ios::binary | std::ios::trunc) << junk;
    check(false, std::string("after corrupting the entry with ") + junk);
    check(true, "rebuilt entry");
  }
  for (auto& e : mine) fs::remove(e);
  ::unsetenv("LATHE_CACHE_DIR");
  std::error_code ec;
  fs::remove_all(mine_dir, ec);
}

TEST(LlvmCompile, ProgramsCompileConcurrently) {
  // two threads compiling at once, each with its own program (the TargetMachine pool)
  Graph g = several_kernels();
  TensorMap in = random_inputs(g, 9);
  TensorMap want = interpret(g, in);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      try {
        CompileOptions cold;
        cold.use_cache = false;
        Executable exe = compile_graph(g, "llvm", {}, cold);
        std::string why;
        if (!allclose(exe.run(in).at("y"), want.at("y"), 1e-4, 1e-4, &why)) errors[t] = why;
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace lathe
