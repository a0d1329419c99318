// cuda_render_test.cpp — the cuda backend without a GPU: CUDA C rendered for every graph
// of zoo.h compiles with NVRTC for sm_80 and sm_90 with no errors and no warnings; the
// rendered text of three small kernels matches tests/cuda/golden/NAME.cu (bless new text
// with LATHE_BLESS=1 and review the diff); NVRTC errors show the source line; running
// without a driver gives one clean line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/driver.h"
#include "core/ir/attention_op.h"
#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "zoo.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// One translation unit with the kernels of many programs (names prefixed to stay unique),
// so that NVRTC runs once per architecture.
struct Batch {
  std::string source = cuda::cuda_prelude();
  int kernels = 0;
  void add(const std::string& label, const Graph& g) {
    SCOPED_TRACE(label);
    Program p = build_program(g);
    for (int k = 0; k < p.num_kernels(); ++k) {
      if (p.funcs[k].kind == "extern") continue;
      source += "\n" + cuda::render_program_kernel(p, k, "g" + std::to_string(programs) + "_").source;
      ++kernels;
    }
    ++programs;
  }
  void compile_clean(const std::string& name) {
    if (const char* dir = std::getenv("LATHE_CUDA_DUMP"))  // to read what was compiled
      std::ofstream(fs::path(dir) / (name + ".cu"), std::ios::binary) << source;
    for (const char* arch : {"sm_80", "sm_90"}) {
      cuda::NvrtcOptions o;
      o.arch = arch;
      try {
        cuda::NvrtcResult r = cuda::nvrtc_compile(source, name + ".cu", o);
        EXPECT_EQ(r.warnings, "") << name << " for " << arch;
        EXPECT_GT(r.binary.size(), 1000u);
      } catch (const UserError& e) {
        ADD_FAILURE() << name << " for " << arch << ":\n" << e.what();
      }
    }
  }
  int programs = 0;
};

TEST(CudaRender, EveryOpAndDtypeCompilesWithNvrtc) {
  Batch b;
  for (auto& [n, g] : cuda_test::op_graphs()) b.add(n, g);
  EXPECT_GT(b.kernels, 100);
  b.compile_clean("ops");
}

TEST(CudaRender, PatternsAndBenchWorkloadsCompileWithNvrtc) {
  Batch b;
  for (auto& [n, g] : cuda_test::pattern_graphs()) b.add(n, g);
  b.compile_clean("patterns");
}

TEST(CudaRender, SamplesAndTestGraphsCompileWithNvrtc) {
  Batch b;
  for (auto& [n, g] : cuda_test::sample_graphs()) b.add(n, g);
  b.compile_clean("samples");
}

