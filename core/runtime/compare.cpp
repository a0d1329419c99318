// compare.cpp — allclose and the default tolerances used to compare a backend's or a
// rewrite's result with the interpreter (the oracle).
#include "core/runtime/compare.h"

#include <cmath>
#include <cstdio>

namespace lathe {

Tolerance default_tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return {1e-9, 1e-12};
    case DType::F32: return {1e-4, 1e-5};
    case DType::F16: case DType::BF16: return {1e-2, 1e-2};
    default: return {0, 0};  // integers and bool: exact
  }
}

namespace {

std::string index_string(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string r = "[";
  for (size_t d = 0; d < idx.size(); ++d) r += (d ? ", " : "") + std::to_string(idx[d]);
  return r + "]";
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

bool allclose(const HostTensor& a, const HostTensor& b, double rtol, double atol, std::string* why) {
  if (a.shape() != b.shape()) {
    if (why) *why = "shapes differ: " + a.shape_string() + " vs " + b.shape_string();
    return false;
  }
  bool exact_ints = !is_float(a.dtype()) && !is_float(b.dtype());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    bool ok;
    if (exact_ints) {
      // Integers compare exactly (an int64 difference may not survive a trip through double).
      int64_t x = a.get_i64(i), y = b.get_i64(i);
      double diff = static_cast<double>(static_cast<__int128>(x) - y);
      ok = x == y || std::fabs(diff) <= atol + rtol * std::fabs(static_cast<double>(y));
      if (!ok) worst = std::max(worst, std::fabs(diff));
    } else {
      double x = a.get_f64(i), y = b.get_f64(i);
      if (std::isnan(x) || std::isnan(y)) ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(x) || std::isinf(y)) ok = x == y;
      else ok = std::fabs(x - y) <= atol + rtol * std::fabs(y);
      if (!ok && !std::isnan(x - y)) worst = std::max(worst, std::fabs(x - y));
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return true;
  if (why) {
    double x = a.get_f64(first), y = b.get_f64(first);
    *why = std::to_string(bad) + " of " + std::to_string(a.numel()) + " elements differ; first at " +
           index_string(a.shape(), first) + ": " + num(x) + " vs " + num(y) + " (|diff| " + num(std::fabs(x - y)) +
           ", allowed " + num(atol + rtol * std::fabs(y)) + "); max |diff| " + num(worst) + " (rtol " + num(rtol) +
           ", atol " + num(atol) + ")";
  }
  return false;
}

}  // namespace lathe
