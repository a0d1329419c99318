// regressions_test.cpp — reproducers found by the random-graph corpus, kept as .lathe text.
#include "diff_util.h"

namespace lathe {
namespace {

void check(const char* text) {
  Graph g = parse_graph(text);
  test::DiffBatch b;
  b.add("regression", g, 1);
  EXPECT_EQ(b.run(), 0);
}

TEST(Regressions, ReduceUnderShiftedView) {
  check(R"(# lathe 1
graph {
  in %0 x0 : i16[11, 3]
  %1 = Reduce(%0) {op=max axes=[1]} : i16[11, 1]
  %2 = View(%1) {strides=[1, 0]} : i16[11, 3]
  %3 = Const {value=3} : i16[11, 3]
  %4 = Mul(%2, %3) : i16[11, 3]
  %5 = View(%4) {strides=[3, 1] offset=-3 mask=[[1, 11], [0, 3]]} : i16[11, 3]
  out y = %5
}
)");
}

TEST(Regressions, MaxReductionPropagatesNaN) {
  check(R"(# lathe 1
graph {
  in %0 x0 : f32[17]
  %1 = Neg(%0) : f32[17]
  %2 = Log2(%1) : f32[17]
  %3 = Reduce(%2) {op=max axes=[0]} : f32[1]
  out y = %3
}
)");
}

TEST(Regressions, IntRoundTripKeepsPositiveZero) {
  check(R"(# lathe 1
graph {
  in %0 x0 : f32[5, 11]
  %1 = Log2(%0) : f32[5, 11]
  %2 = Cast(%1) : i32[5, 11]
  %3 = Cast(%2) : f32[5, 11]
  %4 = Recip(%3) : f32[5, 11]
  out y = %4
}
)");
}

TEST(Regressions, BoolArithmeticIsLogical) {
  check(R"(# lathe 1
graph {
  in %0 x0 : bool[11, 3, 1]
  %1 = Add(%0, %0) : bool[11, 3, 1]
  %2 = Copy(%1) : bool[11, 3, 1]
  %3 = CmpNE(%2, %2) : bool[11, 3, 1]
  %4 = Where(%3, %2, %2) : bool[11, 3, 1]
  %5 = Xor(%0, %4) : bool[11, 3, 1]
  out y = %5
}
)");
}

}  // namespace
}  // namespace lathe
