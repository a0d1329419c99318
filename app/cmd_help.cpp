// cmd_help.cpp — `lathe help [TOPIC]`: the command list, per-command help, and (through the
// REPL's help) the Lua API: `lathe help lua` lists every Lua function, `lathe help matmul`
// or `lathe help lathe.randn` documents one, `lathe help :step` a REPL colon command.
#include <iostream>

#include "app/commands.h"

#ifdef HAVE_LATHE_SCRIPTING
#include "scripting/commands.h"
#endif

namespace lathe::app {
namespace {

// Lua functions and REPL commands; returns -1 when scripting is not built.
int lua_help(const std::string& topic) {
#ifdef HAVE_LATHE_SCRIPTING
  script::Workbench bench;  // registering the module fills the help table
  auto r = bench.help(topic);
  if (!r.ok) {
    std::cerr << "lathe help: no topic '" << topic << "' (a command, `lua`, a Lua function as listed (k:split), a :command, `patterns`)\n";
    return 1;
  }
  std::cout << r.output << "\n";
  return 0;
#else
  (void)topic;
  return -1;
#endif
}

const char* kEnvironment =
    "Environment variables lathe reads:\n"
    "  LATHE_CACHE_DIR          kernel cache directory (default $XDG_CACHE_HOME/lathe, ~/.cache/lathe)\n"
    "  LATHE_PACK_CACHE=1       large weights' packed copies kept in the cache directory's packed/, checked and\n"
    "                           mapped by later starts (default off: the first start writes them all, ~0.5 GB\n"
    "                           for GPT-2); =trust: a file's size, header and key checked, not its payload's digest\n"
    "  LATHE_PACK_CACHE_MAX     bytes packed/ may hold (e.g. 8G; default 4G): the least recently used go first\n"
    "  LATHE_PACK_CACHE_DIR     where the packed weights are kept instead (default: the cache directory's packed/)\n"
    "  LATHE_MEMORY_LIMIT       bytes a model may use (e.g. 4G); default: available memory, cgroup limit\n"
    "  LATHE_ASSETS             where the built-in rule sets live (default: next to the binary / source tree)\n"
    "  CC                       the C compiler of the c backend (default cc)\n"
    "  OMP_WAIT_POLICY          the c backend's OpenMP workers; lathe sets passive when unset (spinning\n"
    "                           workers stall for milliseconds when the cores are shared)\n"
    "  LATHE_KEEP_OPENBLAS_CORETYPE  keep OPENBLAS_CORETYPE as set (lathe otherwise picks SkylakeX kernels)\n"
    "  LATHE_MATMUL_TILE=6x16x8 the CPU matmuls' register tile MRxNRxLANES (default from the host: 8x32x16\n"
    "                           with AVX-512, 6x16x8 with AVX/AVX2, 6x8x8 with SSE; LANES 8|16)\n"
    "  LATHE_ATTENTION_TILE=64x64  the fused attention kernel's query x key tile BQxBK (flash-attention rules)\n"
    "  LATHE_FLASH_ATTENTION=causal|all|0  an .onnx model loaded by run (and bench --models), kernels, tune,\n"
    "                           the REPL's :load or the app: the flash-attention rules applied at load\n"
    "                           (REPL / app: as a session s, :seek 0 undoes), kept when every fused\n"
    "                           attention is causal (default; a padding mask measured no faster fused at\n"
    "                           T 128; CPU backends), always (all), never (0)\n"
    "  LATHE_ATTENTION_BWD=unfused  grad() of the fused attention differentiates its definition (default\n"
    "                           fused: Extern attention_bwd recomputes the probabilities tile by tile)\n"
    "  LATHE_QDQ=unfused        ONNX QDQ models keep QuantizeLinear / DequantizeLinear as plain ops (default:\n"
    "                           the qdq rules fuse them into int8 contractions at load)\n"
    "  LATHE_QDQ_SAT16=1|0      after them, the u8 x i8 sums as ONNX Runtime's AVX2 kernels compute them\n"
    "                           (neighbouring k pairs saturated to i16, vpmaddubsw; a conv's k as (kh, kw, ci)):\n"
    "                           rule set qdq-sat16. Default: on for x86 with AVX2 and without VNNI (ORT's\n"
    "                           outputs there), exact sums elsewhere; 0 keeps exact sums (run/kernels/bench\n"
    "                           --qdq-sat16 on|off, lathe.load(path, {qdq_sat16=false}))\n"
    "  LATHE_BENCH_ATTENTION_T=1024  sequence length of the attention-grad bench workload\n"
    "  LATHE_STAGED_TRACE=1     ONNX models run staged (`onnx-test --staged`, `run`): print each segment\n"
    "  LATHE_TUNE_DEBUG=1       `lathe tune` prints every candidate it builds (schedule, model estimate)\n"
    "  LATHE_TUNE_JAM=1         `lathe tune` also searches row blocking (jam LOOP by 2|4) of row-wise reductions\n"
    "  LATHE_PREPACK=0|all|large  constant matmul B operands (weights) larger than the last-level cache or of\n"
    "                           >= 1 MiB under <= 512 rows (M x batch: a transformer's projections), and conv\n"
    "                           weights (A, <= 256 KiB) of layers with <= 4096 positions, are packed at build\n"
    "                           time: 0 = never (packed on every run), all = every constant B, large = the\n"
    "                           last-level-cache size rule alone (no few-rows rule; A/B comparisons)\n"
    "  LATHE_PREPACK_A=0        conv weights (A) packed on every run again (A/B comparisons); =small: only\n"
    "                           weights under 256 KB, also where a layer has few positions (the old cap)\n"
    "  LATHE_PREPACK_BATCHED=0  constants that differ per batch entry (Winograd's U) packed on every run again,\n"
    "                           not once per entry at build (A/B comparisons)\n"
    "  LATHE_RELEASE_COMPUTED=0 keep Winograd's U after the build packed it (A/B; default: freed, made again\n"
    "                           from the weights if the graph is read later)\n"
    "  LATHE_RELEASE_GATHERED=1 embedding tables read only by gathers hand their pages back at build (lower RSS;\n"
    "                           evicts them from the page cache, so the next start reads them from disk)\n"
    "  LATHE_MATMUL_SHARED_PACK=0  GEMM jobs that split M (or a conv's N) each pack the whole shared side\n"
    "                           again, instead of one parallel pack step for all of them (A/B comparisons)\n"
    "  LATHE_WINOGRAD=0|all     ONNX 3x3 convs (stride 1, one group, constant f32 weights) run as Winograd\n"
    "                           F(2x2,3x3) where C, K >= 64 over maps of 7x7..128x128; 0 = never (A/B),\n"
    "                           all = wherever it applies (tests)\n"
    "  LATHE_WINOGRAD_SPARSE=1  Winograd's input and output transforms as +-1 sums of strided views instead\n"
    "                           of dense 16-term contractions (off: no faster on the measured layers)\n"
    "  LATHE_WINOGRAD_SPARSE_OUT=1  only the output transform sparse (off: a tie in noise); LATHE_WINOGRAD_PAD=0:\n"
    "                           no zero rows in U against M's planes aliasing in L1 (sparse output only)\n"
    "  LATHE_CONV_IN_PLACE=0|guarded  k x k convolutions: 0 = interior im2col panels copied, never read in\n"
    "                           place; guarded = every panel packed with per-k bounds (A/B comparisons)\n"
    "  LATHE_PACK_STRIDED=0|1   strided k x k convolutions (a stem): llvm copies each interior im2col panel as\n"
    "                           deinterleaved whole vectors, not half scalar (default: on for 16-lane hosts)\n"
    "  LATHE_PACK_MASKED_RUNS=0|1  strided convolutions' border runs of the im2col pack: llvm copies each as\n"
    "                           masked 16-lane chunks, not gathers (default: on for AVX-512 hosts)\n"
    "  LATHE_MATMUL_PACK_PER_PANEL=1  where one MC block holds a GEMM job's rows (a conv into few channels),\n"
    "                           pack each B panel just before its micro-kernels, not the NC block up front\n"
    "                           (opt-in: within the noise on the shared 2-core host, -20% to +27% by shape)\n"
    "  LATHE_MATMUL_B_IN_PLACE=0  stride-1 1x1 convolutions into <= 64 channels pack B, not read in place\n"
    "  LATHE_MATMUL_B_IN_PLACE_K=N  the least K (input channels) such a convolution reads B in place at\n"
    "                           (default 32; 64 before: A/B runs)\n"
    "  LATHE_MATMUL_A_IN_PLACE=0  small GEMMs (a job feeds each A panel to <= 4 B panels: batched 17x33 . 33x29)\n"
    "                           pack A per run as before instead of broadcasting its rows in place (A/B runs)\n"
    "  LATHE_MATMUL_RAGGED_ROWS=0  a GEMM's last A panel of M % MR rows runs the full MR-row micro-kernel\n"
    "                           on zero padding, not one of its rows only (A/B comparisons)\n"
    "  LATHE_MATMUL_RAGGED_COLS=0  an f32 GEMM's last B panel of N % NR columns runs all NR / lanes vectors\n"
    "                           on zero padding, not only the vectors its columns fill (A/B comparisons)\n"
    "  LATHE_MATMUL_RAGGED_SPLIT=0  that ragged panel's kernel and the whole panels' one share the tile's\n"
    "                           write-back (under one if), not one write-back each (A/B comparisons)\n"
    "  LATHE_MATMUL_TILE_SUMS=0  outputs with strided columns (swapped late convs) add each K block's sums into the output\n"
    "  LATHE_MATMUL_FIT_ROWS=0  keep the host's MR where MR - 1 would pad M by fewer rows\n"
    "  LATHE_MATMUL_KC_POW2=0   convolutions' and batched weight GEMMs keep the cache-derived K block, not\n"
    "                           it rounded down to a power of two (A/B comparisons)\n"
    "  LATHE_MATMUL_CONV_TILE=1  f32 convolutions' GEMMs take an 8 x 48 tile where the host's is AVX-512's\n"
    "                           8 x 32 (opt-in experiment, A/B runs; plain matmuls keep the host's)\n"
    "  LATHE_INT8_KC=N          the integer GEMMs' K block (default: the f32 block's bytes, 4x its k for\n"
    "                           u8 x i8 panels, 2x for i16 pairs; 0: the f32 KC, for A/B comparisons)\n"
    "  LATHE_MATMUL_KC_MAX=N    the CPU matmuls' largest K block: K in the fewest equal blocks of at most N\n"
    "                           (default KC; 320 takes a 3x3 conv's 576 as 2 x 288, not 3 x 192: A/B runs)\n"
    "  LATHE_MATMUL_CACHE_BLOCKS=0  the CPU matmuls' KC and MC stay compiled in (256, 144 on AVX2), not\n"
    "                           derived from the host's L1d and L2 sizes in sysfs (256, 144 on a 32 KiB /\n"
    "                           512 KiB Zen 3)\n"
    "  LATHE_MATMUL_KC=N, LATHE_MATMUL_MC=N  the CPU matmuls' K block (a multiple of 8) and M block\n"
    "                           (rounded up to MR), for A/B runs\n"
    "  LATHE_MATMUL_NC=N  the CPU matmuls' N block before the thread split (rounded up to NR; A/B runs)\n"
    "  LATHE_MATMUL_B_BLOCK=0  no cut of KC for a convolution's per-run B block to fit L2 (A/B runs)\n"
    "  LATHE_COLLAPSE_ROWS=0   element-wise kernels keep short innermost rows (under 64) as their own loop,\n"
    "                           not collapsed with the loop over rows where every access steps over whole\n"
    "                           rows (A/B runs)\n"
    "  LATHE_UNROLL_TINY_ROWS=0  a tiny innermost row (2-8 iterations) writing the innermost output axis\n"
    "                           (a Resize's interleaved phases) is not unrolled into its parent, which then\n"
    "                           is not vectorized (A/B runs)\n"
    "  LATHE_RESIZE_PHASES=0   ONNX Resize / Upsample along the innermost axis as a Take with a constant\n"
    "                           index per output element (vector gathers), not as the periodic phases of\n"
    "                           strided slices of the edge-padded input, interleaved (A/B runs)\n"
    "  LATHE_UNSWITCH=0        the default schedule keeps tests on one outer loop's variable (a concat's\n"
    "                           input, a pad's border rows) inside the loop body, not one copy of the body\n"
    "                           per version (A/B runs)\n"
    "  LATHE_PEEL_ROWS=0       the default schedule does not peel short odd f32 rows (32 or more, not a\n"
    "                           multiple of 8: a softmax over 77) into whole vectors and one masked vector\n"
    "                           (A/B runs)\n"
    "  LATHE_PEEL_LANES=8      such rows peeled by 8 lanes on an AVX-512 host too (default there: 16 where\n"
    "                           the row holds 4 vectors of 16, as a softmax over 77 does) (A/B runs)\n"
    "  LATHE_JAM_ROWS=0        the default schedule does not run short reduced f32 rows (up to 256: a\n"
    "                           softmax over 77) 4 or 2 at a time (jam; the row loop fused with its parent\n"
    "                           first where its count is odd) (A/B runs)\n"
    "  LATHE_EXP2_FAST=0       llvm: 2^x (every exp) by the previous polynomial (degree-6 Taylor, NaN by\n"
    "                           a final select: 22 AVX2 instructions, not 18) (A/B runs)\n"
    "  LATHE_MATMUL_PREFETCH_C=0  the CPU matmuls' micro-kernel does not prefetch its output tile before\n"
    "                           the k loop (A/B runs)\n"
    "  LATHE_MATMUL_PREFETCH_EPILOGUE=0  int8 GEMMs do not prefetch their epilogue's inputs of the\n"
    "                           output's shape (a residual) with the output tile (A/B runs)\n"
    "  LATHE_INT8_SHARED_BOUNDS=0  an int8 conv's B pack computes each k's window bounds, not once per group\n"
    "                           of 4 channels (A/B runs)\n"
    "  LATHE_INT8_CONTIG_PANELS=0  an int8 stride-1 conv's panels that cross a row or touch the padding are\n"
    "                           packed run by run, not copied whole and their out-of-bounds columns zeroed (A/B runs)\n"
    "  LATHE_INT8_NARROW_N=0    int8 GEMMs of saturating pairs (no VNNI) with N <= 64 keep the host's\n"
    "                           two-vector tile (5 x 16 on AVX2), not 12 x 8 where that pads N less (A/B runs)\n"
    "  LATHE_INT8_VNNI_I8U8=0   on VNNI hosts, an int8 conv's i8 weights x u8 im2col (exact sums) widen to\n"
    "                           i16 pairs (vpmaddwd), not u8 x i8 groups of 4 (vpdpbusd) with the input\n"
    "                           channels innermost in k (A/B runs)\n"
    "  LATHE_INT8_GROUP_RUNS=0|1  an int8 strided conv's B pack copies each of a group's 4 channels' runs\n"
    "                           alone, not all 4 per column in one loop (0); 1: stride-1 convs too (A/B runs)\n"
    "  LATHE_NARROW_REQUANT=0   an int8 GEMM whose requantized value is read on by steps that cannot be its\n"
    "                           epilogue (a residual sum) writes its i32 sums, not the u8 (A/B runs)\n"
    "  LATHE_MATMUL_PREFETCH_B=0|conv|all  GEMMs whose B panels come from memory (weights prepacked at build:\n"
    "                           a transformer's projections, a swapped conv layer) prefetch the next panel\n"
    "                           in the micro-kernel, plain matmuls spread over all its lines: 0 never, conv\n"
    "                           convolutions only (the old default), all plain matmuls as one burst of one\n"
    "                           line a depth (the old opt-in) (A/B runs)\n"
    "  LATHE_DEPTHWISE=0        depthwise convolutions take the generic reduction, not the direct nest\n"
    "  LATHE_DEPTHWISE_WIDE_ROWS=0  the direct nest stores each output row (and copies each strided\n"
    "                           input row) exactly, not as whole vectors where a row is no multiple of\n"
    "                           them (7, 14, 28 wide) (A/B runs)\n"
    "  LATHE_DEPTHWISE_ZERO_ROWS=1  the direct nest zeroes each copied input row whole before the copy,\n"
    "                           not only its padding columns (A/B runs)\n"
    "  LATHE_DEPTHWISE_BAND_FLOATS=N  the direct nest's band copy holds at most N floats (default 6144\n"
    "                           for one plane, 16384 for a multi-channel stem) (A/B runs)\n"
    "  LATHE_DEPTHWISE_NARROW=0  the direct nest runs rows of at most 8 outputs (7 x 7 maps) on the\n"
    "                           host's 16-lane vectors (AVX-512), not on 8-lane ones (A/B runs)\n"
    "  LATHE_DEPTHWISE_ROW_SPLIT=1  the threads split a depthwise layer over its row bands, as the 1x1\n"
    "                           convolutions around it split over positions, not over its channels (A/B runs)\n"
    "  LATHE_POOL_THREADS=N     llvm: the thread pool of parallel loops has N threads (the caller among\n"
    "                           them; default one per core); 1 gives per-kernel A/B times on a shared\n"
    "                           machine that a descheduled partner thread does not blur (the loops are\n"
    "                           still split for the host's cores)\n"
    "  LATHE_POOL_STATS=1       llvm: at exit, a per-kernel table of the thread pool's loops (stderr, or the\n"
    "                           file LATHE_POOL_STATS_FILE names): wall time, serial part, jobs, each thread's\n"
    "                           busy time, idle at the join, a worker's time to reach a loop, and load-\n"
    "                           independent figures: the chunks' CPU time and their span on dedicated cores\n"
    "                           (what the cut into jobs loses); the run's idle share in a last line\n"
    "  LATHE_MATMUL_F32_SPLIT_N=1, LATHE_MATMUL_JOBS=J  (experiments, off) f32 matmuls whose A is packed\n"
    "                           at build split N, not M, and into at least J jobs a thread\n"
    "  LATHE_MATMUL_M_JOBS=J    (experiment, off) f32 matmuls whose B (the weights) is packed at build:\n"
    "                           M split further where there are fewer than J jobs a thread\n"
    "  LATHE_RNN=unrolled       ONNX LSTM / GRU / RNN import as the unrolled step-by-step graph, not one\n"
    "                           Extern rnn kernel per direction that loops over the steps (A/B comparisons)\n"
    "  LATHE_RNN_AVX512=0       the rnn kernel's CPU arithmetic (projections, h·R, activations) in AVX2, not\n"
    "                           AVX-512 (which it takes when the CPU has avx512f) (A/B comparisons)\n"
    "  LATHE_RNN_THREADS=N|auto  the rnn kernel's threads: N fixed (1: one), unset or auto: one thread or the\n"
    "                           hidden units split between threads or (projections inside the kernel) the\n"
    "                           steps on one thread with the projections ahead on others, whichever has\n"
    "                           timed fastest lately\n"
    "  LATHE_RNN_PROBE=0        the rnn kernel's chooser (LATHE_RNN_THREADS auto) retries a way not chosen\n"
    "                           only every 16th call, not every 4th while its last time beats the chosen\n"
    "                           way's median (A/B comparisons)\n"    "  LATHE_LLVM_LSR=0, LATHE_LLVM_OPT=1|2|3  llvm: no Loop Strength Reduction in the code generator,\n"
    "                           the optimizer's level (default 3) (A/B comparisons of compile and run time)\n"
    "  LATHE_LLVM_NOALIAS=0     llvm: no scoped no-alias metadata on the buffers' loads and stores (A/B\n"
    "                           runs; with it LLVM's vectorizer needs no runtime overlap checks, which sent\n"
    "                           kernels running in place of their input to the scalar loop)\n"
    "  LATHE_LLVM_PIPELINE=TEXT, LATHE_LLVM_CODEGEN=0..3, LATHE_LLVM_ARGS=\"-time-passes\"  llvm: a pass\n"
    "                           pipeline in opt's syntax, the code generator's level, LLVM's own options\n"
    "  LATHE_TIER=0|all         llvm: `lathe run` starts tiered by default: on a kernel-cache miss, codes\n"
    "                           whose slower quick code (~6x less LLVM CPU, kernels 2-7x slower) costs the\n"
    "                           first run less than the compile it saves start quick, the rest (large GEMMs)\n"
    "                           are optimized at once; the quick ones' optimized code compiles after the first\n"
    "                           run (a one-shot run: in a detached child process, so the run exits at its\n"
    "                           first result) and reaches the cache, so the next start loads optimized\n"
    "                           code. 0: no tier (everything optimized before the first run, the\n"
    "                           shortest process); all: every code starts quick\n"
    "  LATHE_TIER_UP=0          llvm: a one-shot `lathe run` (no --iters, no profiling) skips that optimized\n"
    "                           compile: it exits at its first result, its quick code stays in the cache and\n"
    "                           the next start runs it (slower warm starts; off by default)\n"
    "  LATHE_TIER_DETACH=0      llvm: a one-shot `lathe run` compiles that optimized code itself and exits\n"
    "                           after it (by default a detached child compiles it, holding a lock beside the\n"
    "                           cache entry; nothing detaches without the kernel cache)\n"
    "  LATHE_TIER_WAIT_MS=N     llvm: a start that misses the optimized entry while a detached child writes\n"
    "                           it waits up to N ms (1000) for it, then starts on the quick code\n"
    "  LATHE_PACK_BACKGROUND=1  `lathe run`: large float weights' packed copies filled on a thread of their\n"
    "                           own while the build goes on and the backend compiles (the first run waits\n"
    "                           for them); off by default (no gain measured on a loaded 2-core host)\n"
    "  LATHE_LLVM_TIMING=1|each llvm: each compiled module's emit/opt/codegen CPU ms on stderr (each:\n"
    "                           every kernel in its own module, on one thread)\n"
    "  LATHE_LLVM_SHAPE_PARAMS=class|hoist|1|all|0  llvm: kernels equal up to shape constants compile\n"
    "                           as one code that reads them at run time (class, the default: innermost\n"
    "                           loops and short vector loops keep theirs; hoist: class, but values an\n"
    "                           innermost loop does not change, a GEMM's K block, are free too; 1: serial\n"
    "                           trip counts under 32 stay constants; all: every literal free; 0: off)\n"
    "                           (lathe run --stats: codes)\n"
    "  LATHE_NVRTC=PATH         cuda: the NVRTC library to load (dlopen'ed on first use, never linked)\n"
    "  LATHE_MAX_INSTRUCTIONS, LATHE_MAX_MEMORY_MB   limits of the Lua sandbox\n"
    "  LATHE_NO_PROGRESS, NO_COLOR                   plain terminal output\n"
    "  LATHE_GUI_FULL_REDRAW=1  the app draws its whole window every frame (not only the graph panel\n"
    "                           while it alone changes)\n"
    "  LATHE_CUDA_ARCH          NVRTC target when no GPU is present (default sm_90)\n"
    "  LATHE_CUDA_INCLUDE       CUDA headers for NVRTC (default: the toolkit lathe was built with)\n"
    "  LATHE_CUDA_DRIVER        driver library to load instead of libcuda.so.1 (tests: a fake driver)\n"
    "  LATHE_CUDA_DEBUG=1       trace every transfer and launch; synchronize after each kernel\n"
    "  LATHE_CUDA_TILED=0       render contractions as plain per-thread reductions (A/B comparisons)\n"
    "  LATHE_CUDA_SPLIT_K=0     never split K of a tiled contraction over blocks\n"
    "  LATHE_CUDA_TILE=8x4      force the tiled contractions' register tile per thread (4x4, 4x8, 8x4, 8x8)\n"
    "  LATHE_CUDA_ROW_CACHE=0   block-per-row kernels re-read rows from global memory\n"
    "  LATHE_CUDA_FLASH=0       the fused attention and its backward one row per thread (default: shared-memory tiles)\n"
    "  LATHE_TEST_BACKEND       the backend the differential tests run on (c, llvm, cuda)\n";

int run_help(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "environment" || args[0] == "env")) {
    std::cout << kEnvironment;
    return 0;
  }
  if (!args.empty()) {
    if (const Command* c = find_command(args[0])) {
      std::vector<std::string> h{"--help"};
      return c->run(h);
    }
    int rc = lua_help(args[0]);
    if (rc >= 0) return rc;
    std::cerr << "lathe help: no topic '" << args[0] << "'\n";
    return 1;
  }
  std::cout << "lathe — a deep-learning compiler you can watch and steer\n\n"
               "usage: lathe COMMAND [ARGS…]   |   lathe SCRIPT.lua [ARGS…]   |   lathe [FILE]\n\n"
               "FILE is a .lua script returning a graph, a .lathe text IR file or an .onnx model.\n\n"
               "commands:\n";
  size_t w = 0;
  for (auto& c : commands()) w = std::max(w, std::string(c.name).size());
  for (auto& c : commands()) {
    std::string n = c.name;
    std::cout << "  " << n << std::string(w - n.size() + 2, ' ') << c.summary << "\n";
  }
  std::cout << "\n`lathe help COMMAND` or `lathe COMMAND --help` for details; `lathe help lua` lists the\n"
               "Lua API, `lathe help NAME` documents one function as listed there (matmul, lathe.randn, s:step,\n"
               "k:split, gui.compile), `lathe help patterns` the rule pattern syntax, `lathe help environment`\n"
               "the environment variables.\n";
  return 0;
}

LATHE_COMMAND("help", "this help; `lathe help COMMAND`, `lathe help lua`, `lathe help FUNCTION`", run_help);

}  // namespace
}  // namespace lathe::app
