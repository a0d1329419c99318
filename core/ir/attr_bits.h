// attr_bits.h — a float attribute kept among an Extern's integer attributes (Attrs::ints):
// its f32 bit pattern read as a signed int32, so the text IR prints and parses it exactly
// (the attention scale, the recurrence's clip and activation alpha / beta).
#pragma once
#include <bit>
#include <cstdint>

namespace lathe {

inline int64_t f32_attr_bits(float f) { return std::bit_cast<int32_t>(f); }
inline float f32_of_attr_bits(int64_t bits) { return std::bit_cast<float>(static_cast<int32_t>(bits)); }

}  // namespace lathe
