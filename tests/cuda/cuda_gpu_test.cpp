// cuda_gpu_test.cpp — differential tests of the cuda backend against the interpreter: every
// graph of zoo.h runs on the GPU with seeded random inputs and must match. Skips itself
// where there is no CUDA device (the normal test run); tests/gpu/run.sh runs it on a GPU.
#include <gtest/gtest.h>

#include "../backends/diff_util.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/driver.h"
#include "zoo.h"

namespace lathe {
namespace {

void run_all(const std::vector<cuda_test::Named>& graphs) {
  if (std::string why = cuda::availability(); !why.empty()) GTEST_SKIP() << why;
  test::DiffBatch batch("cuda");
  for (auto& [name, g] : graphs) batch.add(name, g);
  EXPECT_EQ(batch.run(), 0);
}

TEST(CudaGpu, EveryOpAndDtypeMatchesTheInterpreter) { run_all(cuda_test::op_graphs()); }

TEST(CudaGpu, PatternsMatchTheInterpreter) {
  std::vector<cuda_test::Named> small;  // bench workloads are large: the interpreter is slow on them
  for (auto& n : cuda_test::pattern_graphs())
    if (n.first.rfind("bench_", 0) != 0) small.push_back(n);
  run_all(small);
}

TEST(CudaGpu, SamplesMatchTheInterpreter) { run_all(cuda_test::sample_graphs()); }

TEST(CudaGpu, DeviceInfo) {
  if (std::string why = cuda::availability(); !why.empty()) GTEST_SKIP() << why;
  cuda::Device& d = cuda::device();
  std::printf("device: %s (%s, %d SMs)\n", d.name.c_str(), d.arch().c_str(), d.sm_count);
  EXPECT_GE(d.cc_major, 7);
}

}  // namespace
}  // namespace lathe
