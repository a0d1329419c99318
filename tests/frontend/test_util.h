// test_util.h — helpers for frontend and autodiff tests: build a graph from tensors, run it
// with the reference interpreter, and make/read host tensors.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/ir/verify.h"
#include "core/runtime/random.h"

namespace lathe::testing {

inline HostTensor host(DType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  HostTensor t(dt, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel()) << "host(): value count";
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(v.size()); ++i) t.set_f64(i, v[i]);
  return t;
}
inline HostTensor host_f32(std::vector<int64_t> shape, const std::vector<double>& v) { return host(DType::F32, std::move(shape), v); }

inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> r(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) r[i] = t.get_f64(i);
  return r;
}

// Random normal tensor (core/runtime/random.h), deterministic per seed.
inline HostTensor randt(std::vector<int64_t> shape, uint64_t seed, DType dt = DType::F32) {
  return random_tensor(dt, shape, seed);
}

// Runs the graph {name_i: outs_i} and returns the outputs in order; the graph must verify.
inline std::vector<HostTensor> run_all(const std::vector<Tensor>& outs, const TensorMap& inputs = {}) {
  std::vector<std::pair<std::string, NodeRef>> named;
  for (size_t i = 0; i < outs.size(); ++i) named.push_back({"y" + std::to_string(i), outs[i].node()});
  Graph g = Graph::from_outputs(named);
  verify_or_throw(g, "test graph");
  TensorMap r = interpret(g, inputs);
  std::vector<HostTensor> v;
  for (size_t i = 0; i < outs.size(); ++i) v.push_back(r.at("y" + std::to_string(i)));
  return v;
}
inline HostTensor run1(const Tensor& out, const TensorMap& inputs = {}) { return run_all({out}, inputs)[0]; }

// Elementwise |a - b| <= atol + rtol |b| with a readable failure message.
inline void expect_close(const HostTensor& got, const std::vector<double>& want, double rtol = 1e-5,
                         double atol = 1e-6, const std::string& what = "") {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what << ": element count";
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = got.get_f64(i), b = want[i];
    if (std::isnan(b)) { EXPECT_TRUE(std::isnan(a)) << what << " [" << i << "] got " << a << ", want NaN"; continue; }
    if (std::isinf(b)) { EXPECT_EQ(a, b) << what << " [" << i << "]"; continue; }
    EXPECT_LE(std::fabs(a - b), atol + rtol * std::fabs(b)) << what << " [" << i << "] got " << a << ", want " << b;
  }
}

inline std::vector<int64_t> dims(const HostTensor& t) { return t.shape(); }

}  // namespace lathe::testing
