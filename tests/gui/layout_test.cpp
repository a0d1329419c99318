// layout_test.cpp — nested_layout (views/layout_layered.cpp): every box sits inside its
// frame, frames inside their parents, siblings do not overlap, edges run from a box's
// bottom to its reader's top, and expanding one frame keeps the order of the rest.
#include <gtest/gtest.h>

#include <random>

#include "views/graph_layout.h"

namespace lathe::views {
namespace {

struct Rect {
  float x0, y0, x1, y1;
};
bool inside(const Rect& a, const Rect& b) { return a.x0 >= b.x0 - 0.5f && a.y0 >= b.y0 - 0.5f && a.x1 <= b.x1 + 0.5f && a.y1 <= b.y1 + 0.5f; }
bool overlap(const Rect& a, const Rect& b) { return a.x0 < b.x1 - 0.5f && b.x0 < a.x1 - 0.5f && a.y0 < b.y1 - 0.5f && b.y0 < a.y1 - 0.5f; }

// A chain of `layers` scopes; layer k holds `per` boxes in a chain, frames for the layers
// listed in `open` (the others are one box each).
LayoutRequest layers_request(int layers, int per, const std::vector<int>& open) {
  LayoutRequest r;
  r.key = 1;
  int prev = -1;
  for (int k = 0; k < layers; ++k) {
    bool is_open = std::find(open.begin(), open.end(), k) != open.end();
    int f = -1;
    if (is_open) {
      f = static_cast<int>(r.frame_parent.size());
      r.frame_parent.push_back(-1);
      r.frame_title_w.push_back(60);
    }
    for (int j = 0; j < (is_open ? per : 1); ++j) {
      int b = static_cast<int>(r.sizes.size());
      r.sizes.push_back({120.0f + 7 * (j % 3), 46.0f});
      r.box_frame.push_back(f);
      if (prev >= 0) r.edges.push_back({prev, b});
      prev = b;
    }
  }
  if (r.frame_parent.empty()) r.box_frame.clear();
  return r;
}

Rect box_rect(const Layout& l, const LayoutRequest& r, int i) {
  return {l.centers[i].x - r.sizes[i].first / 2, l.centers[i].y - r.sizes[i].second / 2,
          l.centers[i].x + r.sizes[i].first / 2, l.centers[i].y + r.sizes[i].second / 2};
}

TEST(NestedLayout, BoxesSitInsideTheirFramesAndDoNotOverlap) {
  // Random nesting: 300 boxes in 40 frames up to 4 deep, random forward edges.
  std::mt19937 rng(7);
  LayoutRequest r;
  r.key = 2;
  for (int f = 0; f < 40; ++f) {
    r.frame_parent.push_back(f < 5 ? -1 : static_cast<int>(rng() % f));
    r.frame_title_w.push_back(40.0f + rng() % 80);
  }
  for (int i = 0; i < 300; ++i) {
    r.sizes.push_back({50.0f + rng() % 120, 30.0f + rng() % 30});
    r.box_frame.push_back(static_cast<int>(rng() % 41) - 1);
  }
  for (int i = 1; i < 300; ++i)
    for (int k = 0; k < 2; ++k) r.edges.push_back({static_cast<int>(rng() % i), i});
  Layout l = nested_layout(r);
  ASSERT_EQ(l.centers.size(), r.sizes.size());
  ASSERT_EQ(l.frames.size(), r.frame_parent.size());
  EXPECT_TRUE(l.layered);
  auto frame = [&](int f) { return Rect{l.frames[f].x0, l.frames[f].y0, l.frames[f].x1, l.frames[f].y1}; };
  for (size_t i = 0; i < r.sizes.size(); ++i)
    if (r.box_frame[i] >= 0) {
      EXPECT_TRUE(inside(box_rect(l, r, i), frame(r.box_frame[i]))) << "box " << i;
    }
  for (size_t f = 0; f < r.frame_parent.size(); ++f)
    if (r.frame_parent[f] >= 0) {
      EXPECT_TRUE(inside(frame(f), frame(r.frame_parent[f]))) << "frame " << f;
    }
  // Items of one container (boxes and frames with the same parent) never overlap.
  for (size_t i = 0; i < r.sizes.size(); ++i)
    for (size_t j = i + 1; j < r.sizes.size(); ++j)
      if (r.box_frame[i] == r.box_frame[j]) {
        EXPECT_FALSE(overlap(box_rect(l, r, i), box_rect(l, r, j))) << i << " " << j;
      }
  for (size_t f = 0; f < r.frame_parent.size(); ++f)
    for (size_t g = f + 1; g < r.frame_parent.size(); ++g)
      if (r.frame_parent[f] == r.frame_parent[g]) {
        EXPECT_FALSE(overlap(frame(f), frame(g))) << f << " " << g;
      }
  // Each edge leaves its source's bottom and ends (arrowhead) at its target's top.
  ASSERT_EQ(l.edges.size(), r.edges.size());
  for (size_t e = 0; e < r.edges.size(); ++e) {
    auto [a, b] = r.edges[e];
    const LayoutEdge& le = l.edges[e];
    ASSERT_GE(le.bezier.size(), 4u);
    ASSERT_EQ((le.bezier.size() - 1) % 3, 0u);
    EXPECT_NEAR(le.bezier.front().y, l.centers[a].y + r.sizes[a].second / 2, 0.5f);
    ASSERT_TRUE(le.has_head);
    EXPECT_NEAR(le.head.y, l.centers[b].y - r.sizes[b].second / 2, 0.5f);
  }
}

TEST(NestedLayout, ExpandingOneScopeKeepsTheOthersInOrder) {
  LayoutRequest closed = layers_request(12, 20, {});
  LayoutRequest opened = layers_request(12, 20, {3});
  Layout a = nested_layout(closed), b = nested_layout(opened);
  // Layers 0-2 are boxes 0-2 in both; layer 3 is a frame of 20 boxes in `opened`, so the
  // layer k > 3 is box k in `closed` and box k + 19 in `opened`.
  for (int k = 0; k < 12; ++k) {
    if (k == 3) continue;
    int i = k, j = k < 3 ? k : k + 19;
    EXPECT_NEAR(a.centers[i].x - a.centers[0].x, b.centers[j].x - b.centers[0].x, 1.0f) << "layer " << k << " moved sideways";
    if (k < 3) EXPECT_NEAR(a.centers[i].y, b.centers[j].y, 0.5f) << "layer " << k << " above the scope moved";
    else EXPECT_GT(b.centers[j].y, a.centers[i].y) << "layer " << k << " below the scope moves down";
  }
  // The frame holds the 20 boxes in a column.
  ASSERT_EQ(b.frames.size(), 1u);
  for (int j = 3; j < 23; ++j) EXPECT_TRUE(inside(box_rect(b, opened, j), {b.frames[0].x0, b.frames[0].y0, b.frames[0].x1, b.frames[0].y1}));
}

TEST(NestedLayout, EdgesFromOneBoxShareATrunk) {
  // One box read by ten boxes in a chain below it: one point per row, not one per edge.
  LayoutRequest r;
  r.key = 3;
  r.sizes.assign(11, {80.0f, 40.0f});
  for (int i = 1; i < 10; ++i) r.edges.push_back({i, i + 1});
  for (int i = 1; i <= 10; ++i) r.edges.push_back({0, i});
  Layout l = nested_layout(r);
  // The routes of 0 -> 5 and 0 -> 9 pass the same points in the rows they share.
  const LayoutEdge& e5 = l.edges[9 + 4];
  const LayoutEdge& e9 = l.edges[9 + 8];
  ASSERT_GE(e5.bezier.size(), 7u);
  EXPECT_NEAR(e5.bezier[3].x, e9.bezier[3].x, 0.01f);
  EXPECT_NEAR(e5.bezier[3].y, e9.bezier[3].y, 0.01f);
}

}  // namespace
}  // namespace lathe::views

