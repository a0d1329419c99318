// int8_data.h — test data for the integer kernels (int8_gemm_test, requant_epilogue_test).
#pragma once
#include <cstdint>
#include <vector>

#include "core/runtime/host_tensor.h"

namespace lathe::test {

// Uniform over the whole type (u8 [0, 255], i8 [-128, 127]), seeded.
inline HostTensor full_range(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor t(dt, std::move(shape));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    int64_t v = static_cast<int64_t>(s % 256);
    t.set_i64(i, dt == DType::U8 ? v : v - 128);
  }
  return t;
}

}  // namespace lathe::test
