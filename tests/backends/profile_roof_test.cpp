// profile_roof_test.cpp — the profiler's roofline numbers: extern library kernels have
// FLOPs (2·M·N·K for sgemm), the machine ceiling only rises (a low cached measurement is
// re-measured when a kernel beats it), and no kernel is shown above the roof without a
// reason. Runs once (on the c backend run of the suite); machine.json goes to a scratch
// LATHE_CACHE_DIR so the user's cache is untouched.
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backends/library.h"
#include "core/ir/build.h"
#include "core/loop/cost.h"
#include "core/runtime/kernel_cache.h"
#include "core/runtime/machine.h"
#include "diff_util.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

bool once() { return test::test_backend() == "c"; }

// A scratch cache directory for this process, set before the ceiling is first read.
std::string scratch_cache() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("lathe-roof-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    setenv("LATHE_CACHE_DIR", d.c_str(), 1);
    return d.string();
  }();
  return dir;
}

Graph sgemm_graph(int64_t m, int64_t n, int64_t k) {
  NodeRef a = prim::input("a", DType::F32, {m, k});
  NodeRef b = prim::input("b", DType::F32, {k, n});
  return Graph::from_outputs({{"y", prim::extern_call("sgemm", {a, b}, DType::F32, {m, n}, {m, n, k, 0, 0})}});
}

TEST(ProfileRoof, ExternSgemmHasFlops) {
  if (!once()) GTEST_SKIP() << "runs with the c backend";
  Program p = build_program(sgemm_graph(96, 80, 64));
  ASSERT_EQ(p.funcs.size(), 1u);
  ASSERT_EQ(p.funcs[0].kind, "extern");
  auto cost = loop::estimate_cost(p.funcs[0], p.kg, {});
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 96 * 80 * 64);
  EXPECT_GT(cost.bytes, 0);
}

TEST(ProfileRoof, ExternSgemmIsComputeBoundInTheProfile) {
  if (!once()) GTEST_SKIP() << "runs with the c backend";
  if (!openblas_sgemm()) GTEST_SKIP() << "no OpenBLAS here";
  scratch_cache();
  Graph g = sgemm_graph(256, 256, 256);
  Executable exe = compile_graph(g, "c");
  ProfileReport r = exe.profile(random_inputs(g, 1), 3, 1);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_GT(r.kernels[0].gflops, 0.5);
  EXPECT_EQ(r.kernels[0].bound, "compute");
}

TEST(ProfileRoof, ALowCachedCeilingIsRaisedAndAboveTheRoofIsExplained) {
  if (!once()) GTEST_SKIP() << "runs with the c backend";
  std::string dir = scratch_cache();
  // A ceiling measured under heavy load, as an earlier run left it: 0.01 GB/s, 0.01 GFLOP/s.
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string path = cache_path("", "machine-" + cache_key({cpu_model(), std::to_string(threads)}).substr(0, 16) + ".json");
  {
    std::ofstream f(path);
    f << nlohmann::json{{"gflops", 0.01}, {"gbps", 0.01}, {"threads", threads}, {"cpu", cpu_model()}, {"load", 0.0}}.dump();
  }
  MachineCeiling before = machine_ceiling();
  ASSERT_DOUBLE_EQ(before.gbps, 0.01) << "the test's cache file was not read";
  NodeRef x = prim::input("x", DType::F32, {1 << 20});
  Graph g = Graph::from_outputs({{"y", prim::binary(Op::Add, x, x)}});
  Executable exe = compile_graph(g, "c");
  ProfileReport r = exe.profile(random_inputs(g, 1), 3, 1);
  // the kernel beat 0.01 GB/s: the ceiling was measured again, and only rose
  EXPECT_GT(r.peak_gbps, 0.5);
  EXPECT_GT(r.peak_gflops, 0.5);
  MachineCeiling after = machine_ceiling();
  EXPECT_GT(after.gbps, before.gbps);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  EXPECT_GT(j.at("gbps").get<double>(), 0.5) << "the raised ceiling is cached";
  // whatever the load now, a share above the roof comes with its reason
  for (auto& k : r.kernels) {
    if (k.roof > 1) EXPECT_FALSE(k.above_roof.empty()) << k.name;
    else EXPECT_TRUE(k.above_roof.empty()) << k.name;
  }
  // and a lower measurement never lowers it
  MachineCeiling low = after;
  low.gbps = 0.001;
  low.gflops = 0.001;
  raise_machine_ceiling(low);
  EXPECT_DOUBLE_EQ(machine_ceiling().gbps, after.gbps);
  fs::remove_all(dir);
}

TEST(ProfileRoof, TheTableFootnotesSharesAboveTheRoof) {
  ProfileReport r;
  r.backend = "c";
  r.peak_gbps = 10;
  r.peak_gflops = 100;
  KernelProfile k;
  k.name = "k0_add";
  k.kind = "elementwise";
  k.median_ms = 1;
  k.roof = 3.5;
  k.bound = "memory";
  k.above_roof = above_roof_reason(3.5, true, 4096);
  r.kernels.push_back(k);
  std::string t = r.table();
  EXPECT_NE(t.find("350*"), std::string::npos) << t;
  EXPECT_NE(t.find("* k0_add: 350% of the ceiling: "), std::string::npos) << t;
  EXPECT_EQ(above_roof_reason(0.9, true, 4096), "");
  EXPECT_NE(above_roof_reason(1.5, false, 1e9), "");
}

}  // namespace
}  // namespace lathe
