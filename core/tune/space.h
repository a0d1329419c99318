// space.h — what `lathe tune` searches: per kernel kind, a space of schedules written in
// Lathe's own primitives (transform.h, row_reduce.h, the packed GEMM's block sizes), so
// that every point of it is a schedule log a user can read, replay and edit.
//
// A schedule is a list of lines, the same text the primitives log (LoopFunc::schedule_log):
//     reduce_rows i1 by 256
//     fuse i0 i1 -> i0_i1
//     split i0 by 16 -> i0_o, i0_i
//     tile i0 i1 by 32x32
//     reorder a b | vectorize i1 | unroll i1 by 4 | parallel i0 | cache in0 at i0 -> …
// replayed on the kernel's plain lowering (lower_kernel(kg, i, plain = true)). A matmul's
// packed GEMM nest starts with one more line, the lowering's parameters:
//     matmul mr=6 nr=16 lanes=8 kc=256 mc=144 nc=512 [bplace=1]
// (bplace=1: B read where it lies, not packed, where its columns are contiguous; 0: packed;
// absent: the heuristic's choice). A reduction may be split across threads first:
//     split_k r0 by 2      (per-thread partial results plus a combine, core/loop/split_k.h)
// and a depthwise or stem convolution's direct nest (lower_depthwise.h) is one line, its
// output channels and rows per pass (0: the heuristic's) and the vector width it was built
// for (the Space's lanes, as the matmul line's), with nothing after it:
//     direct ocb=5 rows=2 lanes=8    (a depthwise one may add acc=1: register accumulators)
// (a line without lanes= replays at the host's width)
// A Point picks one value per knob of a Space; build() applies its primitives in a fixed
// order, skipping those a kernel refuses (the log shows only what was applied).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/lower.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::tune {

// The kernel `kernel` of kg scheduled by `schedule` (see above). Throws UserError naming
// the line at fault ("schedule line 2 'parallel r0': parallel r0: axis r0 carries …").
loop::LoopFunc replay(const KernelGraph& kg, int kernel, const std::vector<std::string>& schedule);
// Applies one primitive line to f (not the "matmul …" line).
void apply_line(loop::LoopFunc& f, const std::string& line);
// "matmul mr=… nr=… lanes=… kc=… mc=… nc=…" <-> params
std::string matmul_line(const loop::MatmulParams& p);
bool parse_matmul_line(const std::string& line, loop::MatmulParams& p);
// "direct ocb=… rows=… [acc=1] lanes=…" <-> the direct convolution nest's parameters
// (lower_depthwise.h): a depthwise or stem convolution's output channels and rows per pass
// (0: the heuristic's) and its vector width (a nest built for 8 lanes replays to 8-lane code
// on an AVX-512 host too: the code the search measured). *lanes: the line's, or left as is.
std::string direct_line(const loop::DirectParams& p, int lanes);
bool parse_direct_line(const std::string& line, loop::DirectParams& p, int* lanes = nullptr);

struct Knob {
  std::string name;            // "rows", "parallel", "mr", …
  std::vector<int64_t> values;  // values[0] is the knob's "off" / first choice
};

struct Space {
  std::string kind;             // the kernel's kind ("matmul" spaces have a "mode" knob)
  std::vector<Knob> knobs;
  int lanes = 8;                // the machine's f32 SIMD lanes (a matmul's NR is a multiple)
  int threads = 1;              // the cores a parallel loop spreads over (the rows knob's shares)
  size_t size() const;          // number of points (product of the knobs' choices)
  int knob(const std::string& name) const;  // index, -1 when absent
};
using Point = std::vector<int>;  // one index into each knob's values

struct Machine {
  int threads = 1;   // cores the parallel loops spread over
  int lanes = 8;     // f32 SIMD lanes (8: AVX/AVX2, 16: AVX-512)
  int vregs = 16;    // SIMD registers (16: AVX2, 32: AVX-512)
};
Machine host_machine();

Space make_space(const KernelGraph& kg, int kernel, const Machine& m);

// The "rows" knob's values besides a block size (> 0) and 0 (no reduction rows): blocks
// sized from the row loop's extent E when the point is built (the log shows the number):
// kRowsPerCore: a multiple of `threads` blocks of up to 32768 (the heuristic's rule for an
// outermost row loop over 2048, loop::row_block), kRowsPerHalfCore: twice as many,
// kRowsWhole: E (one block).
inline constexpr int64_t kRowsPerCore = -1, kRowsPerHalfCore = -2, kRowsWhole = -3;
// The block a rows value gives a row loop of extent E (-1: unknown, then 0 for the codes).
int64_t rows_block(int64_t value, int64_t extent, int threads, int lanes);

struct Built {
  std::vector<std::string> schedule;  // the lines that were applied (replay() reproduces f)
  loop::LoopFunc f;
};
// The point's schedule applied to the kernel's plain lowering (or the packed GEMM).
Built build(const KernelGraph& kg, int kernel, const Space& s, const Point& p);

// The loop IR text without the function's name: equal exactly when the code is.
std::string code_key(const loop::LoopFunc& f);

}  // namespace lathe::tune
