// lower.h — kernel → loop IR.
//
// lower_kernel() turns one kernel of a KernelGraph into a LoopFunc: one loop per output dim
// (size-1 dims get none), the root's value stored at the row-major position. Inlined nodes
// become expressions (lower_value.h, shared with the matmul epilogue: views become index
// math, masks become masked loads that read 0); Take becomes an indirect load; a fused
// Reduce becomes an accumulator and a reduction loop nest, placed at the outermost loop
// level its indices depend on (so a softmax row max is computed once per row, not once per
// element). Shared subexpressions
// and loop-invariant ones are bound to locals at the level where their inputs are known.
// One expensive shared value (a transcendental: softmax's exp(x - max)) that a reduction
// loop computes over the output row is stored into the output buffer there and loaded
// back by the output loop instead of being computed twice (the "stash"; see stash_at).
//
// If a fused reduction would be recomputed by an inner loop (its index does not depend on
// an outer prefix of the loop nest), lowering throws NeedsMaterialize; build_program then
// reschedules with that node materialized. Matmul kernels go to lower_matmul_kernel().
#pragma once
#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

struct NeedsMaterialize {
  NodeRef node;
  std::string why;
};

// Block sizes of the packed matmul; defaults are tuned for AVX-512 with 1 MiB L2. kc, mc
// and nc are upper bounds: matmul_blocking() picks the sizes one contraction uses.
struct MatmulParams {
  int mr = 8, nr = 32, lanes = 16;      // register tile MR×NR (NR a multiple of lanes)
  int kc = 256, mc = 128, nc = 512;    // cache blocks (mc multiple of mr, nc of nr)
  // K is cut into the fewest equal blocks (multiples of 8) of at most kc_max (0: kc), kc
  // for a symbolic K. A cap a little over kc would save a whole block where K is just over a
  // multiple of it (a 3x3 convolution's 9 x C: 576 = 2 x 288, not 3 x 192; 2304 = 8 x 288,
  // not 9 x 256), each block a read-modify-write of the output tile and a pass of the packing
  // loops; with 320 ResNet-50's 3x3 layers measured no faster on the 2-core AVX2 host (CPU
  // time per run within noise, a 256-channel 14 x 14 layer 1-12% slower in 4 of 4 rounds),
  // so the default stays kc. LATHE_MATMUL_KC_MAX=N sets it (A/B runs on a quiet machine).
  int kc_max = 0;
  // The bytes a contraction's per-run B pack (KC x NC, the im2col of a convolution's input)
  // and its A block (KC x MC) may take together, so that the packed B is still in L2 when the
  // micro-kernel reads it back (0: no limit). Over it, KC is cut (more, shorter K blocks).
  // unet's convolutions after a concat (K 576-1152, NC 512: a 393-659 KiB B block on the
  // 512 KiB L2) ran at 36-50 GFLOP/s a core against 70-75 for their neighbours; with KC 144
  // they ran ~40% faster. blocks_for_caches sets it to 3/4 of L2; LATHE_MATMUL_B_BLOCK=0: none.
  int64_t b_block_bytes = 0;
  // B read where it lies (NR consecutive columns per k, no packing; the ragged last panel
  // still copied): -1 the heuristic's choice (reads_b_in_place: a 1x1 convolution into few
  // channels), 0 packed always, 1 in place wherever B's columns are contiguous (the tuner's
  // knob: a batched matmul with few rows of A per B, 3 x 17x1000 · 1000x37, packs a K x N
  // block for 17 FMAs per element)
  int b_in_place = -1;
  // A read where it lies (the micro-kernel broadcasts its MR rows straight from the
  // operand, no packed copy): -1 the heuristic's choice (reads_a_in_place: a small GEMM
  // whose jobs feed each A panel to few B panels), 0 packed always, 1 in place wherever it
  // can be (f32, no window, M known: the tuner's knob)
  int a_in_place = -1;
  // The host's default tile on 32 vector registers (AVX-512: 8 x 32), which an f32
  // convolution's contraction widens (conv_matmul_params); false for a tile set by hand
  // (LATHE_MATMUL_TILE, the tuner's candidates), which every kernel keeps
  bool wide_conv = false;
  // KC is the host's, derived from its caches (host_matmul_params without LATHE_MATMUL_TILE,
  // LATHE_MATMUL_KC or LATHE_MATMUL_KC_MAX): conv_matmul_params may round it down to a power of two
  bool host_kc = false;
};

