// kernel_param.h — kernels equal but for their shape constants, compiled as one code.
//
// A network's convolution, pooling and element-wise kernels repeat with other spatial sizes
// and channel counts (MobileNetV2's thirteen depthwise layers, U-Net's encoder and decoder
// levels): the same loops, the same schedule, only extents and strides differ. Such kernels
// are one code with those integers read at run time. plan_shape_params groups kernels whose
// loop IR is equal up to integer literals in free positions, and for each group of two or
// more builds one generic LoopFunc: every literal that differs between the members becomes
// a run-time value, appended to the function's dims (LoopFunc::dims, named "sp$K"), and
// each member gets the values it needs. Literals that all members share stay constants.
//
// What stays compile-time (part of the grouping key, so kernels that differ there stay
// apart): everything but integer index literals (float constants, dtypes, vector lanes, the
// loop annotations, local array sizes, buffer kinds), the divisor of an integer division
// or remainder (a division by a run-time value is a hardware divide; by a constant, a
// multiply), and the extent of a loop annotated to unroll (the micro-kernel's register
// tile), and a serial loop's trip count under 32 (a short loop whose trip count is known
// only at run time vectorizes worse: MobileNetV2's 7x7 and 14x14 depthwise layers ran
// 1.4-1.8x slower in one code with the 112x112 layer), or, with size classes (the default in
// the llvm backend), a serial loop's trip count's size class. Equal codes (kernel_dedup.h) should be merged first: funcs are distinct codes.
//
// The generic function computes exactly what each member computes: the members' IR are the
// same tree with the same literals in every place but the parameters, so substituting a
// member's values gives back that member.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/loop/loop_ir.h"

namespace lathe {

struct ShapeParamPlan {
  std::vector<loop::LoopFunc> codes;             // what is compiled (a member's own IR when alone)
  std::vector<int> code;                         // per func: its index in codes
  std::vector<std::vector<int64_t>> values;      // per func: the values of codes[code[i]]'s extra dims
  // the extra dims start after this many (the funcs' own dims: the program's symbols)
  std::vector<size_t> first_param;               // per code
  // per code, per extra dim: the smallest and largest value among its members (bounds the
  // optimizer may rely on: the llvm backend puts them on the loads as !range)
  std::vector<std::vector<std::pair<int64_t, int64_t>>> bounds;
  size_t grouped() const;                        // funcs that share a code with another
};

// min_group: groups smaller than this stay separate codes. min_trip: a serial loop's literal
// trip count below it stays a constant (INT64_MIN: every trip count is free;
// kShapeParamClasses: every trip count is free but only kernels whose serial loops' literal
// trip counts fall in the same size classes share a code: counts under 8 equal, longer ones
// in the same power-of-two bucket and alike in being a multiple of 8).
constexpr int64_t kShapeParamClasses = INT64_MIN + 1;
// kShapeParamHoist: size classes, and inside an innermost loop a literal is free when it is an
// operand of an expression that loop does not change (hoisted out of it: a GEMM micro-kernel's
// `ir*KC`), and a divisor is free outside innermost loops. Shares more (unet_small 35 -> 27
// codes, mobilenet_v2 31 -> 28, resnet50 32 -> 30) but is not the default: not measured to
// run as fast (the llvm backend's LATHE_LLVM_SHAPE_PARAMS=hoist).
constexpr int64_t kShapeParamHoist = INT64_MIN + 2;
ShapeParamPlan plan_shape_params(const std::vector<const loop::LoopFunc*>& funcs, size_t min_group = 2,
                                 int64_t min_trip = 32);

// The grouping key alone (a diagnostic and for tests): equal for kernels plan_shape_params
// would put in one group.
std::string shape_param_key(const loop::LoopFunc& f, int64_t min_trip = 32);

}  // namespace lathe
