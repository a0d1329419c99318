// redraw_test.cpp — the rectangle arithmetic behind clearing each pixel once
// (views/redraw.h): subtract() leaves exactly the pixels of the rectangles outside the
// cut, as disjoint rectangles, checked pixel by pixel on random cases.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "views/redraw.h"

namespace lathe::views {
namespace {

TEST(ClearRects, SubtractLeavesExactlyThePixelsOutsideTheCut) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> at(0, 40);
  for (int trial = 0; trial < 500; ++trial) {
    auto rect = [&] {
      int x0 = at(rng), y0 = at(rng);
      return ClearRect{x0, y0, x0 + at(rng) / 2, y0 + at(rng) / 2};
    };
    std::vector<ClearRect> parts{rect()};
    std::vector<ClearRect> cuts{rect(), rect(), rect()};
    ClearRect first = parts[0];
    for (const ClearRect& c : cuts) parts = subtract(parts, c);
    std::vector<int> count(64 * 64, 0);
    for (const ClearRect& p : parts) {
      ASSERT_FALSE(p.empty());
      for (int y = p.y0; y < p.y1; ++y)
        for (int x = p.x0; x < p.x1; ++x) ++count[y * 64 + x];
    }
    for (int y = 0; y < 64; ++y)
      for (int x = 0; x < 64; ++x) {
        auto in = [&](const ClearRect& r) { return x >= r.x0 && x < r.x1 && y >= r.y0 && y < r.y1; };
        bool want = in(first) && !in(cuts[0]) && !in(cuts[1]) && !in(cuts[2]);
        ASSERT_EQ(count[y * 64 + x], want ? 1 : 0) << "trial " << trial << " pixel " << x << "," << y;
      }
  }
}

TEST(ClearRects, IntersectAndEmpty) {
  EXPECT_EQ(intersect({0, 0, 10, 10}, {5, 5, 20, 20}), (ClearRect{5, 5, 10, 10}));
  EXPECT_TRUE(intersect({0, 0, 10, 10}, {10, 0, 20, 10}).empty());
  EXPECT_TRUE(subtract({{2, 2, 8, 8}}, {0, 0, 10, 10}).empty());
  EXPECT_EQ(subtract({{0, 0, 10, 10}}, {20, 20, 30, 30}).size(), 1u);
}

}  // namespace
}  // namespace lathe::views
