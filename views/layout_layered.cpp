// layout_layered.cpp — a fast provisional layout for graphs too large for dot to lay out
// in a few seconds (graph_layout.h: layered_layout).
//
// Boxes are put in rows by longest path from the sources, then each moves down to the row
// just above its first reader (so a weight sits beside the layer that reads it, not in the
// top row); rows wider than kMaxRow boxes wrap. One sweep down orders each
// row by the mean x of the boxes it reads, one sweep up orders sources by the mean x of
// their readers. Edges are straight lines with an arrowhead. Linear in boxes and edges
// (plus a sort per row): ~10 ms for 15,000 boxes, where dot needs one to two minutes.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "views/graph_layout.h"

namespace lathe::views {
namespace {

constexpr size_t kMaxRow = 48;    // boxes per row before it wraps
constexpr float kGapX = 22.0f;    // between boxes in a row
constexpr float kGapY = 40.0f;    // between rows

// Longest-path rank of each box; boxes on a cycle (possible once composites are folded)
// take one more than the ranks of the inputs already placed.
std::vector<int> rank_boxes(size_t n, const std::vector<std::vector<int>>& pred,
                            const std::vector<std::vector<int>>& succ) {
  std::vector<int> indeg(n), rank(n, 0), order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) indeg[i] = static_cast<int>(pred[i].size());
  std::vector<char> placed(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) order.push_back(static_cast<int>(i)), placed[i] = 1;
  for (size_t head = 0;; ++head) {
    if (head == order.size()) {   // what is left sits on cycles: place the first one
      size_t k = 0;
      while (k < n && placed[k]) ++k;
      if (k == n) break;
      order.push_back(static_cast<int>(k));
      placed[k] = 1;
    }
    int v = order[head];
    for (int p : pred[v])
      if (placed[p] && p != v) rank[v] = std::max(rank[v], rank[p] + 1);
    for (int w : succ[v])
      if (!placed[w] && --indeg[w] == 0) order.push_back(w), placed[w] = 1;
  }
  // Every box moves down to just above its first reader (readers first, so a chain of
  // views hanging off a weight follows the weight's reader down).
  for (size_t k = order.size(); k-- > 0;) {
    int v = order[k], lowest = -1;
    for (int w : succ[v])
      if (rank[w] > rank[v] && (lowest < 0 || rank[w] < lowest)) lowest = rank[w];
    if (lowest > rank[v] + 1) rank[v] = lowest - 1;
  }
  return rank;
}

}  // namespace

Layout layered_layout(const LayoutRequest& r) {
  auto t0 = std::chrono::steady_clock::now();
  Layout out;
  out.key = r.key;
  const size_t n = r.sizes.size();
  if (n == 0) return out;
  std::vector<std::vector<int>> pred(n), succ(n);
  for (auto& [a, b] : r.edges) succ[a].push_back(b), pred[b].push_back(a);
  std::vector<int> rank = rank_boxes(n, pred, succ);

  // Rows: each rank split into chunks of kMaxRow, in box order to start with.
  int ranks = *std::max_element(rank.begin(), rank.end()) + 1;
  std::vector<std::vector<int>> by_rank(ranks);
  for (size_t i = 0; i < n; ++i) by_rank[rank[i]].push_back(static_cast<int>(i));

  out.centers.assign(n, Point{});
  auto place_row = [&](const std::vector<int>& row) {   // x only, centred on 0
    float total = -kGapX;
    for (int v : row) total += r.sizes[v].first + kGapX;
    float x = -total / 2;
    for (int v : row) {
      out.centers[v].x = x + r.sizes[v].first / 2;
      x += r.sizes[v].first + kGapX;
    }
  };
  auto order_by = [&](std::vector<int>& row, const std::vector<std::vector<int>>& nbr, bool only_sources) {
    std::vector<std::pair<float, int>> keyed;
    keyed.reserve(row.size());
    for (int v : row) {
      float k = out.centers[v].x;
      if (!nbr[v].empty() && (!only_sources || pred[v].empty())) {
        float sum = 0;
        for (int w : nbr[v]) sum += out.centers[w].x;
        k = sum / nbr[v].size();
      }
      keyed.push_back({k, v});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < row.size(); ++i) row[i] = keyed[i].second;
    place_row(row);
  };
  for (auto& row : by_rank) place_row(row);
  for (auto& row : by_rank) order_by(row, pred, false);
  for (int k = ranks - 1; k >= 0; --k) order_by(by_rank[k], succ, true);

  // y: rows top to bottom, wrapping wide ranks.
  float y = 0, min_x = 0, max_x = 0;
  for (auto& row : by_rank) {
    for (size_t start = 0; start < row.size(); start += kMaxRow) {
      std::vector<int> chunk(row.begin() + start, row.begin() + std::min(row.size(), start + kMaxRow));
      if (row.size() > kMaxRow) place_row(chunk);
      float h = 0;
      for (int v : chunk) h = std::max(h, r.sizes[v].second);
      for (int v : chunk) {
        out.centers[v].y = y + h / 2;
        min_x = std::min(min_x, out.centers[v].x - r.sizes[v].first / 2);
        max_x = std::max(max_x, out.centers[v].x + r.sizes[v].first / 2);
      }
      y += h + kGapY;
    }
  }
  for (auto& c : out.centers) c.x -= min_x;
  out.width = max_x - min_x;
  out.height = std::max(0.0f, y - kGapY);

  // Edges: bottom centre to top centre, the last few units as the arrowhead.
  out.edges.reserve(r.edges.size());
  for (auto& [a, b] : r.edges) {
    LayoutEdge e;
    e.from = a, e.to = b;
    Point p = out.centers[a], q = out.centers[b];
    bool down = q.y > p.y;
    p.y += (down ? 1 : -1) * r.sizes[a].second / 2;
    q.y -= (down ? 1 : -1) * r.sizes[b].second / 2;
    Point tip = q;
    float dx = q.x - p.x, dy = q.y - p.y, len = std::max(1.0f, std::sqrt(dx * dx + dy * dy));
    float back = std::min(8.0f, len / 2);
    q = {q.x - dx / len * back, q.y - dy / len * back};
    e.bezier = {p, p, q, q};
    e.has_head = true, e.head = tip;
    out.edges.push_back(std::move(e));
  }
  out.provisional = true;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace lathe::views