// The blocks of one contraction (M, N, K, batch sizes; < 0 where symbolic) on `threads`
// threads. The parallel jobs are batch × ceil(N / nc) × msplit; N is cut into equal
// NR-multiple blocks, into a multiple of `threads` jobs where N allows (a 5-job loop on 2
// threads runs at 3/5 of its speed), and M is split when there are fewer jobs than
// threads (rather than N, when M is the longer side: each N block packs all of A). K and each job's M range are cut into equal blocks (KC a multiple of 8, MC of
// MR), so no thin last block streams the packed panel for little work.
// a_packed: A is packed once at build (an int8 convolution's prepacked weights), so an N
// block packs no A and N is split first even when M is longer (an M split packs all of B
// in every job).
struct MatmulBlocking {
  int64_t kc = 0, mc = 0, nc = 0, msplit = 1;
};
// b_elem_bytes: the size of a B element packed on every run (0: B is not packed per run, a
// constant packed at build; then p.b_block_bytes does not apply).
// ragged_q: the last B panel of a known N that is no multiple of NR runs the ragged-columns
// micro-kernel on its first ragged_q of the NR / lanes vectors (0: it costs a whole panel);
// the N blocks' jobs are weighed so (196 positions on NR 32: six panels and one of 4
// columns at half a panel's cost split 3 + 3.5, not 4 + 2.5).
MatmulBlocking matmul_blocking(int64_t m, int64_t n, int64_t k, int64_t batch, int threads, const MatmulParams& p = {},
                               bool a_packed = false, int jobs_per_thread = 1, int b_elem_bytes = 0, int ragged_q = 0);

// Slack for the pool (a plain or batched f32 matmul whose B is packed at build and whose A
// is packed by each job): with fewer than `per_thread` jobs a thread, M is split further
// (b.msplit, b.mc), so that a thread that is late or slow has jobs the other threads can take
// over. An M split copies no B (it is read in place) and packs only its own rows of A, where
// one more N block would pack all of A again. Each M range keeps at least 4 MR panels; b is
// returned as it is when M is symbolic, b already splits M, or per_thread <= 1.
MatmulBlocking m_splits_for_slack(MatmulBlocking b, int64_t m, int64_t n, int64_t batch, int threads, const MatmulParams& p,
                                  int per_thread);

// Balance for the pool where M splits copy nothing (B packed at build, A by each job or
// read in place): when the jobs of b's N blocks and M splits share the threads less than 90%
// evenly (split_efficiency, in tiles), the N blocks (whole NR panels, at most b.nc wide) and
// M splits (at least 2 MR panels a range, at most 2 x threads of them) whose jobs share them
// best, where that is at least 5 points better; the fewest jobs among equals. b as it is
// when a size is symbolic or there is one thread.
MatmulBlocking m_splits_for_balance(MatmulBlocking b, int64_t m, int64_t n, int64_t batch, int threads,
                                    const MatmulParams& p);

// How well `threads` pool threads share jobs of these sizes (in any unit), in the order the
// pool claims them (contiguous shares, then what is left in the others'): the total over
// threads x the longest thread's sum; 1 when no thread waits at the join.
double split_efficiency(const std::vector<int64_t>& jobs, int threads);