TEST(CudaRender, WholeProgramThroughTheBackendCompiles) {
  Backend& be = get_backend("cuda");
  Program p = build_program(build_sample("03-softmax"));
  CompileOptions fresh;
  fresh.use_cache = false;
  auto cp = be.compile(p, fresh);
  ASSERT_TRUE(cp);
  EXPECT_NE(cp->full_source().find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(cp->command.find("--gpu-architecture=sm_"), std::string::npos);
  be.compile(p);  // fills the kernel cache
  auto cached = be.compile(p);
  EXPECT_TRUE(cached->from_cache) << cached->command;
  EXPECT_EQ(cached->compile_ms, 0);
  EXPECT_EQ(cached->source(0), cp->source(0));
  EXPECT_NE(cp->assembly(0).find(".entry"), std::string::npos);  // PTX of kernel 0
  EXPECT_EQ(be.render(p, 0), cp->source(0));
}

// ---- golden text -------------------------------------------------------------------------

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void expect_golden(const std::string& name, const Graph& g) {
  Program p = build_program(g);
  std::string got;
  for (int k = 0; k < p.num_kernels(); ++k) got += get_backend("cuda").render(p, k);
  fs::path path = fs::path(LATHE_SOURCE_DIR) / "tests/cuda/golden" / (name + ".cu");
  if (std::getenv("LATHE_BLESS")) {
    std::ofstream(path, std::ios::binary) << got;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing (run with LATHE_BLESS=1)";
  EXPECT_EQ(got, read_file(path)) << path;
}

// The fused attention forward renders as the FlashAttention kernel: one block per query
// tile, K/V tiles staged in shared memory, tiles above the diagonal skipped when causal; with
// LATHE_CUDA_FLASH=0 (or head dims past 128) the one-row-per-thread loop IR kernel.
TEST(CudaRender, FlashAttentionStagesKVTilesInSharedMemory) {
  NodeRef q = prim::input("q", DType::F32, {2, 3, 37, 16}), k = prim::input("k", DType::F32, {2, 3, 37, 16});
  NodeRef v = prim::input("v", DType::F32, {2, 3, 37, 16}), m = prim::input("m", DType::F32, {2, 1, 1, 37});
  Program p = build_program(Graph::from_outputs({{"y", attention_call(q, k, v, m, true, 0.25)}}));
  ASSERT_EQ(p.num_kernels(), 1);
  cuda::CudaKernel kern = cuda::render_program_kernel(p, 0);
  EXPECT_NE(kern.source.find("__shared__ float lathe_Ks[32][16]"), std::string::npos) << kern.source;
  EXPECT_NE(kern.source.find("__syncthreads()"), std::string::npos);
  EXPECT_NE(kern.source.find("keys up to the tile's last query"), std::string::npos);
  EXPECT_TRUE(kern.launch.per_block);
  EXPECT_EQ(kern.launch.block, 64);
  setenv("LATHE_CUDA_FLASH", "0", 1);
  cuda::CudaKernel plain = cuda::render_program_kernel(p, 0);
  unsetenv("LATHE_CUDA_FLASH");
  EXPECT_EQ(plain.source.find("__shared__"), std::string::npos);
  // a head dim past 128: the loop IR kernel
  NodeRef qb = prim::input("qb", DType::F32, {1, 1, 5, 130});
  Program pb = build_program(Graph::from_outputs({{"y", attention_call(qb, qb, qb, nullptr, false, 0.1)}}));
  EXPECT_EQ(cuda::render_program_kernel(pb, 0).source.find("lathe_Ks"), std::string::npos);
}

TEST(CudaGolden, ElementwiseAddFlattensIntoAGridStrideLoop) {
  NodeRef x = prim::input("x", DType::F32, {4, 8});
  expect_golden("add_f32", cuda_test::one(prim::binary(Op::Add, x, prim::constant(1.0, DType::F32, {4, 8}))));
}

TEST(CudaGolden, RowSumUsesOneBlockPerRowAndABlockReduction) {
  NodeRef x = prim::input("x", DType::F32, {64, 512});
  expect_golden("row_sum_f32", cuda_test::one(prim::reduce(ReduceOp::Add, x, {1})));
}

// softmax: the row x is read by three loops and y written by two; each thread keeps its
// elements of both in registers, so x is loaded once and y stored once (1000 is not a
// multiple of the 128-thread block: the row loops are guarded)
TEST(CudaGolden, SoftmaxKeepsItsRowInRegisters) {
  Graph g = build_sample("03-softmax");
  expect_golden("softmax_rows_f32", g);
  Program p = build_program(g);
  std::string src = get_backend("cuda").render(p, 0);
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = src.find(needle); at != std::string::npos; at = src.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("= in0["), 1u) << src;   // one global load of x
  EXPECT_EQ(count("out[("), 1u) << src;    // one global store of y
  // and the switch turns it off, for A/B runs
  setenv("LATHE_CUDA_ROW_CACHE", "0", 1);
  std::string plain = get_backend("cuda").render(p, 0);
  unsetenv("LATHE_CUDA_ROW_CACHE");
  EXPECT_EQ(plain.find("lathe_row"), std::string::npos) << plain;
}

TEST(CudaGolden, HalfMathRoundsAfterEveryOp) {
  SymInt n = SymInt::var("N");
  NodeRef a = prim::input("a", DType::F16, {n});
  NodeRef b = prim::input("b", DType::F16, {n});
  NodeRef m = prim::binary(Op::Max, prim::binary(Op::Mul, a, b), prim::constant(0, DType::F16, {n}));
  expect_golden("relu_mul_f16", cuda_test::one(m));
}

// ---- errors --------------------------------------------------------------------------------

TEST(CudaErrors, NvrtcErrorsShowTheSourceLine) {
  std::string src = "extern \"C\" __global__ void f(float* out) {\n  out[0] = undefined_name;\n}\n";
  try {
    cuda::nvrtc_compile(src, "bad.cu", {});
    FAIL() << "expected a compile error";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bad.cu(2)"), std::string::npos) << m;
    EXPECT_NE(m.find("out[0] = undefined_name;"), std::string::npos) << m;  // the offending line
  // a log that does not quote the line gets it added, numbered
  EXPECT_EQ(cuda::annotate_log("k.cu(2): warning: w", "a\nb b\n"), "k.cu(2): warning: w\n     2 | b b\n");
  }
}

TEST(CudaErrors, BadArchitectureIsAUserError) {
  cuda::NvrtcOptions o;
  o.arch = "hopper";
  EXPECT_THROW(cuda::nvrtc_compile("", "x.cu", o), UserError);
}

TEST(CudaErrors, WithoutAGpuRunningGivesOneCleanLine) {
  std::string why = cuda::availability();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_TRUE(why == "no CUDA driver (libcuda.so.1 not found)" || why.rfind("no CUDA", 0) == 0) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  Backend& be = get_backend("cuda");
  EXPECT_EQ(be.available(), why);
  NodeRef x = prim::input("x", DType::F32, {16});
  Graph g = cuda_test::one(prim::unary(Op::Sqrt, x));
  // compile_graph refuses up front ...
  try {
    compile_graph(g, "cuda");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(e.diag().message, "backend 'cuda' is not available here: " + why);
  }
  // ... and a program compiled anyway (NVRTC needs no GPU) fails cleanly when launched
  Program p = build_program(g);
  Executable exe(p, be.compile(p), "cuda");
  HostTensor in(DType::F32, {16});
  try {
    exe.run({{"x", in}});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(e.diag().message, "cuda backend: cannot run here: " + why +
                                    " (the program is compiled: its source and PTX can be inspected, e.g. p:source(1), p:asm(1))");
  }
}

}  // namespace
}  // namespace lathe
