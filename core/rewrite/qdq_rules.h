// qdq_rules.h — the `qdq` rule set: QDQ models (DequantizeLinear → MatMul/Gemm/Conv →
// QuantizeLinear) turned into int8 contractions with a requantizing epilogue, by rewriting.
//
// The ONNX importer lowers QuantizeLinear / DequantizeLinear as plain ops (lower_quant.cpp):
//   DQ(x) = f32(i32(x) − zp) · s          Q(y) = sat(round(f64(y) · (1/s_y)) + zp)
// and the contractions over DQ outputs as float ones. Three rules (C++ callbacks) fuse them:
//   qdq-contraction  Reduce{add}(Mul(view(DQ(a)), view(DQ(w))))  [a: one scale and zero point;
//                    w: zero point 0, one scale or one per output channel]
//                    → f32(Σ a·w − zp_a·Σ w) · (s_a·s_w), the sum in i32 over the 8-bit
//                    operands (the int8 GEMM); padded reads of a read zp_a.
//   qdq-bias         view(f32(acc) · S) + view(DQ(b)), b int32 with scale S (per channel,
//                    within 1e-6) → f32(acc + b) · S
//   qdq-requant      f32(f64(f32(acc) · S) · r) (the division by s_y, r = 1/s_y), also
//                    through a Relu → f32(acc) · f32(S·r): one f32 multiplier, as ONNX
//                    Runtime's QLinearConv / QLinearMatMul requantize.
// The interpreter runs both forms; they differ by float rounding only (a requantized value
// can move by one step where the product lands on .5).
#pragma once
#include <map>
#include <string>

#include "core/ir/graph.h"
#include "core/rewrite/rule.h"

namespace lathe {

Ruleset qdq_rules();

// g with the qdq rules applied to a fixpoint (bottom-up sweeps); per-rule counts in *fired.
Graph apply_qdq_rules(const Graph& g, std::map<std::string, int>* fired = nullptr);

}  // namespace lathe
