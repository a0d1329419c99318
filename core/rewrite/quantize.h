// quantize.h — the quantize pass: MatMul/Gemm-like contractions with a constant f32
// weight are rewritten to read an 8-bit (or 4-bit-valued) copy of that weight.
//
// A contraction is a Reduce add (f32) over one axis of Mul(P, W) where W is a chain of
// Views of a constant 2-D f32 tensor literal (what matmul/linear build). Everything else
// stays float. Modes:
//   weight-int8  W is stored as i8 with one f32 scale per output channel (--per-channel)
//                or per tensor; the i8 weight is dequantized (Cast · scale) at run time,
//                the contraction runs in f32.
//   dynamic      W as above; the activation P's source is quantized per row (symmetric
//                i8, scale max|row|/127) at run time, the product is the i8 × i8 → i32
//                contraction (the int8 GEMM), rescaled by s_row · s_w. The activations are
//                stored + 128 as u8 (the + 128 taken back out as −128 · Σ_k w per channel);
//                without VNNI, an even K whose channels are the GEMM's vector side takes
//                7-bit weights and the form of qdq-sat16's pairs (vpmaddubsw, no saturation).
//   weight-int4  W in blocks of `block` weights along K (q4_0 style): values in [-8, 7],
//                one f32 scale per block (the extreme value / -8, as q4_0). A plain X · W
//                (batch dims constant, at most 16 rows, even block) stores them packed two a byte and runs
//                the Extern "gemv_q4" kernel, dequantizing in the kernel; any other
//                contraction keeps them one per byte (i8), dequantized at run time.
// Bad options and weights that cannot be quantized as asked throw UserError naming the
// option or the node.
#pragma once
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/rewrite/numeric_check.h"

namespace lathe {

enum class QuantMode { WeightInt8, Dynamic, WeightInt4 };

struct QuantizeOptions {
  QuantMode mode = QuantMode::Dynamic;
  bool per_channel = true;  // int8 modes: one scale per output channel (else per tensor)
  int64_t block = 32;       // int4: weights per block along K
  int64_t min_elements = 0; // leave weights smaller than this float
};

// "dynamic" | "weight-int8" | "weight-int4"; UserError naming the option otherwise.
QuantMode parse_quant_mode(const std::string& s);
const char* quant_mode_name(QuantMode m);

struct QuantizeResult {
  Graph graph;
  int quantized = 0;        // contractions rewritten
  int skipped = 0;          // contractions with constant weights left float (shape not handled)
  int64_t weight_bytes_before = 0, weight_bytes_after = 0;  // of the rewritten weights
  std::vector<std::string> notes;  // one line per contraction: "%12 [768, 2304] per-channel"
};

QuantizeResult quantize_graph(const Graph& g, const QuantizeOptions& opts);

// The error the quantization introduced, per output, on seeded inputs.
struct QuantError {
  std::string output;
  double rel_max = 0;  // max|q - f| / max|f|
  double cosine = 1;
};
std::vector<QuantError> quantization_error(const Graph& before, const Graph& after, uint64_t seed = 0,
                                           Evaluator eval = {});

}  // namespace lathe