// The host's data caches in bytes (0: unknown), from sysfs (cpu0's cache/index*: L1 data,
// L2 and L3, each one instance's size).
struct HostCaches {
  int64_t l1d = 0, l2 = 0, l3 = 0;
};
HostCaches host_caches();
// P's cache blocks derived from the caches: KC so that the B micro-panel (KC x NR) takes
// half of L1d, MC so that the A block (MC x KC) takes 9/32 of L2 (256 x 144 on 6 x 16 with
// 32 KiB / 512 KiB, the blocks measured on that Zen 3). An unknown size keeps P's block, a
// derived one stays within [1/2, 2] of it.
MatmulParams blocks_for_caches(MatmulParams p, const HostCaches& c);
// The register tile and cache blocks for the machine lathe runs on (the c and llvm backends
// compile for the host): the defaults on AVX-512; MR 6 × NR 16 on 8-lane AVX/AVX2, whose 16
// vector registers hold 12 accumulators, the B row and the broadcast (8 × 32 would spill
// 32 accumulators on every k); 6 × 8 on SSE. KC and MC from the host's caches
// (blocks_for_caches; LATHE_MATMUL_CACHE_BLOCKS=0 keeps the compiled-in 256 and 144).
// LATHE_MATMUL_TILE=MRxNRxLANES, LATHE_MATMUL_KC=N and LATHE_MATMUL_MC=N override (A/B
// comparisons).
MatmulParams host_matmul_params();
// P with its row tile fitted to one kernel's M: MR one less where that pads M by at least 5%
// fewer rows (a 7 x 7 layer's 49 positions, swapped to the rows: 50 on MR 5, not 54 on MR 6:
// the last panel of one row did a whole panel's FMAs), for f32 kernels whose A is packed per
// run and where MR - 1 rows still keep 8 accumulators. LATHE_MATMUL_FIT_ROWS=0 keeps P.
MatmulParams fit_matmul_rows(const KernelGraph& kg, int kernel, MatmulParams P);
// The tile of an f32 convolution's contraction (a window, or a group of dims on any side:
// implicit im2col, a 1x1 convolution's positions, Winograd's transforms) where P is the host's
// default on 32 vector registers (P.wide_conv) and LATHE_MATMUL_CONV_TILE=1 (opt-in, read on
// every call): 8 x 48, 24 accumulators and three B vectors a step (KC and MC from the caches
// for that NR, as blocks_for_caches derives them), not 8 x 32's 16 and two; else P. Plain
// matmuls (a transformer's linear layers) always keep P. The lowering and both prepack paths
// take it (their panels and K blocks must agree). Off by default: on the 2-core AVX-512 host
// (one thread, per-kernel minima, 3-4 alternating rounds at load 8-12) ResNet-50's stride-2
// 3x3 layers ran 2-4% faster (4.11-4.12 vs 4.18-4.33 ms), its 1x1 layers within noise (19.6-19.8
// vs 19.2-19.9 ms), and MobileNetV2's GEMMs 1-4% slower (2.81-2.93 vs 2.77-2.84 ms: its 14 x 14
// and 7 x 7 1x1 layers 5-12% slower, the 112 x 112 one 15% faster).
//
// And the K block of a weight contraction that is no plain linear layer (f32: a convolution's
// contraction as above, or a batched one with a constant side: Winograd's 16 GEMMs of U)
// where P's KC is the host's (P.host_kc) and K is over it: rounded down to a power of two, so the K of such
// layers (64 to 2048, 9 x 2^n) splits into whole blocks of it and the packed panels are whole
// KiBs (KC x MR floats: 4 KiB at 128 x 8). The AVX-512 host's cache-derived 192 cut K 512 into
// 3 x 176 and 1024 into 6 x 176: ResNet-50's layer-4 Winograd GEMMs (16 x 512 x 512 x 16,
// prepacked U streamed from L3) ran 1.40-1.44 ms at KC 176 (and 1.09-1.13 at 88), 0.72-0.85
// at 128, 0.77-0.82 at 64, 0.92-1.01 at 256; the model's kernels summed 37.9-38.0 -> 35.5-36.0
// ms, its 1x1 layers 19.7-19.8 -> 18.9-19.1 (one thread, per-kernel minima, 2 alternating
// rounds at load ~10). Plain matmuls (BERT's and GPT-2's linear layers, attention's batched
// products of activations) keep P's KC. LATHE_MATMUL_KC_POW2=0 keeps it everywhere (A/B runs).
MatmulParams conv_matmul_params(const MatmulMatch& mm, MatmulParams P);
// How the int8 GEMM (u8/i8 operands, i32 sums) groups k: 4 (u8 × i8 bytes, vpdpbusd) on
// hosts with AVX-512 VNNI or AVX-VNNI, else 2 (both widened to i16 when packed, vpmaddwd:
// exact, where vpmaddubsw's i16 pair sums would saturate). LATHE_INT8_DOT=vnni|i16 overrides
// (A/B runs; the vnni layout on a host without VNNI computes the same through plain code).
int host_int8_dot_group();
// Does the int8 GEMM take i8 × u8 operands (a convolution's weights as A, its u8 im2col as B)
// as VNNI groups of 4 too (vpdpbusd with the u8 columns as its unsigned operand)? Where the
// host's group is 4; LATHE_INT8_VNNI_I8U8=0 widens them to i16 pairs as before (A/B runs).
bool vnni_i8_u8();
// The K block of an integer contraction whose panels hold `elem_bytes`-byte values (1: u8 ×
// i8 groups of 4, 2: i16 pairs): the f32 block's bytes (P.kc of 4-byte values), so 4× (2×)
// the k. LATHE_INT8_KC=N sets it (0: P.kc as f32). The lowering and the prepacked panels
// both take it (they must agree).
MatmulParams int_kc(MatmulParams P, int elem_bytes);
// The blocking parameters of a contraction whose k is grouped by `group` (the int8 GEMM's
// 4 or 2, see host_int8_dot_group; 0 or 1: f32, P as is): int_kc at the group's bytes.
// The lowering and both prepack paths call this one (they must agree).
MatmulParams kc_for_group(MatmulParams P, int group);
// Whether an f32 contraction copies its B side into a packed block on every run as a
// padded window's panels copied whole (a convolution's input whose interior is not read in
// place: MatmulLowering::window_in_place): the case matmul_blocking's b_elem_bytes is for.
// The lowering and the build's A prepack ask it alike, so their K blocks agree.
bool packs_b_window_whole(const MatmulMatch& mm, const MatmulParams& P);

