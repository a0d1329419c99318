// qdq_rules.h — the `qdq` rule set: QDQ models (DequantizeLinear → MatMul/Gemm/Conv →
// QuantizeLinear) turned into int8 contractions with a requantizing epilogue, by rewriting.
//
// The ONNX importer lowers QuantizeLinear / DequantizeLinear as plain ops (lower_quant.cpp):
//   DQ(x) = f32(i32(x) − zp) · s          Q(y) = sat(round(f64(y) · (1/s_y)) + zp)
// (Q's rounding and zero point in f32, its saturation the cast's)
// and the contractions over DQ outputs as float ones. Four rules (C++ callbacks) fuse them:
//   qdq-contraction  Reduce{add}(Mul(view(DQ(a)), view(DQ(w))))  [a: one scale and zero point;
//                    w: zero point 0, one scale or one per output channel]
//                    → f32(Σ a·w − zp_a·Σ w) · (s_a·s_w), the sum in i32 over the 8-bit
//                    operands (the int8 GEMM); padded reads of a read zp_a.
//   qdq-bias         view(f32(acc) · S) + view(DQ(b)), b int32 with scale S (per channel,
//                    within 1e-6) → f32(acc + b) · S
//   qdq-requant      f32(f64(f32(acc) · S) · r) (the division by s_y, r = 1/s_y), also
//                    through a Relu → f32(acc) · f32(S·r): one f32 multiplier, as ONNX
//                    Runtime's QLinearConv / QLinearMatMul requantize.
//   qdq-maxpool      Q(Reduce{max}(view(DQ(x)))) (a MaxPool, its padding −inf), DQ and Q with
//                    one positive scale and zero point → Reduce{max}(view(x)) on the 8-bit
//                    integers (padding the type's lowest value): exact, a monotone dequantize.
// The interpreter runs both forms; they differ by float rounding only (a requantized value
// can move by one step where the product lands on .5).
#pragma once
#include <map>
#include <string>

#include "core/ir/graph.h"
#include "core/rewrite/rule.h"

namespace lathe {

Ruleset qdq_rules();

// `qdq-sat16`: the int8 sums of u8 × i8 as ONNX Runtime computes them on x86 without VNNI
// (MLAS's AVX2 / AVX-512BW U8S8 kernels, vpmaddubsw): each pair of neighbouring k summed in an
// i16 that saturates, Σ_j sat16(a_2j·w_2j + a_2j+1·w_2j+1). ORT documents the saturation (its
// quantization guide, "reduce_range"); its results on such a machine differ from exact sums by
// far more than float rounding (bert_base QDQ here: max|d|/max|ref| 0.15 / 0.49 between ORT's
// fused and op-by-op runs; Lathe's exact sums match the op-by-op run, scripts/qdq-truth.py).
// MatMul / Gemm (one reduced axis, k in order, an odd last k alone) and Conv whose input
// channels per group are even (ORT sums a conv's k as (kh, kw, ci) with ci innermost, pairs of
// neighbouring channels of one tap; an odd channel count pairs across taps, which stays exact:
// scripts/qdq-ort-order.py). The graph states the saturating sums, which the interpreter and
// every backend compute (the int8 GEMM: dot4sat16).
Ruleset qdq_sat16_rules();
// Whether ONNX Runtime's int8 kernels on this host saturate u8 × i8 pair sums: x86 with AVX2
// and without AVX-512 VNNI / AVX-VNNI (whose vpdpbusd sums exactly; SSE-only and non-x86 MLAS
// kernels widen to i16 and sum exactly too).
bool host_int8_pairs_saturate();
// Test hook: 1 / 0 forces host_int8_pairs_saturate(), -1 gives the host's answer back.
void force_host_int8_pairs_saturate(int v);
// Whether loading a QDQ model applies qdq-sat16 by default: LATHE_QDQ_SAT16=1 / 0 if set,
// else host_int8_pairs_saturate() (the outputs then agree with ONNX Runtime's on this host).
bool qdq_sat16_default();

// g with the qdq rules applied to a fixpoint (bottom-up sweeps); per-rule counts in *fired;
// sat16: then one sweep of qdq-sat16.
Graph apply_qdq_rules(const Graph& g, std::map<std::string, int>* fired = nullptr, bool sat16 = false);

}  // namespace lathe
