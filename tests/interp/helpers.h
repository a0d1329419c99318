// helpers.h — small builders shared by the interpreter tests: tensors from value lists,
// running a one-output graph, reading results back as doubles / int64.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/build.h"
#include "core/ir/diag.h"

namespace lathe::test {

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();

inline const DType kAllDTypes[] = {DType::Bool, DType::U8,  DType::I8,   DType::I16, DType::I32,
                                   DType::I64,  DType::F16, DType::BF16, DType::F32, DType::F64,
                                   DType::U16,  DType::U32, DType::U64};

inline HostTensor tensor(DType dt, std::vector<int64_t> shape, const std::vector<double>& vals) {
  HostTensor t(dt, std::move(shape));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(vals.size()));
  for (size_t i = 0; i < vals.size(); ++i) t.set_f64(static_cast<int64_t>(i), vals[i]);
  return t;
}
inline HostTensor itensor(DType dt, std::vector<int64_t> shape, const std::vector<int64_t>& vals) {
  HostTensor t(dt, std::move(shape));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(vals.size()));
  for (size_t i = 0; i < vals.size(); ++i) t.set_i64(static_cast<int64_t>(i), vals[i]);
  return t;
}
inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}
inline std::vector<int64_t> ivalues(const HostTensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_i64(i));
  return v;
}
// Runs a graph with one output "y".
inline HostTensor run(NodeRef y, const TensorMap& inputs = {}) {
  return interpret(Graph::from_outputs({{"y", y}}), inputs).at("y");
}
// Element-wise equality where NaN equals NaN and the sign of zero is ignored.
inline void expect_values(const HostTensor& t, const std::vector<double>& want) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " = " << got[i];
    else EXPECT_EQ(got[i], want[i]) << "element " << i;
  }
}
inline Shape S(std::initializer_list<int64_t> d) { return shape_from(std::vector<int64_t>(d)); }

}  // namespace lathe::test
