// library.h — library kernels that Extern nodes reach (the escape hatch of ops.def), shared
// by every CPU backend and by `lathe bench`'s peers.
//
// "sgemm": ints {M, N, K, transA, transB}; inputs A ([M, K], or [K, M] when transA) and
// B ([K, N], or [N, K] when transB), row-major f32; result [M, N] = A·B. It is OpenBLAS's
// cblas_sgemm, loaded with dlopen (so Lathe builds and runs without it) after selecting its
// AVX-512 kernels: Debian's OpenBLAS 0.3.21 does not recognise Zen 5 and would fall back to
// AVX2 (half the speed) — see DEPS.md.
// "gemv_q4": ints {M, N, K, block}; inputs X [M, K] f32, W packed u8 [N, K/2], scales f32
// [N, K/block]; result [M, N] = X · W^T. W holds blocks of `block` weights along K in
// block/2 bytes (byte j: low nibble = weight j, high nibble = weight j + block/2, the
// value nibble - 8) with one scale each (q4_0 style); X is read quantized per block to int16
// (core/interp/gemv_q4_act.h), so a block's sum is an integer one. library_q4.cpp, AVX-512 VNNI or AVX2 when it can.
// "rnn": the fused recurrence of core/ir/rnn_op.h (one direction of an RNN / GRU / LSTM layer,
// all its steps in one call). library_rnn.cpp, AVX2 when it can.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/ir/node.h"

namespace lathe {

using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc);

// cblas_sgemm, or nullptr with *why saying what is missing.
SgemmFn openblas_sgemm(std::string* why = nullptr);

// "" when this Extern node can run here; otherwise why not.
std::string library_kernel_available(NodeRef extern_node);
// Runs an Extern node: bufs[0] is the result, bufs[1..] its inputs (the loop IR's
// buffer order for extern kernels).
void run_library_kernel(NodeRef extern_node, void* const* bufs);

// A parallel loop over [0, n) that library kernels may run their work on: the llvm backend's
// thread pool (backends/llvm/parallel.h), set when that backend is linked in, else nullptr.
// (gemv_q4: its workers are the ones polling between a model's kernels; threads of its own
// competed with them for the cores.)
using LibraryChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
using LibraryParallelFor = void (*)(LibraryChunkFn fn, void* ctx, int64_t n);
void set_library_parallel_for(LibraryParallelFor f);
LibraryParallelFor library_parallel_for();
void run_gemv_q4(NodeRef extern_node, void* const* bufs);
void run_rnn(NodeRef extern_node, void* const* bufs);

// The rnn kernel's choosers of this process (library_rnn.cpp, rnn_chooser.h): each layer's
// record path ("" without one), whether it started from its record, its calls and each
// way's timed calls; the records written now (what the process does at exit); the choosers
// dropped, as in a new process (tests; no rnn call may be running).
struct RnnChooserState {
  std::string record;
  bool restored = false;
  int64_t calls = 0;
  std::vector<int64_t> mode_calls;
};
std::vector<RnnChooserState> rnn_choosers();
void save_rnn_chooser_records();
void forget_rnn_choosers();

}  // namespace lathe
