// kernel_pipeline_test.cpp — the llvm backend's optimizer and code generator settings
// (jit.cpp: O3 with both vectorizers and no runtime unrolling; A/B overrides from the
// environment):
// they are part of the cache key, the loops the schedule leaves plain still vectorize, the
// matmul micro-kernel still becomes FMAs, and the results match the interpreter at odd
// sizes, batch 1 and 64.
#include <gtest/gtest.h>

#include <pthread.h>

#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "backends/llvm/jit.h"
#include "core/frontend/frontend.h"
#include "core/frontend/nn.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"

namespace lathe {
namespace {

bool env_set(const char* name) {
  const char* e = std::getenv(name);
  return e && *e;
}

TEST(LlvmPipeline, SettingsAreInTheCacheKey) {
  if (env_set("LATHE_LLVM_OPT") || env_set("LATHE_LLVM_LSR") || env_set("LATHE_LLVM_PIPELINE") ||
      env_set("LATHE_LLVM_CODEGEN"))
    GTEST_SKIP() << "the pipeline is overridden from the environment";
  std::string id = llvmjit::pipeline_id();
  EXPECT_EQ(id.rfind("O3-no-unroll;cg=O3;", 0), 0u) << id;
}

int kernel_of_kind(const Program& p, const std::string& kind) {
  for (size_t k = 0; k < p.funcs.size(); ++k)
    if (p.funcs[k].kind == kind) return static_cast<int>(k);
  return -1;
}

TEST(LlvmPipeline, LoopsStillVectorizeAndMatchTheInterpreter) {
  Backend& b = get_backend("llvm");
  for (int64_t n : {1, 64}) {
    // a matmul with a bias + relu epilogue (odd K and N), and an elementwise tail of prime size
    Tensor x = input("x", {n, 37});
    Tensor w = input("w", {37, 29});
    Tensor bias = input("b", {29});
    Tensor y = relu(matmul(x, w) + bias);
    Tensor z = exp(input("v", {1009})) * 0.5f;
    Graph g = Graph::from_outputs({{"y", y.node()}, {"z", z.node()}});
    Program p = build_program(g);
    int mm = kernel_of_kind(p, "matmul");  // batch 1: a matrix-vector product, a reduction
    if (mm < 0) mm = kernel_of_kind(p, "reduce");
    int ew = kernel_of_kind(p, "elementwise");
    ASSERT_GE(mm, 0) << "N=" << n;
    ASSERT_GE(ew, 0) << "N=" << n;
    // the elementwise loop is left to LLVM's loop vectorizer; the micro-kernel's
    // accumulators are vectors from the loop IR and must stay FMAs of them
    std::string ew_ir = b.render_optimized(p, ew);
    EXPECT_NE(ew_ir.find(" x float>"), std::string::npos) << "N=" << n << "\n" << ew_ir;
    std::string mm_ir = b.render_optimized(p, mm);
    EXPECT_NE(mm_ir.find(" x float>"), std::string::npos) << "N=" << n;
    CompileOptions cold;
    cold.use_cache = false;
    auto cp = b.compile(p, cold);
    std::string as = cp->assembly(mm);
    EXPECT_TRUE(as.find("vfmadd") != std::string::npos || as.find("mulps") != std::string::npos)
        << "N=" << n << ": no vector multiply in the matmul kernel";
    TensorMap in = random_inputs(g, 11);
    Executable exe(std::move(p), cp, "llvm");
    TensorMap got = exe.run(in), want = interpret(g, in);
    for (const char* out : {"y", "z"}) {
      std::string why;
      EXPECT_TRUE(allclose(got.at(out), want.at(out), 1e-4, 1e-4, &why)) << "N=" << n << " " << out << ": " << why;
    }
  }
}

// The buffers reach a kernel through a pointer array, so LLVM cannot tell them apart by
// itself: emit.cpp puts each buffer's loads and stores in a scope of its own (scoped no-alias
// metadata). Without it the vectorizer guarded each loop with runtime overlap checks and ran
// the scalar loop when they failed, which they always do for a kernel the memory plan runs
// in place of its input (ResNet-50 QDQ's residual kernels: 3-15 ns an element). The loops
// carry no overlap checks and still match the interpreter (odd and prime sizes, batch 1, 64).
TEST(LlvmPipeline, BufferAccessesCarryNoOverlapChecks) {
  if (!llvmjit::alias_scopes()) GTEST_SKIP() << "LATHE_LLVM_NOALIAS=0";
  Backend& b = get_backend("llvm");
  for (int64_t n : {1, 64}) {
    Tensor x = input("x", {n, 1009});
    Tensor u = input("u", {n, 1009});
    Tensor q = input("q", {1009});
    // an elementwise kernel of three inputs, and a second one reading the first's result
    Tensor y = tanh(x * u + q);
    Tensor z = exp(y) * 0.25f + y;
    Graph g = Graph::from_outputs({{"y", y.node()}, {"z", z.node()}});
    Program p = build_program(g);
    int checked = 0;
    for (int k = 0; k < p.num_kernels(); ++k) {
      std::string ir = b.render_optimized(p, k);
      // (LLVM's names for the overlap checks: bounds compared, or pointer differences)
      EXPECT_EQ(ir.find("found.conflict"), std::string::npos) << "n=" << n << " kernel " << k << "\n" << ir;
      EXPECT_EQ(ir.find("diff.check"), std::string::npos) << "n=" << n << " kernel " << k << "\n" << ir;
      EXPECT_NE(ir.find("!noalias"), std::string::npos) << "n=" << n << " kernel " << k;
      ++checked;
    }
    EXPECT_GE(checked, 1);
    auto cp = b.compile(p, CompileOptions{});
    TensorMap in = random_inputs(g, 3);
    Executable exe(std::move(p), cp, "llvm");
    TensorMap got = exe.run(in), want = interpret(g, in);
    for (const char* out : {"y", "z"}) {
      std::string why;
      EXPECT_TRUE(allclose(got.at(out), want.at(out), 1e-5, 1e-5, &why)) << "n=" << n << " " << out << ": " << why;
    }
  }
}

// A kernel's local arrays over kHeapScratchBytes (a convolution's im2col pack shared by the
// jobs, ~1 MB here; each job's packed panels) come from the running thread's scratch stack
// (parallel.h), not from its stack: the kernels run on a thread with a 512 KB stack and
// match the interpreter (an alloca of them overflowed it: SIGSEGV). Odd and prime sizes, a
// 14 x 14 3x3 convolution and a plain matmul, batch 1 and 2.
TEST(LlvmScratch, BigLocalArraysDoNotLiveOnTheStack) {
  Backend& b = get_backend("llvm");
  for (int64_t n : {1, 2}) {
    Tensor x = input("x", {n, 131, 14, 14});
    Tensor w = input("w", {263, 131, 3, 3});
    Conv2dOptions same;
    same.padding = {1, 1};
    Tensor y = relu(conv2d(x, w, std::nullopt, same));
    Tensor z = matmul(input("a", {n * 67, 613}), input("m", {613, 521}));
    Graph g = Graph::from_outputs({{"y", y.node()}, {"z", z.node()}});
    Program p = build_program(g);
    bool pushes = false;
    for (int k = 0; k < p.num_kernels(); ++k) {
      if (p.funcs[k].kind != "matmul") continue;
      std::string ir = b.render_optimized(p, k);
      pushes = pushes || ir.find("lathe_llvm_scratch_push") != std::string::npos;
    }
    EXPECT_TRUE(pushes) << "n=" << n;
    auto cp = b.compile(p, CompileOptions{});
    TensorMap in = random_inputs(g, 5);
    Executable exe(std::move(p), cp, "llvm");
    struct Job {
      Executable* exe;
      const TensorMap* in;
      TensorMap out;
    } job{&exe, &in, {}};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 << 10);
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, &attr, [](void* j) -> void* {
      auto* job = static_cast<Job*>(j);
      job->out = job->exe->run(*job->in);
      return nullptr;
    }, &job), 0);
    pthread_join(t, nullptr);
    pthread_attr_destroy(&attr);
    TensorMap want = interpret(g, in);
    for (const char* out : {"y", "z"}) {
      std::string why;
      EXPECT_TRUE(allclose(job.out.at(out), want.at(out), 1e-4, 1e-4, &why)) << "n=" << n << " " << out << ": " << why;
    }
  }
}

}  // namespace
}  // namespace lathe
