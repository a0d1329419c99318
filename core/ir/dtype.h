// dtype.h — the element types Lathe knows, their sizes, names and promotion rules.
//
// Promotion (used by the frontend; primitives require equal dtypes and the frontend
// inserts Cast nodes) follows PyTorch's lattice for two tensors:
//   bool < u8 < i8 < i16 < i32 < i64 < f16 < bf16 < f32 < f64,
// with two exceptions: u8 with a signed integer type promotes to the next signed type
// that holds both (u8+i8 -> i16), and f16 with bf16 promotes to f32. The wider unsigned
// types (u16, u32, u64: ONNX has them, PyTorch 1.x does not) follow NumPy: two unsigned
// types give the wider; an unsigned with a signed type gives the signed type if it is
// wider, else the next wider signed type (u16+i16 -> i32), and u64 with any signed type
// gives i64 (NumPy's f64 would lose integers); any integer with a float gives the float.
// They are appended to the enum so that the older dtypes keep their numbers.
// A Python-like scalar (a Lua number) does not raise a tensor's category: tensor(i32) + 2
// stays i32, tensor(i32) + 2.5 becomes f32, tensor(f16) * 2.0 stays f16.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lathe {

enum class DType : uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64, U16, U32, U64 };

constexpr int kNumDTypes = 13;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                  // "f32", "i64", "bool", …
std::optional<DType> dtype_from_name(std::string_view); // inverse of dtype_name
bool is_float(DType t);
bool is_int(DType t);      // integer types, not bool
bool is_signed(DType t);   // signed ints and floats
bool is_unsigned_int(DType t);  // u8, u16, u32, u64
DType promote(DType a, DType b);
// The dtype that results from combining a tensor of type t with a scalar literal;
// is_float_literal says whether the literal was written with a fractional part.
DType promote_with_scalar(DType t, bool is_float_literal);
// Default float type used when an integer tensor meets a float op (exp, div): f32.
DType to_float(DType t);

// f16 / bf16 conversions, round-to-nearest-even; NaN stays NaN, overflow goes to inf.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

}  // namespace lathe