namespace lathe::views {
namespace {

// A diamond of scopes: x -> A, B (side by side) -> C. Collapsed, A is one box; expanded,
// a frame of three boxes laid out with A's collapsed size as its base. The boxes outside
// it keep their places: x and C stay in their column (C lower by A's growth), B keeps its
// row and steps right by the frame's extra reach on that side.
LayoutRequest diamond(bool open) {
  LayoutRequest r;
  r.key = open ? 11 : 10;
  auto box = [&](float w, uint32_t order, int frame) {
    r.sizes.push_back({w, 46.0f});
    r.box_order.push_back(order);
    r.box_frame.push_back(frame);
    return static_cast<int>(r.sizes.size()) - 1;
  };
  int x = box(90, 1, -1);
  int a_first = -1, a_last = -1;
  if (open) {
    r.frame_parent.push_back(-1);
    r.frame_title_w.push_back(50);
    r.frame_base.push_back({150.0f, 62.0f});   // A's collapsed box
    a_first = box(200, 2, 0);
    int mid = box(160, 3, 0);
    a_last = box(180, 4, 0);
    r.edges.push_back({a_first, mid});
    r.edges.push_back({mid, a_last});
  } else {
    r.sizes.push_back({150.0f, 62.0f});
    r.box_order.push_back(4);
    r.box_frame.push_back(-1);
    a_first = a_last = static_cast<int>(r.sizes.size()) - 1;
  }
  int b = box(110, 5, -1);
  int c = box(100, 6, -1);
  r.edges.push_back({x, a_first});
  r.edges.push_back({x, b});
  r.edges.push_back({a_last, c});
  r.edges.push_back({b, c});
  if (!open) r.box_frame.clear(), r.frame_parent.clear();
  return r;
}

TEST(NestedLayout, ExpandingAScopeKeepsTheBoxesOutsideInPlace) {
  LayoutRequest rc = diamond(false), ro = diamond(true);
  Layout lc = nested_layout(rc), lo = nested_layout(ro);
  // Boxes x, B, C: indices 0, 2, 3 collapsed; 0, 4, 5 open.
  Point xc = lc.centers[0], bc = lc.centers[2], cc = lc.centers[3];
  Point xo = lo.centers[0], bo = lo.centers[4], co = lo.centers[5];
  ASSERT_EQ(lo.frames.size(), 1u);
  const FrameRect& f = lo.frames[0];
  // A's slot: the frame's top is the collapsed box's top, relative to x.
  Point ac = lc.centers[1];
  EXPECT_NEAR(f.y0 - xo.y, ac.y - 31.0f - xc.y, 0.5f);
  EXPECT_NEAR(co.x - xo.x, cc.x - xc.x, 0.5f) << "C stays under x";
  EXPECT_NEAR((co.y - xo.y) - (cc.y - xc.y), (f.y1 - f.y0) - 62.0f, 0.5f) << "C moves down by A's growth";
  EXPECT_NEAR(bo.y - 23.0f - xo.y, bc.y - 23.0f - xc.y, 0.5f) << "B keeps its row's top";
  // B is right of A: it steps right by the frame's reach beyond A's box on that side.
  ASSERT_GT(bc.x, ac.x);
  EXPECT_NEAR((bo.x - xo.x) - (bc.x - xc.x), (f.x1 - (ac.x - xc.x + xo.x)) - 75.0f, 0.5f);
  Rect br{bo.x - 55, bo.y - 23, bo.x + 55, bo.y + 23}, fr{f.x0, f.y0, f.x1, f.y1};
  EXPECT_FALSE(overlap(br, fr)) << "B clears the frame";
}

}  // namespace
}  // namespace lathe::views
