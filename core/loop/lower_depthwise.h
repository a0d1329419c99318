// lower_depthwise.h — the direct convolution lowering for depthwise convolutions.
//
// A depthwise (per-channel) convolution is a reduction with no channel contraction: every
// output plane reads one input plane and its own KH × KW taps, so it is no GEMM (there is no
// N side for match_matmul) and the generic reduce lowering computes it one element at a time
// through masked window loads. lower_depthwise_kernel() recognises the reduction (a Reduce add
// over Mul(X window, W taps), each read through Views of a buffer, with the kernel root an
// elementwise epilogue of it: bias, BatchNorm, ReLU6) and lowers it as:
//
//   parallel for t in [planes × row bands]:
//     fill a local copy of the band's input rows, zero-padded, and split by the W stride
//       into s phases (pb[row][phase][q] = x[row, q·s + phase]): every tap then reads a
//       contiguous run, with no bounds checks (the padding is the zeros of the copy)
//     for each output row: for each vector of L outputs along W:
//       acc = Σ_taps broadcast(w[tap]) · pb[tap row][tap phase][v·L + tap offset : L]
//     then the epilogue over the row, stored to the output
//
// Stride, dilation and padding come from the operands' affine addresses and range
// conditions (operand_access), not from the importer, so any graph with that shape of
// reduction (the ONNX Conv with group = channels, the frontend's conv) takes this path.
// Several output channels per input plane (an output dim X does not read: a stem convolution
// with 3 input channels, or a grouped convolution with several outputs per group) are
// computed OCB at a time from the same band copy: per tap one load of each output row's
// vector and one broadcast weight per channel into RP x OCB register accumulators (8 x 2 with
// 16 lanes), the pass looping over input channels and tap rows with the row's taps unrolled
// (unrolling every tap, LLVM hoisted the weight broadcasts out of the row loops and spilled
// them). A matmul kernel takes this path only for a small 2-D window over few input channels
// (at most 160 taps over up to 4 channels: ResNet's 7x7 x 3 stem; 64 taps over up to 8),
// where packing taps x positions for a GEMM costs more than the taps (LATHE_STEM_DIRECT=0:
// the nest before the tap loop, a matmul kernel up to 64 taps, for A/B runs).
// Anything else (symbolic spatial sizes, too many taps, a channel contraction, bounds
// that are not per-row / per-column) returns nullopt and the generic lowering runs, as it
// does for every kernel under LATHE_DEPTHWISE=0 (A/B comparisons).
#pragma once
#include <optional>

#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"

namespace lathe::loop {

// The nest's parameters (0: the heuristic's choice). `ocb`: output channels per pass when
// several outputs read each input plane (the default weighs FMA latency against the channels
// a last pass redoes: up to 4 with 8 lanes, 16 vector registers; up to 8 with 16, 6 without the tap loop); `rows`: output rows per pass (default 2); `force`: also under
// LATHE_DEPTHWISE=0 (a tuning record that names the nest). `acc` (a depthwise convolution,
// one output per plane; tuning only): the pass keeps its rows' sums in register accumulators
// and reads each tap's weight as it uses it (as the stem's nest does), instead of one sum
// expression per output vector over the plane's taps held as values: a 5x5 window's 25
// weights do not fit AVX2's 16 registers, and LLVM spilled weights and input vectors.
struct DirectParams {
  int ocb = 0, rows = 0;
  bool force = false;
  bool acc = false;
};
// `lanes`: the vector width of the output rows (8 on AVX2).
std::optional<LoopFunc> lower_depthwise_kernel(const KernelGraph& kg, int kernel, int lanes = 8, const DirectParams& dp = {});
// Would lower_depthwise_kernel take kernel (a matmul kernel that does is not packed)?
// `candidate`: could a tuning candidate (DirectParams::force) take it (a matmul kernel: up
// to 160 taps, where the heuristic keeps those over 64 a GEMM)?
bool takes_direct_conv(const KernelGraph& kg, int kernel, int lanes = 8, bool candidate = false);
// Is f the direct nest of lower_depthwise_kernel (its first schedule log line: `depthwise: …`
// or, several output channels per input plane, `direct conv: …`)?
bool is_depthwise(const LoopFunc& f);

}  // namespace lathe::loop
