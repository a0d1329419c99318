// random.cpp — seeded, counter-based random tensors for `lathe run` inputs and tests.
//
// Element i of a tensor drawn with seed s depends only on (s, i), never on the order of
// generation or the tensor's shape, so any slice can be regenerated independently:
//   key   = splitmix64(s)
//   word  = splitmix64(key + i * 0x9E3779B97F4A7C15)            (a 64-bit hash of (s, i))
// Floats are standard normals by Box-Muller from two words, of counters 2i and 2i+1:
//   u1 = (w(2i)   >> 11 + 1) * 2^-53 in (0, 1],  u2 = (w(2i+1) >> 11) * 2^-53 in [0, 1)
//   z  = sqrt(-2 ln u1) * cos(2π u2), computed in double and rounded to the dtype.
// Integers are uniform in [0, 10) (word % 10); bool is a fair coin (the word's top bit).
// random_inputs seeds input number p (in declaration order) with splitmix64(s ^ (p+1)·φ).
#include "core/runtime/random.h"

#include <cmath>

#include "core/ir/diag.h"

namespace lathe {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t splitmix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

HostTensor random_tensor(DType dt, const std::vector<int64_t>& shape, uint64_t seed) {
  HostTensor t(dt, shape);
  const uint64_t key = splitmix64(seed);
  auto word = [key](uint64_t i) { return splitmix64(key + i * kGolden); };
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    uint64_t c = static_cast<uint64_t>(i);
    if (is_float(dt)) {
      double u1 = static_cast<double>((word(2 * c) >> 11) + 1) * 0x1.0p-53;
      double u2 = static_cast<double>(word(2 * c + 1) >> 11) * 0x1.0p-53;
      t.set_f64(i, std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    } else if (dt == DType::Bool) {
      t.set_i64(i, static_cast<int64_t>(word(c) >> 63));
    } else {
      t.set_i64(i, static_cast<int64_t>(word(c) % 10));
    }
  }
  return t;
}

std::map<std::string, HostTensor> random_inputs(const Graph& g, uint64_t seed, const Bindings& bindings) {
  std::map<std::string, HostTensor> out;
  uint64_t p = 0;
  for (NodeRef in : g.inputs) {
    ++p;
    std::vector<int64_t> shape;
    try {
      shape = shape_eval(in->shape, bindings);
    } catch (const UserError& e) {
      throw UserError("cannot make random data for input '" + in->attrs.name + "' of shape " +
                      shape_to_string(in->shape) + ": " + e.diag().message + " (`lathe run` also takes --bind NAME=N)");
    }
    out[in->attrs.name] = random_tensor(in->dtype, shape, splitmix64(seed ^ (p * kGolden)));
  }
  return out;
}

}  // namespace lathe