// plain = true: a matmul kernel is lowered as the plain reduction it is (a loop per output
// dim, the reduction loop inside, the epilogue after it), not as the packed GEMM nest: the
// unscheduled loops every kernel kind has, for hand scheduling (p:kernel(i):reset(true)).
// Its LoopFunc keeps kind "matmul". Loop names are unique within the returned kernel.
LoopFunc lower_kernel(const KernelGraph& kg, int kernel, bool plain = false);
LoopFunc lower_matmul_kernel(const KernelGraph& kg, int kernel, const MatmulParams& params = {});
// The CPU lowering's choice of sides for a contraction match_matmul found: B (the NR-wide
// vector side) holds the output's innermost dim, except for a convolution whose positions
// are few and in rows shorter than NR (a late layer at 7 × 7) and whose other side pads
// less: then the positions are the rows (A, gathered MR at a time) and the weights the
// columns (B), and the output is written a column stride apart. Returns whether it swapped.
bool orient_matmul(MatmulMatch& mm, const MatmulParams& params);
// Tile sizes of the fused attention kernel (lower_attention.cpp): BQ query rows per job, BK
// keys per K/V tile. LATHE_ATTENTION_TILE=BQxBK overrides the host's (A/B runs, tuning).
// MR query rows share each K/V vector load in the register-tiled inner products.
// lanes: the vectors of those inner products (host_attention_params: the host's, 16 with
// AVX-512; 8 where the tile or a head dim is no multiple of 16); mr16: the forward's MR on 16
// lanes (8 x 32 tiles: 16 accumulators of the 32 registers), mr the 8-lane tiles' (and the
// backward's).
// causal_skip: a causal tile's score panels wholly above the diagonal and its P·V keys past
// the last query of an MR block are not computed (their probabilities are 0).
struct AttentionParams {
  int bq = 64, bk = 64, mr = 4;
  bool vector = true;  // register-tiled inner products (false: scalar loops, the GPU's form)
  int lanes = 8, mr16 = 8;
  bool causal_skip = true;
  bool causal_rows = true;  // causal_skip: the softmax rows stop at their MR block's last key (LATHE_ATTENTION_CAUSAL_ROWS=0)
  bool transpose = true;    // the K tile's copy is marked annot.transpose where K's rows are contiguous (a backend
                            // may transpose it in registers) (LATHE_ATTENTION_TRANSPOSE=0)
};
AttentionParams host_attention_params();
LoopFunc lower_attention_kernel(const KernelGraph& kg, int kernel, const AttentionParams& params);
// The fused backward (Extern "attention_bwd", lower_attention_bwd.cpp): dQ or dS jobs per query
// tile of BQ rows, dK|dV jobs per key tile of BK rows; plain = one row per job (the GPU's form).
LoopFunc lower_attention_bwd_kernel(const KernelGraph& kg, int kernel, const AttentionParams& params);
// Is f the packed GEMM nest of lower_matmul_kernel (not the plain reduction of a matmul)?
bool is_packed_matmul(const LoopFunc& f);

// Renames every loop called `from` in body to `to`, with the references to it (an inner
// loop of the same name shadows it).
void rename_loops(std::vector<Stmt>& body, const std::string& from, const std::string& to);
// Gives each loop of f its own name: a loop whose name an earlier loop (pre-order) took
// becomes NAME2, NAME3, … (a name no variable, buffer or dim of f uses), so a schedule
// primitive's loop name always means one loop.
void unique_loop_names(LoopFunc& f);

}  // namespace lathe::loop
