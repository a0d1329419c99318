// c_emitter.cpp — CEmitter: loop IR → C source (see c_emitter.h).
#include "backends/c/c_emitter.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "core/ir/diag.h"

namespace lathe {

using loop::ExprKind;
using loop::ExprRef;
using loop::Stmt;
using loop::StmtKind;

namespace {

const char* kPrelude = R"C(#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* loop IR Prefetch: a hint; compilers without __builtin_prefetch leave it out */
#if defined(__GNUC__) || defined(__clang__)
#define LATHE_PREFETCH(p, rw, locality) __builtin_prefetch((p), (rw), (locality))
#else
#define LATHE_PREFETCH(p, rw, locality) ((void)0)
#endif

typedef float lathe_f32x16 __attribute__((vector_size(64)));
typedef float lathe_f32x16u __attribute__((vector_size(64), aligned(4)));
typedef float lathe_f32x8 __attribute__((vector_size(32)));
typedef float lathe_f32x8u __attribute__((vector_size(32), aligned(4)));
typedef double lathe_f64x8 __attribute__((vector_size(64)));
typedef double lathe_f64x8u __attribute__((vector_size(64), aligned(8)));

/* integer vectors of the int8 GEMM micro-kernel (loop IR Dot) */
#define LATHE_IVEC(T, N, NAME)                                              \
  typedef T NAME __attribute__((vector_size(sizeof(T) * N)));               \
  typedef T NAME##u __attribute__((vector_size(sizeof(T) * N), aligned(1)));
LATHE_IVEC(int32_t, 8, lathe_i32x8)
LATHE_IVEC(int32_t, 16, lathe_i32x16)
LATHE_IVEC(int16_t, 2, lathe_i16x2)
LATHE_IVEC(int16_t, 16, lathe_i16x16)
LATHE_IVEC(int16_t, 32, lathe_i16x32)
LATHE_IVEC(uint8_t, 4, lathe_u8x4)
LATHE_IVEC(uint8_t, 32, lathe_u8x32)
LATHE_IVEC(uint8_t, 64, lathe_u8x64)
LATHE_IVEC(int8_t, 4, lathe_i8x4)
LATHE_IVEC(int8_t, 32, lathe_i8x32)
LATHE_IVEC(int8_t, 64, lathe_i8x64)
static inline lathe_i32x8 lathe_bcast_i32x8(int32_t x) { return (lathe_i32x8){x, x, x, x, x, x, x, x}; }
static inline lathe_i32x16 lathe_bcast_i32x16(int32_t x) { return (lathe_i32x16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
/* acc[l] + sum_j a[j] * b[l*G + j], exact products, wrapping i32 sum */
#define LATHE_DOT(G, L, TA, TB)                                                                          \
  static inline lathe_i32x##L lathe_dot##G##_##TA##_##TB##_##L(lathe_i32x##L acc, lathe_##TA##x##G a,     \
                                                               lathe_##TB##x##L##G b) {                 \
    for (int l = 0; l < L; ++l) {                                                                        \
      uint32_t s = (uint32_t)acc[l];                                                                     \
      for (int j = 0; j < G; ++j) s += (uint32_t)((int32_t)a[j] * (int32_t)b[l * G + j]);                \
      acc[l] = (int32_t)s;                                                                               \
    }                                                                                                    \
    return acc;                                                                                          \
  }
typedef lathe_i16x16 lathe_i16x82;
typedef lathe_i16x32 lathe_i16x162;
typedef lathe_i8x32 lathe_i8x84;
typedef lathe_i8x64 lathe_i8x164;
typedef lathe_u8x32 lathe_u8x84;
typedef lathe_u8x64 lathe_u8x164;
LATHE_DOT(2, 8, i16, i16)
LATHE_DOT(2, 16, i16, i16)
LATHE_DOT(4, 8, u8, i8)
LATHE_DOT(4, 16, u8, i8)
LATHE_DOT(4, 8, i8, u8)
LATHE_DOT(4, 16, i8, u8)
/* the same with each pair (0-1, 2-3) summed in a saturating i16 (vpmaddubsw; qdq-sat16) */
#define LATHE_DOT_SAT(L, TA, TB)                                                                           \
  static inline lathe_i32x##L lathe_dot4sat16_##TA##_##TB##_##L(lathe_i32x##L acc, lathe_##TA##x4 a, lathe_##TB##x##L##4 b) { \
    for (int l = 0; l < L; ++l) {                                                                          \
      uint32_t s = (uint32_t)acc[l];                                                                       \
      for (int j = 0; j < 4; j += 2) {                                                                     \
        int32_t p = (int32_t)a[j] * (int32_t)b[l * 4 + j] + (int32_t)a[j + 1] * (int32_t)b[l * 4 + j + 1];  \
        s += (uint32_t)(p > 32767 ? 32767 : p < -32768 ? -32768 : p);                                       \
      }                                                                                                    \
      acc[l] = (int32_t)s;                                                                                 \
    }                                                                                                      \
    return acc;                                                                                            \
  }
LATHE_DOT_SAT(8, u8, i8)
LATHE_DOT_SAT(16, u8, i8)
LATHE_DOT_SAT(8, i8, u8)
LATHE_DOT_SAT(16, i8, u8)

static inline lathe_f32x16 lathe_bcast_f32x16(float x) { return (lathe_f32x16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
static inline lathe_f32x8 lathe_bcast_f32x8(float x) { return (lathe_f32x8){x, x, x, x, x, x, x, x}; }
static inline lathe_f64x8 lathe_bcast_f64x8(double x) { return (lathe_f64x8){x, x, x, x, x, x, x, x}; }

static inline float lathe_maxf(float a, float b) { return (a > b || a != a) ? a : b; }
static inline double lathe_maxd(double a, double b) { return (a > b || a != a) ? a : b; }
static inline float lathe_fmodf(float a, float b) { return b == 0 ? 0.0f : fmodf(a, b); }
static inline double lathe_fmodd(double a, double b) { return b == 0 ? 0.0 : fmod(a, b); }

/* 2^x for f32 without libm: 2^round(x) by exponent bits times a degree-7 polynomial of
   the fraction; branch-free so loops calling it vectorize. |error| ~ 1-2 ulp. */
static inline float lathe_exp2f(float x) {
  float xc = x < -150.0f ? -150.0f : (x > 128.0f ? 128.0f : x);
  float n = (xc + 12582912.0f) - 12582912.0f;
  float f = xc - n;
  float p = 1.5252733804e-05f;
  p = p * f + 1.5403530393e-04f;
  p = p * f + 1.3333558146e-03f;
  p = p * f + 9.6181291076e-03f;
  p = p * f + 5.5504108665e-02f;
  p = p * f + 2.4022650696e-01f;
  p = p * f + 6.9314718056e-01f;
  p = p * f + 1.0f;
  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
  int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, 4);
  memcpy(&s2, &b2, 4);
  float r = p * s1 * s2;
  return x != x ? x : r;
}

#define LATHE_F2I(T, NAME, LO, HI)                         \
  static inline T NAME(double x) {                         \
    if (x != x) return 0;                                  \
    if (x <= (double)(LO)) return (T)(LO);                 \
    if (x >= (double)(HI)) return (T)(HI);                 \
    return (T)x;                                           \
  }
LATHE_F2I(uint8_t, lathe_f2i_u8, 0, 255)
LATHE_F2I(int8_t, lathe_f2i_i8, -128, 127)
LATHE_F2I(int16_t, lathe_f2i_i16, -32768, 32767)
LATHE_F2I(int32_t, lathe_f2i_i32, INT32_MIN, INT32_MAX)
LATHE_F2I(int64_t, lathe_f2i_i64, INT64_MIN, INT64_MAX)
LATHE_F2I(uint16_t, lathe_f2i_u16, 0, 65535)
LATHE_F2I(uint32_t, lathe_f2i_u32, 0, UINT32_MAX)
LATHE_F2I(uint64_t, lathe_f2i_u64, 0, UINT64_MAX)

#define LATHE_IDIV(T, NAME, MOD)                                                     \
  static inline T NAME(T a, T b) { return b == 0 ? 0 : (b == (T)-1 ? (T)(0 - (uint64_t)a) : (T)(a / b)); } \
  static inline T MOD(T a, T b) { return (b == 0 || b == (T)-1) ? 0 : (T)(a % b); }
LATHE_IDIV(int8_t, lathe_idiv_i8, lathe_mod_i8)
LATHE_IDIV(int16_t, lathe_idiv_i16, lathe_mod_i16)
LATHE_IDIV(int32_t, lathe_idiv_i32, lathe_mod_i32)
LATHE_IDIV(int64_t, lathe_idiv_i64, lathe_mod_i64)
static inline uint8_t lathe_idiv_u8(uint8_t a, uint8_t b) { return b == 0 ? 0 : a / b; }
static inline uint8_t lathe_mod_u8(uint8_t a, uint8_t b) { return b == 0 ? 0 : a % b; }
#define LATHE_UDIV(T, NAME, MOD)                                                   \
  static inline T NAME(T a, T b) { return b == 0 ? 0 : (T)(a / b); } \
  static inline T MOD(T a, T b) { return b == 0 ? 0 : (T)(a % b); }
LATHE_UDIV(uint16_t, lathe_idiv_u16, lathe_mod_u16)
LATHE_UDIV(uint32_t, lathe_idiv_u32, lathe_mod_u32)
LATHE_UDIV(uint64_t, lathe_idiv_u64, lathe_mod_u64)
static inline uint8_t lathe_mod_bool(uint8_t a, uint8_t b) { return 0; }

/* max reductions keep NaN (the built-in omp max combiner would drop it) */
#pragma omp declare reduction(lathe_fmax : float : omp_out = lathe_maxf(omp_out, omp_in)) initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(lathe_dmax : double : omp_out = lathe_maxd(omp_out, omp_in)) initializer(omp_priv = -(double)INFINITY)

/* f16 and bf16 live in memory as their 16 bits and compute in float (as the llvm backend
   does): loads widen; casts to them and stores round to nearest even (NaN stays NaN,
   overflow goes to inf). Sums accumulate in float, as the interpreter's do. */
static inline float lathe_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24: zero and subnormals */
    return s ? -v : v;
  }
  bits = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static inline uint16_t lathe_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);  /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u); /* rounds past 65504: inf */
  if (a < 0x38800000u) {                                  /* below 2^-14: a multiple of 2^-24 */
    float v;
    memcpy(&v, &a, 4);
    float q = (v * 16777216.0f + 12582912.0f) - 12582912.0f; /* nearest even */
    return (uint16_t)(s | (uint32_t)q);
  }
  a += 0xfffu + ((a >> 13) & 1u);
  return (uint16_t)(s | ((a - 0x38000000u) >> 13));
}
static inline float lathe_bf2f(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
static inline uint16_t lathe_f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
static inline float lathe_rh(float f) { return lathe_h2f(lathe_f2h(f)); }
static inline float lathe_rb(float f) { return lathe_bf2f(lathe_f2bf(f)); }

static void* lathe_alloc(size_t bytes) {
  void* p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) abort();
  return p;
}
)C";

