// render_expr.cpp — CUDA C types, literals, expressions and the prelude (see emitter.h).
#include <cmath>
#include <cstdio>

#include "backends/cuda/emitter.h"
#include "core/ir/diag.h"

namespace lathe::cuda {

using loop::ExprKind;
using loop::ExprRef;

namespace {

const char* kPrelude = R"CU(#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define LATHE_DEV __device__ __forceinline__
#define LATHE_NAN_F __int_as_float(0x7fc00000)
#define LATHE_INF_F __int_as_float(0x7f800000)
#define LATHE_NAN_D __longlong_as_double(0x7ff8000000000000LL)
#define LATHE_INF_D __longlong_as_double(0x7ff0000000000000LL)

/* f16/bf16 values are computed in float and rounded to the storage type after every op,
   as the interpreter does. */
LATHE_DEV float lathe_rh(float x) { return __half2float(__float2half_rn(x)); }
LATHE_DEV float lathe_rb(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/* Max propagates NaN (either operand). */
LATHE_DEV float lathe_maxf(float a, float b) { return (a != a || b != b) ? LATHE_NAN_F : (b > a ? b : a); }
LATHE_DEV double lathe_maxd(double a, double b) { return (a != a || b != b) ? LATHE_NAN_D : (b > a ? b : a); }

/* float -> int casts truncate toward zero and saturate; NaN -> 0. */
#define LATHE_F2I(T, NAME, LO, HI)               \
  LATHE_DEV T NAME(double x) {                   \
    if (x != x) return 0;                        \
    if (x <= (double)(LO)) return (T)(LO);       \
    if (x >= (double)(HI)) return (T)(HI);       \
    return (T)x;                                 \
  }
LATHE_F2I(unsigned char, lathe_f2i_u8, 0, 255)
LATHE_F2I(signed char, lathe_f2i_i8, -128, 127)
LATHE_F2I(short, lathe_f2i_i16, -32768, 32767)
LATHE_F2I(int, lathe_f2i_i32, (-2147483647 - 1), 2147483647)
LATHE_F2I(long long, lathe_f2i_i64, (-9223372036854775807LL - 1), 9223372036854775807LL)
LATHE_F2I(unsigned short, lathe_f2i_u16, 0, 65535)
LATHE_F2I(unsigned int, lathe_f2i_u32, 0, 4294967295u)
LATHE_F2I(unsigned long long, lathe_f2i_u64, 0, 18446744073709551615ULL)

/* integer x/0 = 0, x%0 = 0; MIN/-1 wraps to MIN, x%-1 = 0. */
#define LATHE_IDIV(T, NAME, MOD)                                                                  \
  LATHE_DEV T NAME(T a, T b) {                                                                    \
    return b == 0 ? (T)0 : (b == (T)-1 ? (T)(0ULL - (unsigned long long)a) : (T)(a / b));         \
  }                                                                                               \
  LATHE_DEV T MOD(T a, T b) { return (b == 0 || b == (T)-1) ? (T)0 : (T)(a % b); }
LATHE_IDIV(signed char, lathe_idiv_i8, lathe_mod_i8)
LATHE_IDIV(short, lathe_idiv_i16, lathe_mod_i16)
LATHE_IDIV(int, lathe_idiv_i32, lathe_mod_i32)
LATHE_IDIV(long long, lathe_idiv_i64, lathe_mod_i64)
LATHE_DEV unsigned char lathe_idiv_u8(unsigned char a, unsigned char b) { return b == 0 ? 0 : a / b; }
LATHE_DEV unsigned char lathe_mod_u8(unsigned char a, unsigned char b) { return b == 0 ? 0 : a % b; }
#define LATHE_UDIV(T, NAME, MOD)                                 \
  LATHE_DEV T NAME(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); } \
  LATHE_DEV T MOD(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
LATHE_UDIV(unsigned short, lathe_idiv_u16, lathe_mod_u16)
LATHE_UDIV(unsigned int, lathe_idiv_u32, lathe_mod_u32)
LATHE_UDIV(unsigned long long, lathe_idiv_u64, lathe_mod_u64)
LATHE_DEV unsigned char lathe_idiv_bool(unsigned char a, unsigned char b) { return b ? a : 0; }
LATHE_DEV unsigned char lathe_mod_bool(unsigned char a, unsigned char b) { return 0; }

/* Block-wide reduction: warp shuffles, then one partial per warp through shared memory.
   Every thread of the block gets the result. `smem` holds 32 values. */
template <class T>
LATHE_DEV T lathe_shfl_xor(T v, int lane_mask) {
  if constexpr (sizeof(T) < 4) return (T)__shfl_xor_sync(0xffffffffu, (int)v, lane_mask);
  else return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <class T, class F>
LATHE_DEV T lathe_block_reduce(T v, T* smem, F combine) {
  for (int o = 16; o > 0; o >>= 1) v = combine(v, lathe_shfl_xor(v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  v = smem[0];
  for (int w = 1; w < (int)((blockDim.x + 31) >> 5); ++w) v = combine(v, smem[w]);
  return v;
}
)CU";

std::string dname(DType dt) { return std::string(dtype_name(dt)); }
bool is_half(DType dt) { return dt == DType::F16 || dt == DType::BF16; }

}  // namespace

std::string cuda_prelude() { return kPrelude; }

std::string cuda_dtype_unsupported(DType) { return ""; }

std::string CudaEmitter::storage_type(DType dt) {
  switch (dt) {
    case DType::Bool: case DType::U8: return "unsigned char";
    case DType::I8: return "signed char";
    case DType::I16: return "short";
    case DType::I32: return "int";
    case DType::I64: return "long long";
    case DType::U16: return "unsigned short";
    case DType::U32: return "unsigned int";
    case DType::U64: return "unsigned long long";
    case DType::F16: return "__half";
    case DType::BF16: return "__nv_bfloat16";
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "void";
}

std::string CudaEmitter::compute_type(DType dt) { return is_half(dt) ? "float" : storage_type(dt); }

std::string CudaEmitter::round_to(DType dt, const std::string& x) const {
  if (dt == DType::F16) return "lathe_rh(" + x + ")";
  if (dt == DType::BF16) return "lathe_rb(" + x + ")";
  return x;
}

std::string CudaEmitter::literal(const ExprRef& e) const {
  if (is_float(e->dtype)) {
    bool dbl = e->dtype == DType::F64;
    if (std::isnan(e->f)) return dbl ? "LATHE_NAN_D" : "LATHE_NAN_F";
    if (std::isinf(e->f)) return e->f > 0 ? (dbl ? "LATHE_INF_D" : "LATHE_INF_F") : (dbl ? "(-LATHE_INF_D)" : "(-LATHE_INF_F)");
    double v = dbl ? e->f : static_cast<double>(static_cast<float>(e->f));
    char b[64];
    if (v == std::trunc(v) && std::fabs(v) < 1e15) std::snprintf(b, sizeof b, dbl ? "%.1f" : "%.1ff", v);  // 1.0f, readable
    else std::snprintf(b, sizeof b, dbl ? "%a" : "%af", v);
    return v < 0 ? std::string("(") + b + ")" : std::string(b);
  }
  if (e->dtype == DType::I64) {
    if (e->i == INT64_MIN) return "(-9223372036854775807LL - 1)";
    return e->i < 0 ? "(" + std::to_string(e->i) + "LL)" : std::to_string(e->i) + "LL";
  }
  if (e->dtype == DType::U64) return std::to_string(static_cast<uint64_t>(e->i)) + "ULL";
  if (e->dtype == DType::U32) return std::to_string(static_cast<uint32_t>(e->i)) + "u";
  if (e->dtype == DType::I32) {
    if (e->i == INT32_MIN) return "(-2147483647 - 1)";
    return e->i < 0 ? "(" + std::to_string(e->i) + ")" : std::to_string(e->i);
  }
  return "((" + storage_type(e->dtype) + ")" + std::to_string(e->i) + ")";
}

std::string CudaEmitter::cast_expr(const ExprRef& e) {
  DType to = e->dtype, from = e->args[0]->dtype;
  std::string x = expr(e->args[0]);
  if (to == from) return x;
  if (to == DType::Bool) return "((unsigned char)(" + x + " != 0))";
  if (is_float(from) && !is_float(to)) return "lathe_f2i_" + dname(to) + "((double)" + x + ")";
  if (is_half(to)) {
    if (from == DType::F32 || is_half(from)) return round_to(to, x);  // one rounding from float: exact
    std::string conv = to == DType::F16 ? "__half2float(__double2half((double)" : "__bfloat162float(__double2bfloat16((double)";
    return conv + x + "))";
  }
  return "((" + compute_type(to) + ")" + x + ")";
}

std::string CudaEmitter::binary_expr(const ExprRef& e) {
  std::string x = expr(e->args[0]), y = expr(e->args[1]);
  DType in = e->args[0]->dtype;
  std::string T = compute_type(in);
  bool flt = is_float(in);
  bool dbl = in == DType::F64;
  auto wrap = [&](const char* op) {  // integer add/mul wrap around (no signed overflow UB)
    if (in == DType::I64 || in == DType::I32 || in == DType::U16 || in == DType::U32 || in == DType::U64) {
      std::string U = dtype_size(in) == 8 ? "unsigned long long" : "unsigned";
      if (in == DType::I64 && std::string(op) == "+") return "(" + x + " + " + y + ")";  // index math: keep it readable
      return "((" + T + ")((" + U + ")" + x + " " + op + " (" + U + ")" + y + "))";
    }
    return "((" + T + ")(" + x + " " + op + " " + y + "))";
  };
  switch (e->op) {
    case Op::Add:
      if (flt) return round_to(in, "(" + x + " + " + y + ")");
      if (in == DType::Bool) return "((unsigned char)(" + x + " | " + y + "))";
      return wrap("+");
    case Op::Mul:
      if (flt) return round_to(in, "(" + x + " * " + y + ")");
      if (in == DType::Bool) return "((unsigned char)(" + x + " & " + y + "))";
      if (in == DType::I64 && (loop::is_const(e->args[0]) || loop::is_const(e->args[1]))) return "(" + x + " * " + y + ")";
      return wrap("*");
    case Op::IDiv:
      if (in == DType::I64 && loop::is_const(e->args[1]) && e->args[1]->i > 0) return "(" + x + " / " + y + ")";
      return "lathe_idiv_" + dname(in) + "(" + x + ", " + y + ")";
    case Op::Mod:
      if (flt) return round_to(in, std::string(dbl ? "fmod(" : "fmodf(") + x + ", " + y + ")");
      if (in == DType::I64 && loop::is_const(e->args[1]) && e->args[1]->i > 0) return "(" + x + " % " + y + ")";
      return "lathe_mod_" + dname(in) + "(" + x + ", " + y + ")";
    case Op::Max:
      if (flt) return std::string(dbl ? "lathe_maxd(" : "lathe_maxf(") + x + ", " + y + ")";
      return "(" + y + " > " + x + " ? " + y + " : " + x + ")";
    case Op::And: return "((" + T + ")(" + x + " & " + y + "))";
    case Op::Or: return "((" + T + ")(" + x + " | " + y + "))";
    case Op::Xor: return "((" + T + ")(" + x + " ^ " + y + "))";
    case Op::CmpLT: return "((unsigned char)(" + x + " < " + y + "))";
    case Op::CmpNE: return "((unsigned char)(" + x + " != " + y + "))";
    default: break;
  }
  LATHE_CHECK(false, "cuda renderer: unknown binary op " + std::string(op_name(e->op)));
  return "";
}

std::string CudaEmitter::expr(const ExprRef& e) {
  if (e->lanes > 1)
    throw UserError("cuda renderer: kernel " + f_.name + " uses " + std::to_string(e->lanes) +
                    "-lane vector values, which the CUDA renderer does not support (yet)");
  DType dt = e->dtype;
  bool dbl = dt == DType::F64;
  switch (e->kind) {
    case ExprKind::Const: return literal(e);
    case ExprKind::Var: {
      for (auto& d : f_.dims)
        if (d == e->name) {
          std::string id = "d_";
          for (char c : d) id += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
          return id;
        }
      if (half_accs_.count(e->name) && e->name != raw_acc_) return round_to(dt, e->name);
      return e->name;
    }
    case ExprKind::Load: {
      const auto& p = f_.buffers.at(e->buffer);
      std::string ref = p.name + "[" + expr(e->args[0]) + "]";
      if (auto rc = row_loop_ ? row_cache_.find(e->buffer) : row_cache_.end();
          rc != row_cache_.end() && rc->second.loops.count(row_loop_))
        ref = rc->second.name + "[lathe_j]";  // the thread's element of a row in registers
      if (p.dtype == DType::F16) ref = "__half2float(" + ref + ")";
      if (p.dtype == DType::BF16) ref = "__bfloat162float(" + ref + ")";
      if (e->args.size() > 1 && e->args[1]) return "(" + expr(e->args[1]) + " ? " + ref + " : (" + compute_type(dt) + ")0)";
      return ref;
    }
    case ExprKind::LocalLoad: return e->name + "[" + expr(e->args[0]) + "]";
    case ExprKind::Unary: {
      std::string x = expr(e->args[0]);
      switch (e->op) {
        case Op::Neg:
          if (is_float(dt)) return "(-" + x + ")";
          if (dt == DType::Bool) return x;
          return "((" + storage_type(dt) + ")(0ULL - (unsigned long long)" + x + "))";
        case Op::Recip: return round_to(dt, std::string("(") + (dbl ? "1.0" : "1.0f") + " / " + x + ")");
        case Op::Sin: return round_to(dt, std::string(dbl ? "sin(" : "sinf(") + x + ")");
        case Op::Exp2: return round_to(dt, std::string(dbl ? "exp2(" : "exp2f(") + x + ")");
        case Op::Log2: return round_to(dt, std::string(dbl ? "log2(" : "log2f(") + x + ")");
        case Op::Sqrt: return round_to(dt, std::string(dbl ? "sqrt(" : "sqrtf(") + x + ")");
        case Op::Not: return dt == DType::Bool ? "((unsigned char)!" + x + ")" : "((" + storage_type(dt) + ")~" + x + ")";
        default: break;
      }
      break;
    }
    case ExprKind::Binary: return binary_expr(e);
    case ExprKind::Select: return "(" + expr(e->args[0]) + " ? " + expr(e->args[1]) + " : " + expr(e->args[2]) + ")";
    case ExprKind::Cast: return cast_expr(e);
    case ExprKind::Broadcast: return expr(e->args[0]);
    case ExprKind::Dot: break;  // vector-only (the packed int8 GEMM, re-lowered as a reduction for cuda)
  }
  LATHE_CHECK(false, "cuda renderer: cannot render " + loop::expr_key(e));
  return "";
}

// "[](float a, float b) { return lathe_maxf(a, b); }" — the accumulator's combine, unrounded
std::string CudaEmitter::combine_lambda(ReduceOp op, DType dt) {
  Op bop = op == ReduceOp::Add ? Op::Add : op == ReduceOp::Mul ? Op::Mul : Op::Max;
  DType ct = is_half(dt) ? DType::F32 : dt;  // halves accumulate in float
  ExprRef b = loop::binary(bop, loop::var("a", ct), loop::var("b", ct));
  std::string T = compute_type(ct);
  return "[](" + T + " a, " + T + " b) { return " + expr(b) + "; }";
}

}  // namespace lathe::cuda
