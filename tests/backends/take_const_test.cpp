// take_const_test.cpp — a Take (gather) whose indices are a constant tensor (a Resize's
// source rows and columns, an embedding of fixed ids) drops the negative-index wrap and the
// bounds check when every index is in range, and keeps both when one is not; against the
// interpreter on the backend under test, odd sizes and batch 1 and 64.
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "diff_util.h"

namespace lathe {
namespace {

Tensor ids(std::vector<int64_t> v) {
  HostTensor t(DType::I64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return from_host(t);
}

TEST(TakeConst, InRangeConstantIndicesNeedNoGuard) {
  Tensor x = input("x", {3, 13, 11});
  Graph in_range = Graph::from_outputs({{"y", (index_select(x, 2, ids({0, 5, 10, 10, 3, 7, 1})) * 2.0).node()}});
  std::string ir = test::loop_ir_of(build_program(in_range));
  EXPECT_EQ(ir.find(" < 0)"), std::string::npos) << ir;   // no wrap of negative indices
  EXPECT_EQ(ir.find(" if "), std::string::npos) << ir;     // no masked load
  // a negative index (from the end) or one past the end keeps the wrap / the zero
  Graph negative = Graph::from_outputs({{"y", (index_select(x, 2, ids({0, -1, 4, -11})) * 2.0).node()}});
  EXPECT_NE(test::loop_ir_of(build_program(negative)).find(" < 0)"), std::string::npos);
  test::DiffBatch batch;
  batch.add("in range, axis 2", in_range);
  batch.add("negative indices", negative);
  for (int64_t b : {1, 64}) {
    Tensor xb = input("x", {b, 7, 5});
    batch.add("in range, axis 1, batch " + std::to_string(b),
              Graph::from_outputs({{"y", relu(index_select(xb, 1, ids({6, 0, 2, 2, 5})) - 0.5).node()}}));
  }
  Tensor w = input("w", {17, 9});
  batch.add("embedding of fixed ids", Graph::from_outputs({{"y", embedding(ids({16, 0, 3, 8}), w).node()}}));
  EXPECT_EQ(batch.run(), 0);
}

}  // namespace
}  // namespace lathe