std::string dsuffix(DType dt) { return std::string(dtype_name(dt)); }

std::string c_ident(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  return r;
}

}  // namespace

std::string CEmitter::prelude() const { return kPrelude; }

std::string CEmitter::dtype_unsupported(DType dt) const { return ""; }

namespace {
bool is_half(DType dt) { return dt == DType::F16 || dt == DType::BF16; }
}  // namespace

// f16 / bf16: the value (a float) rounded to the type's precision; x for other types.
std::string CEmitter::round_to(DType dt, const std::string& x) const {
  if (dt == DType::F16) return "lathe_rh(" + x + ")";
  if (dt == DType::BF16) return "lathe_rb(" + x + ")";
  return x;
}

std::string CEmitter::mem_type(DType dt) const { return is_half(dt) ? "uint16_t" : type(dt); }

std::string CEmitter::type(DType dt, int lanes) const {
  if (lanes > 1) {
    if (dt == DType::F32 && (lanes == 16 || lanes == 8)) return "lathe_f32x" + std::to_string(lanes);
    if (dt == DType::F64 && lanes == 8) return "lathe_f64x8";
    static const std::set<std::string> ivec{"i32x8", "i32x16", "i16x2", "i16x16", "i16x32", "u8x4", "u8x32", "u8x64", "i8x4", "i8x32", "i8x64"};
    std::string n = std::string(dtype_name(dt)) + "x" + std::to_string(lanes);
    if (ivec.count(n)) return "lathe_" + n;
    LATHE_CHECK(false, "C emitter: no vector type for " + std::string(dtype_name(dt)) + "x" + std::to_string(lanes));
  }
  switch (dt) {
    case DType::Bool: case DType::U8: return "uint8_t";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U16: return "uint16_t";
    case DType::U32: return "uint32_t";
    case DType::U64: return "uint64_t";
    case DType::F16: case DType::BF16: return "float";  // in registers; memory: mem_type()
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "void";
}

std::string CEmitter::literal(const ExprRef& e) const {
  if (is_float(e->dtype)) {
    bool f32 = e->dtype != DType::F64;  // f16 / bf16 compute in float
    if (std::isnan(e->f)) return f32 ? "NAN" : "((double)NAN)";
    if (std::isinf(e->f)) return e->f > 0 ? (f32 ? "INFINITY" : "((double)INFINITY)") : (f32 ? "(-INFINITY)" : "(-(double)INFINITY)");
    char b[64];
    std::snprintf(b, sizeof b, f32 ? "%af" : "%a", f32 ? static_cast<double>(static_cast<float>(e->f)) : e->f);
    return std::string("(") + b + ")";
  }
  if (e->dtype == DType::I64) {
    if (e->i == INT64_MIN) return "INT64_MIN";
    return "INT64_C(" + std::to_string(e->i) + ")";
  }
  if (e->dtype == DType::U64) return "UINT64_C(" + std::to_string(static_cast<uint64_t>(e->i)) + ")";
  if (e->dtype == DType::U32) return "UINT32_C(" + std::to_string(static_cast<uint32_t>(e->i)) + ")";
  return "((" + type(e->dtype) + ")" + std::to_string(e->i) + ")";
}

std::string CEmitter::expr(const ExprRef& e) {
  auto a = [&](int i) { return expr(e->args[i]); };
  DType dt = e->dtype;
  std::string T = type(dt, e->lanes);
  bool flt = is_float(dt);
  switch (e->kind) {
    case ExprKind::Const: return literal(e);
    case ExprKind::Var: {
      for (auto& d : f_->dims)
        if (d == e->name) return "d_" + c_ident(d);
      return e->name;
    }
    case ExprKind::Load: {
      const auto& p = f_->buffers.at(e->buffer);
      LATHE_CHECK(!is_half(p.dtype) || e->lanes == 1, "C emitter: vector loads of " + std::string(dtype_name(p.dtype)));
      std::string ref = e->lanes > 1 ? "(*(const " + T + "u*)&" + p.name + "[" + a(0) + "])" : p.name + "[" + a(0) + "]";
      if (p.dtype == DType::F16) ref = "lathe_h2f(" + ref + ")";
      if (p.dtype == DType::BF16) ref = "lathe_bf2f(" + ref + ")";
      if (e->args.size() > 1) return "(" + a(1) + " ? " + ref + " : (" + T + ")0)";
      return ref;
    }
    case ExprKind::LocalLoad: {
      auto it = allocs_.find(e->name);
      LATHE_CHECK(it != allocs_.end(), "C emitter: local array " + e->name + " used outside its scope");
      const Stmt* al = it->second;
      if (al->registers) {
        LATHE_CHECK(loop::is_const(e->args[0]), "C emitter: register array " + e->name + " needs constant indices");
        return e->name + "_" + std::to_string(e->args[0]->i);
      }
      if (e->lanes > 1 && al->lanes == 1) return "(*(const " + T + "u*)&" + e->name + "[" + a(0) + "])";
      return e->name + "[" + a(0) + "]";
    }
    case ExprKind::Unary: {
      std::string x = a(0);
      bool f64 = dt == DType::F64;
      switch (e->op) {
        case Op::Neg: return flt ? "(-" + x + ")" : "((" + T + ")(0 - (uint64_t)" + x + "))";
        case Op::Recip: return "(" + std::string(f64 ? "1.0" : "1.0f") + " / " + x + ")";
        case Op::Sin: return std::string(f64 ? "sin(" : "sinf(") + x + ")";
        case Op::Exp2: return std::string(f64 ? "exp2(" : "lathe_exp2f(") + x + ")";
        case Op::Log2: return std::string(f64 ? "log2(" : "log2f(") + x + ")";
        case Op::Sqrt: return std::string(f64 ? "sqrt(" : "sqrtf(") + x + ")";
        case Op::Not: return dt == DType::Bool ? "((uint8_t)!" + x + ")" : "((" + T + ")~" + x + ")";
        default: break;
      }
      break;
    }
    case ExprKind::Binary: {
      std::string x = a(0), y = a(1);
      DType in = e->args[0]->dtype;
      bool fin = is_float(in);
      std::string s = dsuffix(in);
      if (in == DType::Bool && (e->op == Op::Add || e->op == Op::Mul))  // bool arithmetic is logical
        return "((uint8_t)(" + x + (e->op == Op::Add ? " | " : " & ") + y + "))";
      switch (e->op) {
        case Op::Add:
          if (fin || e->lanes > 1) return "(" + x + " + " + y + ")";
          if (in == DType::I64) return "(" + x + " + " + y + ")";
          return "((" + T + ")(" + x + " + " + y + "))";
        case Op::Mul:
          if (fin || e->lanes > 1) return "(" + x + " * " + y + ")";
          if (in == DType::I64) return "(" + x + " * " + y + ")";
          if (is_unsigned_int(in)) return "((" + T + ")((uint64_t)" + x + " * (uint64_t)" + y + "))";
          return "((" + T + ")((int64_t)" + x + " * " + y + "))";
        case Op::IDiv:
          if (in == DType::I64 && e->lanes == 1 && loop::is_const(e->args[1]) && e->args[1]->i > 0) return "(" + x + " / " + y + ")";
          return "lathe_idiv_" + s + "(" + x + ", " + y + ")";
        case Op::Mod:
          if (fin) return std::string(in == DType::F64 ? "lathe_fmodd(" : "lathe_fmodf(") + x + ", " + y + ")";
          if (in == DType::I64 && e->lanes == 1 && loop::is_const(e->args[1]) && e->args[1]->i > 0) return "(" + x + " % " + y + ")";
          return "lathe_mod_" + s + "(" + x + ", " + y + ")";
        case Op::Max:
          if (in == DType::F32 || is_half(in)) return "lathe_maxf(" + x + ", " + y + ")";
          if (in == DType::F64) return "lathe_maxd(" + x + ", " + y + ")";
          return "(" + x + " > " + y + " ? " + x + " : " + y + ")";
        case Op::And: return in == DType::Bool ? "((uint8_t)(" + x + " & " + y + "))" : "((" + T + ")(" + x + " & " + y + "))";
        case Op::Or: return "((" + T + ")(" + x + " | " + y + "))";
        case Op::Xor: return "((" + T + ")(" + x + " ^ " + y + "))";
        case Op::CmpLT: return "((uint8_t)(" + x + " < " + y + "))";
        case Op::CmpNE: return "((uint8_t)(" + x + " != " + y + "))";
        default: break;
      }
      break;
    }
    case ExprKind::Select: return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
    case ExprKind::Cast: {
      DType from = e->args[0]->dtype;
      std::string x = a(0);
      if (dt == DType::Bool) return "((uint8_t)(" + x + " != 0))";
      if (is_float(from) && !is_float(dt)) return "lathe_f2i_" + dsuffix(dt) + "((double)" + x + ")";
      if (is_half(dt)) return round_to(dt, "((float)" + x + ")");
      return "((" + T + ")" + x + ")";
    }
    case ExprKind::Broadcast: return "lathe_bcast_" + T.substr(6) + "(" + a(0) + ")";
    case ExprKind::Dot: {
      int g = e->args[1]->lanes;
      std::string ta(dtype_name(e->args[1]->dtype)), tb(dtype_name(e->args[2]->dtype));
      bool ok = (g == 2 && ta == "i16" && tb == "i16") || (g == 4 && ta == "u8" && tb == "i8") ||
                (g == 4 && ta == "i8" && tb == "u8");
      LATHE_CHECK(ok && (e->lanes == 8 || e->lanes == 16), "C emitter: no dot" + std::to_string(g) + " of " + ta + " x " + tb);
      if (e->op == Op::Max)
        return "lathe_dot4sat16_" + ta + "_" + tb + "_" + std::to_string(e->lanes) + "(" + a(0) + ", " + a(1) + ", " + a(2) + ")";
      return "lathe_dot" + std::to_string(g) + "_" + ta + "_" + tb + "_" + std::to_string(e->lanes) + "(" + a(0) + ", " + a(1) +
             ", " + a(2) + ")";
    }
  }
  LATHE_CHECK(false, "C emitter: cannot render " + loop::expr_key(e));
  return "";
}

// A kernel with a dequantized product (loop::is_dequantize_product) compiles without FMA
// contraction (GCC's gnu11 default contracts across statements): the interpreter rounds the
// product on its own, and a residual sum of two of them, requantized, lands on the other side
// of a half step otherwise. LATHE_LLVM_CONTRACT_DQ=1 (the llvm switch) leaves it as before.
std::string CEmitter::function_header(const loop::LoopFunc& f, const std::string& name) const {
  static const bool contract = [] { const char* v = std::getenv("LATHE_LLVM_CONTRACT_DQ"); return v && std::string(v) == "1"; }();
  std::string attr = !contract && loop::has_dequantize_product(f) ? "__attribute__((optimize(\"fp-contract=off\"))) " : "";
  return attr + "void " + name + "(void* const* restrict lathe_bufs, const int64_t* restrict lathe_dims)";
}

void CEmitter::emit_for(const Stmt& s, int depth) {
  std::string red;
  if (!s.reduces.empty()) {
    for (auto& r : s.reduces) {
      if (allocs_.count(r)) continue;
      auto it = local_types_.find(r);
      DType dt = it == local_types_.end() ? DType::I64 : it->second;
      std::string op = s.reduce_op == ReduceOp::Add ? "+" : s.reduce_op == ReduceOp::Mul ? "*" : "max";
      if (dt == DType::Bool) op = s.reduce_op == ReduceOp::Mul ? "&" : "|";
      if (s.reduce_op == ReduceOp::Max && (dt == DType::F32 || is_half(dt))) op = "lathe_fmax";
      if (s.reduce_op == ReduceOp::Max && dt == DType::F64) op = "lathe_dmax";
      red += " reduction(" + op + ":" + r + ")";
    }
  }
  if (s.annot.parallel && s.annot.vectorize) out_ << pad(depth) << "#pragma omp parallel for simd schedule(static)" << red << "\n";
  else if (s.annot.parallel) out_ << pad(depth) << "#pragma omp parallel for schedule(static)\n";
  else if (s.annot.vectorize && s.annot.width > 0)  // peel: the width; GCC picks its own tail
    out_ << pad(depth) << "#pragma omp simd simdlen(" << s.annot.width << ")" << red << "\n";
  else if (s.annot.vectorize) out_ << pad(depth) << "#pragma omp simd" << red << "\n";
  // GCC accepts no pragma between an OpenMP loop pragma and its loop (nor the other way
  // round): the unroll hint of a vectorized or parallel loop is left to the compiler
  if (s.annot.unroll > 1 && !s.annot.parallel && !s.annot.vectorize)
    out_ << pad(depth) << "#pragma GCC unroll " << s.annot.unroll << "\n";
  out_ << pad(depth) << "for (int64_t " << s.var << " = 0; " << s.var << " < " << expr(s.extent) << "; ++" << s.var << ") {";
  if (!s.note.empty()) out_ << "  /* " << s.note << " */";
  out_ << "\n";
  emit_block(s.body, depth + 1);
  out_ << pad(depth) << "}\n";
}

void CEmitter::emit_block(const std::vector<Stmt>& body, int depth) {
  std::vector<std::string> heap;
  auto saved = allocs_;
  for (const Stmt& s : body) {
    if (s.kind == StmtKind::Alloc) {
      allocs_[s.var] = &s;
      int64_t bytes = s.count * s.lanes * static_cast<int64_t>(dtype_size(s.dtype));
      if (s.registers) {
        out_ << pad(depth) << type(s.dtype, s.lanes) << " ";
        for (int64_t i = 0; i < s.count; ++i) out_ << (i ? ", " : "") << s.var << "_" << i;
        out_ << ";\n";
      } else if (bytes > 64 * 1024) {
        out_ << pad(depth) << type(s.dtype, s.lanes) << "* restrict " << s.var << " = (" << type(s.dtype, s.lanes)
             << "*)lathe_alloc(" << bytes << ");\n";
        heap.push_back(s.var);
      } else {
        out_ << pad(depth) << type(s.dtype, s.lanes) << " " << s.var << "[" << s.count << "] __attribute__((aligned(64)));\n";
      }
      continue;
    }
    emit_stmt(s, depth);
  }
  for (auto& h : heap) out_ << pad(depth) << "free(" << h << ");\n";
  allocs_ = saved;
}

void CEmitter::emit_stmt(const Stmt& s, int depth) {
  switch (s.kind) {
    case StmtKind::For: emit_for(s, depth); break;
    case StmtKind::If:
      out_ << pad(depth) << "if (" << expr(s.cond) << ") {\n";
      emit_block(s.body, depth + 1);
      if (!s.else_body.empty()) {
        out_ << pad(depth) << "} else {\n";
        emit_block(s.else_body, depth + 1);
      }
      out_ << pad(depth) << "}\n";
      break;
    case StmtKind::Store: {
      const auto& p = f_->buffers.at(s.buffer);
      if (is_half(p.dtype)) {
        LATHE_CHECK(s.value->lanes == 1, "C emitter: vector stores of " + std::string(dtype_name(p.dtype)));
        out_ << pad(depth) << p.name << "[" << expr(s.index) << "] = " << (p.dtype == DType::F16 ? "lathe_f2h(" : "lathe_f2bf(")
             << expr(s.value) << ");\n";
      } else if (s.value->lanes > 1)
        out_ << pad(depth) << "*(" << type(p.dtype, s.value->lanes) << "u*)&" << p.name << "[" << expr(s.index) << "] = " << expr(s.value) << ";\n";
      else
        out_ << pad(depth) << p.name << "[" << expr(s.index) << "] = " << expr(s.value) << ";\n";
      break;
    }
    case StmtKind::Prefetch:  // LATHE_PREFETCH: __builtin_prefetch, or nothing (the prelude)
      out_ << pad(depth) << "LATHE_PREFETCH(&" << f_->buffers.at(s.buffer).name << "[" << expr(s.index) << "], " << (s.write ? 1 : 0)
           << ", " << s.locality << ");\n";
      break;
    case StmtKind::Let:
      local_types_[s.var] = s.dtype;
      out_ << pad(depth) << type(s.dtype, s.value->lanes) << " " << s.var << " = " << expr(s.value) << ";\n";
      break;
    case StmtKind::Assign: out_ << pad(depth) << s.var << " = " << expr(s.value) << ";\n"; break;
    case StmtKind::LocalStore: {
      auto it = allocs_.find(s.var);
      LATHE_CHECK(it != allocs_.end(), "C emitter: local array " + s.var + " used outside its scope");
      const Stmt* al = it->second;
      if (al->registers) {
        LATHE_CHECK(loop::is_const(s.index), "C emitter: register array " + s.var + " needs constant indices");
        out_ << pad(depth) << s.var << "_" << s.index->i << " = " << expr(s.value) << ";\n";
      } else if (s.value->lanes > 1 && al->lanes == 1) {
        out_ << pad(depth) << "*(" << type(al->dtype, s.value->lanes) << "u*)&" << s.var << "[" << expr(s.index) << "] = " << expr(s.value) << ";\n";
      } else {
        out_ << pad(depth) << s.var << "[" << expr(s.index) << "] = " << expr(s.value) << ";\n";
      }
      break;
    }
    case StmtKind::Alloc: break;  // handled by emit_block
  }
}

std::string CEmitter::render_kernel(const loop::LoopFunc& f, const std::string& prefix) {
  f_ = &f;
  out_.str("");
  allocs_.clear();
  local_types_.clear();
  out_ << "/* kernel " << f.name << " (" << f.kind << ") */\n";
  out_ << function_header(f, prefix + f.name) << " {\n";
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    const auto& p = f.buffers[i];
    std::string T = mem_type(p.dtype);
    out_ << "  " << (p.written ? "" : "const ") << T << "* restrict " << p.name << " = (" << (p.written ? "" : "const ") << T
         << "*)lathe_bufs[" << i << "];\n";
  }
  for (size_t d = 0; d < f.dims.size(); ++d)
    out_ << "  const int64_t d_" << c_ident(f.dims[d]) << " = lathe_dims[" << d << "];\n";
  emit_block(f.body, 1);
  out_ << "}\n";
  f_ = nullptr;
  return out_.str();
}

}  // namespace lathe
