// dtype.cpp — dtype table, promotion lattice and half-precision conversions.
#include "core/ir/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace lathe {

namespace {
struct DTypeInfo { std::string_view name; size_t size; bool is_float, is_int, is_signed; };
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", 1, false, false, false}, {"u8", 1, false, true, false},
    {"i8", 1, false, true, true},     {"i16", 2, false, true, true},
    {"i32", 4, false, true, true},    {"i64", 8, false, true, true},
    {"f16", 2, true, false, true},    {"bf16", 2, true, false, true},
    {"f32", 4, true, false, true},    {"f64", 8, true, false, true},
    {"u16", 2, false, true, false},   {"u32", 4, false, true, false},
    {"u64", 8, false, true, false},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool is_float(DType t) { return info(t).is_float; }
bool is_int(DType t) { return info(t).is_int; }
bool is_signed(DType t) { return info(t).is_signed; }
bool is_unsigned_int(DType t) { return info(t).is_int && !info(t).is_signed; }

std::optional<DType> dtype_from_name(std::string_view s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == s) return static_cast<DType>(i);
  if (s == "float32" || s == "float") return DType::F32;
  if (s == "float64" || s == "double") return DType::F64;
  if (s == "float16" || s == "half") return DType::F16;
  if (s == "bfloat16") return DType::BF16;
  if (s == "int64" || s == "long") return DType::I64;
  if (s == "int32" || s == "int") return DType::I32;
  if (s == "int16") return DType::I16;
  if (s == "int8") return DType::I8;
  if (s == "uint8") return DType::U8;
  if (s == "uint16") return DType::U16;
  if (s == "uint32") return DType::U32;
  if (s == "uint64") return DType::U64;
  return std::nullopt;
}

namespace {
// The position of a type on the PyTorch lattice above (the unsigned types by their size).
int lattice_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::U8: return 1;
    case DType::I8: return 2;
    case DType::I16: case DType::U16: return 3;
    case DType::I32: case DType::U32: return 4;
    case DType::I64: case DType::U64: return 5;
    case DType::F16: return 6;
    case DType::BF16: return 7;
    case DType::F32: return 8;
    case DType::F64: return 9;
  }
  return 0;
}
DType signed_of_size(size_t bytes) {
  return bytes <= 1 ? DType::I8 : bytes == 2 ? DType::I16 : bytes == 4 ? DType::I32 : DType::I64;
}
}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
  bool ua = is_unsigned_int(a), ub = is_unsigned_int(b);
  if ((ua && is_int(b) && is_signed(b)) || (ub && is_int(a) && is_signed(a))) {
    DType u = ua ? a : b, s = ua ? b : a;
    if (dtype_size(s) > dtype_size(u)) return s;
    return signed_of_size(2 * dtype_size(u));  // u64 with a signed type: i64
  }
  if (ua && ub) return dtype_size(a) >= dtype_size(b) ? a : b;
  return lattice_rank(a) > lattice_rank(b) ? a : b;
}

DType promote_with_scalar(DType t, bool is_float_literal) {
  if (is_float_literal && !is_float(t)) return DType::F32;
  if (t == DType::Bool && !is_float_literal) return DType::I64;
  return t;
}

DType to_float(DType t) { return is_float(t) ? t : DType::F32; }

uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into exponent: correct
  return static_cast<uint16_t>(half);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) x = sign;
    else {
      int e = -1;
      do { ++e; mant <<= 1; } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

}  // namespace lathe
