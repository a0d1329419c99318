// emit_math.h — math the llvm backend emits inline (emit_expr.cpp): 2^x and log2(x) for f32 as
// polynomials (scalar or vector; no libm calls in a kernel), and f32 registers rounded to the
// precision of f16 / bf16. Each emits at b's insertion point and returns the value.
#pragma once
#include <llvm/IR/IRBuilder.h>

#include "core/ir/dtype.h"

namespace lathe::llvmjit {

// Rounds an f32 value to bf16 precision (nearest even), staying in f32. NaN stays NaN.
llvm::Value* round_bf16(llvm::IRBuilder<>& b, llvm::Value* x);
// Rounds an f32 register value to the precision of a half type (f16/bf16), staying f32;
// other dtypes: x unchanged.
llvm::Value* round_half(llvm::IRBuilder<>& b, DType dt, llvm::Value* x);
// 2^x for f32, max rel. error ~1.1e-7 (+ rounding); 0 / inf outside [-150, 128]; NaN
// propagates. LATHE_EXP2_FAST=0: the previous form (fast_exp2()).
llvm::Value* exp2_f32(llvm::IRBuilder<>& b, llvm::Value* x);
bool fast_exp2();
// log2(x) for f32: 0 -> -inf, < 0 / NaN -> NaN, inf -> inf; subnormals handled.
llvm::Value* log2_f32(llvm::IRBuilder<>& b, llvm::Value* x);

namespace detail {
const char* emit_math_stamp();  // __DATE__ " " __TIME__ of emit_math.cpp (emitter_build_id)
}

}  // namespace lathe::llvmjit
