// library.cpp — Extern library kernels (OpenBLAS sgemm through dlopen). See library.h.
#include "backends/library.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/ir/diag.h"

namespace lathe {

SgemmFn openblas_sgemm(std::string* why) {
  static SgemmFn fn = nullptr;
  static std::string err;
  static std::once_flag once;
  std::call_once(once, [] {
    // must happen before the library initializes; respects a user's explicit choice
    if (__builtin_cpu_supports("avx512f") && !std::getenv("LATHE_KEEP_OPENBLAS_CORETYPE"))
      setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) err = "libopenblas not found (apt-get install libopenblas-dev)";
    else if (!(fn = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm")))) err = "cblas_sgemm missing from libopenblas";
  });
  if (why) *why = err;
  return fn;
}

std::string library_kernel_available(NodeRef n) {
  if (n->op != Op::Extern) return "";
  if (n->attrs.name == "attention" || n->attrs.name == "attention_bwd") return "";  // generated code (loop IR), not a library call
  if (n->attrs.name == "gemv_q4") return n->attrs.ints.size() == 4 ? "" : "Extern gemv_q4 needs ints {M, N, K, block}";
  if (n->attrs.name == "rnn") return "";  // library_rnn.cpp (the node was checked when built)
  if (n->attrs.name != "sgemm") return "unknown library kernel '" + n->attrs.name + "'";
  std::string why;
  if (!openblas_sgemm(&why)) return "Extern sgemm needs OpenBLAS: " + why;
  if (n->attrs.ints.size() != 5) return "Extern sgemm needs ints {M, N, K, transA, transB}";
  for (size_t i = 0; i < 3; ++i)
    if (n->attrs.ints[i] > INT32_MAX) return "Extern sgemm: dims beyond 2^31 are not supported";
  return "";
}

void run_library_kernel(NodeRef n, void* const* bufs) {
  if (n->op == Op::Extern && n->attrs.name == "gemv_q4") return run_gemv_q4(n, bufs);
  if (n->op == Op::Extern && n->attrs.name == "rnn") return run_rnn(n, bufs);
  LATHE_CHECK(n->op == Op::Extern && n->attrs.name == "sgemm", "run_library_kernel: only sgemm, gemv_q4 and rnn are known");
  std::string why;
  SgemmFn f = openblas_sgemm(&why);
  if (!f) throw UserError("Extern sgemm: " + why);
  const auto& v = n->attrs.ints;
  int M = static_cast<int>(v[0]), N = static_cast<int>(v[1]), K = static_cast<int>(v[2]);
  bool ta = v[3] != 0, tb = v[4] != 0;
  constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
  f(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, M, N, K, 1.0f, static_cast<const float*>(bufs[1]),
    ta ? M : K, static_cast<const float*>(bufs[2]), tb ? K : N, 0.0f, static_cast<float*>(bufs[0]), N);
}

namespace {
std::atomic<LibraryParallelFor> g_parallel_for{nullptr};
}  // namespace

void set_library_parallel_for(LibraryParallelFor f) { g_parallel_for.store(f, std::memory_order_release); }
LibraryParallelFor library_parallel_for() { return g_parallel_for.load(std::memory_order_acquire); }

}  // namespace lathe
