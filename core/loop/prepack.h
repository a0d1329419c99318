// prepack.h — constant B operands of the CPU's packed matmuls, packed once when the program
// is built instead of on every run.
//
// The packed lowering (lower_matmul.cpp) copies each KC × NC block of B into NR-wide panels
// before its micro-kernel reads them. When B is a weight (a constant tensor) that copy is the
// same on every run, and for a wide B (GPT-2's 768 × 50257 vocabulary projection: each k row
// of a block a page apart) it costs a large share of the kernel. prepack_constant_b does it
// once: all of B in panel order, per KC block pc and per NR-wide panel of the whole N range,
//     packed[((pc · panels + jp) · KC + kk) · NR + c] = B[k = pc·KC + kk, n = jp·NR + c]
// zero where k >= K or n >= N, so any job's panels for columns n0.. (n0 a multiple of NR)
// start at ((pc · panels + n0 / NR) · KC) · NR and read exactly as the kernel's own copy.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/loop/lower.h"
#include "core/runtime/host_tensor.h"

namespace lathe::loop {

// For each matmul kernel whose B operand (the N side) is a constant f32 tensor of at least
// min_bytes with static sizes, read without range conditions (no padding), independent of
// the batch dims or (f32) packed once per batch entry (packed_batch_axes below): packs it for P (KC as matmul_blocking chooses it, NR = P.nr), adds it to kg
// as a Constant buffer (Kernel::packed_b) and returns those kernels' ids, to be lowered again.
// An int8 contraction's constant 8-bit B (a weight) is packed the same way into the integer
// panels its lowering reads (groups of G k interleaved per column, i16 without VNNI), from
// min_int8_bytes on.
// The packed copies one build made, by weight and layout (memo below): when the build
// schedules again (a kernel's lowering asked for a node to be materialized and the kernels
// changed), a weight packed the same way is not packed a second time. ResNet-50 and
// MobileNetV2 build twice, and ResNet-50 packed its 57 MiB of weights twice on every start.
// Large copies (256 KiB and up) are also kept on disk (core/runtime/tensor_cache.h: the
// kernel cache's packed/), keyed by every byte of the weight and the layout: a later process
// maps the file instead of packing again (GPT-2's warm start packed ~0.5 GB, most of it page
// faults). LATHE_PACK_CACHE=0 packs every time (A/B runs).
struct PackMemo {
  std::map<std::string, NodeRef> packed;  // the packed copy's Const node, by weight and layout
  int reused = 0;                          // packings taken from here instead of done again
  int from_disk = 0;                       // packings mapped from the pack cache
  std::map<std::pair<const void*, size_t>, std::string> digests;  // weights' content_digest, by identity
};
std::vector<int> prepack_constant_b(KernelGraph& kg, const MatmulParams& P, int64_t min_bytes = 0,
                                    int64_t min_int8_bytes = 0, PackMemo* memo = nullptr);

// The default min_bytes: the last-level cache (32 MiB when unknown). Measured on GPT-2 small
// (2-core AVX2 host): prepacking the 154 MB vocabulary projection took that kernel from
// 166–170 to 119–128 ms, while the blocks' 2–9 MB weights showed no difference within noise; packing them too
// would add ~1.5 s to every start and their size again to memory. A convolution whose sides
// orient_matmul swapped (a late layer: its weights are B, its few positions the rows) is
// prepacked at any size: each packed element serves only those few rows per run.
// LATHE_PREPACK=0 turns prepacking off, LATHE_PREPACK=all applies it to every constant B.
int64_t prepack_min_bytes();
// ... and a weight of at least kPrepackFewRowsMinBytes whose product has at most
// kPrepackFewRows rows (M times the batch, static): few rows share each packed element per
// run, so the per-run copy, a stream from memory with no multiplies to hide it, is a large
// share of the kernel (BERT-base / GPT-2 blocks at T = 128: 13% of the kernels' CPU time).
// LATHE_PREPACK=large packs by size alone (the rule above) for A/B runs.
constexpr int64_t kPrepackFewRows = 512, kPrepackFewRowsMinBytes = int64_t(1) << 20;

// The same for a constant A operand (the M side: a convolution's weights W in W · X, NCHW),
// whose MR-tall panels every N block (parallel job) of the lowering otherwise copies on
// every run: packed once as Kernel::packed_a, all of A in panel order per KC block,
//     packed[((pc · panels + ip) · KC + kk) · MR + r] = A[m = ip·MR + r, k = pc·KC + kk]
// (zero past M and K), so the MC block at m0 (a multiple of MR) starts at
// ((pc · panels + m0 / MR) · KC) · MR. Only where N <= max_n: with few columns per job each
// packed element serves few of them, and the per-run copy is a large share of the kernel
// (MobileNet's 14 × 14 and 28 × 28 layers); with many it is a few percent. And only where A
// is at most max_bytes: packing is paid on every start, warm ones too (about 1.5 ms of CPU
// per MB here). Where N <= few_n (a 14 x 14 or 28 x 28 layer: each packed element serves at
// most that many columns per run, so the per-run copy, masked rows and all, was 10-30% of
// the kernel) the cap is few_n_max_bytes instead: ResNet-50's middle stages, 2.4 MB 3x3
// weights, measured 20-30% less CPU per run (155-162 -> 109-135 ms of task-clock, load
// 11-13) for ~50 ms more CPU at build (57 -> 89 MiB packed, the originals paged out). The
// packed copy is
// a Constant buffer named packed_a_<kernel name>, shaped [K blocks, panels, KC, MR] (the
// lowering reads KC and MR from it, and uses it only when they are its own).
// An int8 contraction's constant 8-bit A (a convolution's weights) likewise, in its integer
// panels, up to max_int8_bytes packed: their per-run packing widens every element, and
// costs as much as a third of a late ResNet-50 layer (few positions per weight).
std::vector<int> prepack_constant_a(KernelGraph& kg, const MatmulParams& P, int64_t max_n, int64_t max_bytes,
                                    int64_t max_int8_bytes = 0, int64_t few_n = 0, int64_t few_n_max_bytes = 0,
                                    PackMemo* memo = nullptr);
constexpr int64_t kPrepackAMaxN = 4096, kPrepackAMaxBytes = 256 << 10, kPrepackAInt8MaxBytes = 16 << 20;
constexpr int64_t kPrepackAFewN = 1024, kPrepackAFewNMaxBytes = int64_t(64) << 20;

// Hands back the pages of every constant that kernels only gather from (gathers_only, no
// kernel reading all of it, not an output): an embedding table whose import touched every
// page (the content hash) while each run reads a few rows; the pages of a memory-mapped model
// file come back on first touch. Returns how many buffers it released.
int release_gathered_constants(const KernelGraph& kg);

// Does kernel k read `buffer` (a constant) only through gathers (Take, possibly of a view of it)
// that fetch at most an eighth of its elements in all? An embedding table tied to the
// vocabulary projection (GPT-2's wte: the projection reads all of it, the token lookup 128
// rows): the prepacking passes release the pages of a weight once its packed copy replaced
// it in every kernel that reads all of it, and a gathering kernel's few rows come back on
// first touch (the model file's pages), so it does not keep the whole table resident.
bool gathers_only(const KernelGraph& kg, const Kernel& k, int buffer);

// A constant f32 operand that differs per batch entry (Winograd's transformed weights U
// [16, K, C], one matrix per ξ of its 16 batched GEMMs) is packed once per entry it reads:
// entry e (row-major over the batch axes the operand reads, batch_axes order) at e times
// one entry's panels. Its packed A is then [entries, K blocks, panels, KC, MR] (rank 5),
// its packed B [entries, one entry's elements] (rank 2); the lowering adds the job's entry.
// packed_batch_axes: the batch axes the operand reads (empty: one entry, as before).
// LATHE_PREPACK_BATCHED=0 packs only batch-free operands (A/B runs).
std::vector<int> packed_batch_axes(const MatmulMatch& mm, const OperandAccess& x);
bool prepack_batched_enabled();

// The buffer prepack_constant_a made for kernel k, or -1.
int packed_a_buffer(const KernelGraph& kg, const Kernel& k);

// P for a GEMM of qdq-sat16's saturating pairs without VNNI: the most rows whose register tile
// fits (accumulators, B vectors, the broadcast A group, vpmaddubsw's result, vpmaddwd's ones);
// P itself with VNNI. The prepacked A panels (a conv's weights) and fit_matmul_rows both take it
// (matmul_params.cpp). n: the GEMM's columns (N <= 64 takes a one-vector-wide tile where
// that pads N less: 12 x 8 on AVX2; LATHE_INT8_NARROW_N=0 keeps NR).
MatmulParams sat16_params(MatmulParams P, int64_t n);

}  // namespace lathe::loop
