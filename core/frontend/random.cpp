// random.cpp — counter-based random tensors built from primitives (rand, randn).
//
// Element k (row-major flat index, an Index node) is hashed with the seed by Chris
// Wellons' "lowbias32" 32-bit mixer, twice, keeping every value in [0, 2^32) inside i64:
//   x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16
// with >> as IDiv by a power of two (exact for non-negative values) and the product
// masked back to 32 bits with And (i64 wrap-around keeps the low 32 bits right).
// uniform = (h >> 8) * 2^-24, exactly representable in f32: [0, 1) with 24 random bits.
// randn is Box–Muller: sqrt(-2 ln(1 - u1)) * cos(2 pi u2) with u1, u2 from two streams.
// The graph is the definition, so every backend produces the same numbers for a seed.
#include <cmath>

#include "core/frontend/detail.h"

namespace lathe {

namespace {

constexpr int64_t kMask32 = 0xffffffffLL;

uint64_t lowbias32_host(uint64_t x) {
  x &= 0xffffffffULL;
  x ^= x >> 16; x = (x * 0x7feb352dULL) & 0xffffffffULL;
  x ^= x >> 15; x = (x * 0x846ca68bULL) & 0xffffffffULL;
  x ^= x >> 16;
  return x;
}

Tensor c64(const Tensor& like, int64_t v) { return Tensor(prim::constant_int(v, DType::I64, like.shape())); }
Tensor band(const Tensor& a, int64_t m) { return detail::binary(Op::And, a, c64(a, m)); }
Tensor bxor(const Tensor& a, int64_t m) { return detail::binary(Op::Xor, a, c64(a, m)); }
Tensor bxor(const Tensor& a, const Tensor& b) { return detail::binary(Op::Xor, a, b); }
Tensor shr(const Tensor& a, int bits) { return detail::binary(Op::IDiv, a, c64(a, int64_t{1} << bits)); }
Tensor mulm(const Tensor& a, int64_t m) { return band(detail::binary(Op::Mul, a, c64(a, m)), kMask32); }

Tensor lowbias32(Tensor x) {
  x = bxor(x, shr(x, 16));
  x = mulm(x, 0x7feb352d);
  x = bxor(x, shr(x, 15));
  x = mulm(x, 0x846ca68bLL);
  x = bxor(x, shr(x, 16));
  return x;
}

// 32 random bits per element for (seed, stream).
Tensor random_bits(const Shape& shape, uint64_t seed, uint64_t stream) {
  uint64_t s1 = lowbias32_host(seed ^ (stream * 0x9e3779b9ULL));
  uint64_t s2 = lowbias32_host((seed >> 32) ^ s1 ^ 0x5bd1e995ULL);
  Tensor k = reshape(Tensor(prim::index(DType::I64, {shape_numel(shape)}, 0)), shape);
  Tensor h = lowbias32(bxor(band(k, kMask32), static_cast<int64_t>(s1)));
  // mix in the counter's high bits (tensors beyond 2^32 elements) and the second key
  return lowbias32(bxor(h, bxor(band(shr(k, 32), kMask32), static_cast<int64_t>(s2))));
}

Tensor uniform01(const Shape& shape, uint64_t seed, uint64_t stream) {
  Tensor top24 = shr(random_bits(shape, seed, stream), 8);
  return to(top24, DType::F32) * (1.0 / 16777216.0);
}

void check_float(DType dt, const char* op) {
  if (!is_float(dt)) detail::fail(op, "dtype must be a float type, got " + std::string(dtype_name(dt)));
}

}  // namespace

Tensor rand(const Shape& shape, uint64_t seed, DType dtype) {
  check_float(dtype, "rand");
  ProvenanceScope ps("rand");
  return to(uniform01(shape, seed, 0), dtype);
}

Tensor randn(const Shape& shape, uint64_t seed, DType dtype) {
  check_float(dtype, "randn");
  ProvenanceScope ps("randn");
  Tensor u1 = uniform01(shape, seed, 1), u2 = uniform01(shape, seed, 2);
  Tensor radius = sqrt(log(1.0 - u1) * -2.0);
  return to(radius * cos(u2 * (2.0 * M_PI)), dtype);
}

Tensor rand_like(const Tensor& x, uint64_t seed) { return rand(x.shape(), seed, to_float(x.dtype())); }
Tensor randn_like(const Tensor& x, uint64_t seed) { return randn(x.shape(), seed, to_float(x.dtype())); }

}  // namespace lathe
