// layout_layered.cpp — the layout of nested frames and large graphs (graph_layout.h:
// nested_layout, layered_layout).
//
// Each frame (an expanded scope) is laid out on its own, innermost first, and is then one
// box of its parent's layout, so a layout costs about the sum of small ones and expanding
// one scope changes only the rows its frame sits in.
//
// One container's layout (layer()): boxes go in rows by longest path from the sources,
// then each moves down to the row just above its first reader; an edge that spans several
// rows gets a point in each row between (so it runs between boxes, not through them);
// sweeps down and up order each row by the mean position of its neighbours, and x follows
// the neighbours' mean with boxes kept apart. Rows wider than kMaxRow wrap. Edges are
// polylines through their points, drawn as curves with vertical tangents. Near linear:
// ~10-30 ms for 15,000 boxes, where dot needs one to two minutes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

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


constexpr float kFramePad = 12.0f;       // inside a frame, around its contents
constexpr size_t kMaxDummies = 40000;    // points of long edges, per container

// One container's graph: items (boxes or inner frames) and edges between them.
struct Local {
  std::vector<std::pair<float, float>> size;   // as drawn
  std::vector<std::pair<float, float>> base;   // as placed: a frame at its collapsed box's size
  std::vector<std::pair<float, float>> reach;  // as drawn, left and right of its centre
  std::vector<std::pair<int, int>> edges;
};
// x = 0 is the middle of the container's layout at base sizes, y = 0 its top: the items
// that did not grow keep their coordinates when one grows.
struct LocalLayout {
  std::vector<Point> center;                // per item
  std::vector<std::vector<Point>> routes;   // per edge: source bottom, points between, target top
  float lo = 0, hi = 0;                     // the drawn extent in x
  float h = 0;
};

LocalLayout layer(const Local& g) {
  LocalLayout out;
  const size_t n = g.size.size();
  out.routes.resize(g.edges.size());
  if (n == 0) return out;
  std::vector<std::vector<int>> pred(n), succ(n);
  for (auto& [a, b] : g.edges)
    if (a != b) succ[a].push_back(b), pred[b].push_back(a);
  std::vector<int> rank = rank_boxes(n, pred, succ);

  // Points for edges spanning rows (dummies), linked row to row.
  // Boxes are placed at their base sizes (w, h); then each row opens up for the items
  // drawn larger (aw, ah): frames of scopes that were boxes when collapsed.
  std::vector<int> node_rank = rank;
  std::vector<float> w(n), h(n), al(n), ar(n), ah(n);
  for (size_t i = 0; i < n; ++i) {
    ah[i] = g.size[i].second;
    al[i] = i < g.reach.size() ? g.reach[i].first : g.size[i].first / 2;
    ar[i] = i < g.reach.size() ? g.reach[i].second : g.size[i].first / 2;
    w[i] = i < g.base.size() ? g.base[i].first : g.size[i].first;
    h[i] = i < g.base.size() ? g.base[i].second : ah[i];
  }
  std::vector<std::vector<int>> up(n), down(n);   // unit-row links (including dummies)
  // Edges from one box share their points row by row (a trunk that branches off at each
  // reader), so a value read by ten boxes below is one line, not ten.
  std::vector<std::vector<int>> chain(g.edges.size());
  std::unordered_map<uint64_t, int> trunk;   // (source, row) -> its point there
  size_t dummies = 0;
  for (size_t e = 0; e < g.edges.size(); ++e) {
    auto [a, b] = g.edges[e];
    chain[e] = {a};
    if (a != b && rank[b] > rank[a] + 1 && dummies + (rank[b] - rank[a]) < kMaxDummies) {
      int prev = a;
      for (int k = rank[a] + 1; k < rank[b]; ++k) {
        uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(k);
        auto [it, fresh] = trunk.try_emplace(key, static_cast<int>(node_rank.size()));
        int d = it->second;
        if (fresh) {
          node_rank.push_back(k);
          w.push_back(6.0f), h.push_back(0.0f);
          up.emplace_back(), down.emplace_back();
          down[prev].push_back(d), up[d].push_back(prev);
          ++dummies;
        }
        chain[e].push_back(d);
        prev = d;
      }
      down[prev].push_back(b), up[b].push_back(prev);
    } else if (a != b && rank[b] == rank[a] + 1) {
      down[a].push_back(b), up[b].push_back(a);
    }
    chain[e].push_back(b);
  }
  const size_t total = node_rank.size();
  int ranks = *std::max_element(node_rank.begin(), node_rank.end()) + 1;
  std::vector<std::vector<int>> rows(ranks);
  for (size_t v = 0; v < total; ++v) rows[node_rank[v]].push_back(static_cast<int>(v));

  // Order: barycentre sweeps on positions within rows.
  std::vector<float> pos(total);
  auto number = [&](const std::vector<int>& row) {
    for (size_t i = 0; i < row.size(); ++i) pos[row[i]] = static_cast<float>(i);
  };
  for (auto& row : rows) number(row);
  auto sort_row = [&](std::vector<int>& row, const std::vector<std::vector<int>>& nbr) {
    std::vector<std::pair<float, int>> keyed;
    keyed.reserve(row.size());
    for (int v : row) {
      float k = pos[v];
      if (!nbr[v].empty()) {
        float sum = 0;
        for (int u : nbr[v]) sum += pos[u];
        // scale the neighbours' positions to this row's width so rows of different length line up
        k = sum / nbr[v].size();
      }
      keyed.push_back({k, v});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](auto& x, auto& y) { return x.first < y.first; });
    for (size_t i = 0; i < row.size(); ++i) row[i] = keyed[i].second;
    number(row);
  };
  for (int it = 0; it < 3; ++it) {
    for (int k = 1; k < ranks; ++k) sort_row(rows[k], up);
    for (int k = ranks - 2; k >= 0; --k) sort_row(rows[k], down);
  }

  // x: each box at the mean of its neighbours, kept apart in row order.
  std::vector<float> x(total, 0);
  auto sep = [&](int a, int b) { return (w[a] + w[b]) * 0.5f + (h[a] > 0 && h[b] > 0 ? kGapX : 8.0f); };
  auto pack = [&](const std::vector<int>& row) {
    float at = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) at += sep(row[i - 1], row[i]);
      x[row[i]] = at;
    }
    float mid = at * 0.5f;
    for (int v : row) x[v] -= mid;
  };
  for (auto& row : rows) pack(row);
  auto follow = [&](const std::vector<int>& row, const std::vector<std::vector<int>>& nbr) {
    if (row.empty()) return;
    std::vector<float> want(row.size());
    std::vector<char> has(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      int v = row[i];
      want[i] = x[v];
      if (!nbr[v].empty()) {
        float sum = 0;
        for (int u : nbr[v]) sum += x[u];
        want[i] = sum / nbr[v].size();
        has[i] = 1;
      }
    }
    // Left to right at the wanted place or just right of the previous box, then right to
    // left pulling boxes pushed right back toward theirs; then the row shifts as a whole.
    std::vector<float> nx(row.size());
    for (size_t i = 0; i < row.size(); ++i)
      nx[i] = i ? std::max(want[i], nx[i - 1] + sep(row[i - 1], row[i])) : want[i];
    for (size_t i = row.size() - 1; i-- > 0;)
      nx[i] = std::max(std::min(nx[i], nx[i + 1] - sep(row[i], row[i + 1])), i ? nx[i - 1] + sep(row[i - 1], row[i]) : -1e30f);
    float shift = 0;
    int cnt = 0;
    for (size_t i = 0; i < row.size(); ++i)
      if (has[i]) shift += want[i] - nx[i], ++cnt;
    if (cnt) shift /= cnt;
    for (size_t i = 0; i < row.size(); ++i) x[row[i]] = nx[i] + shift;
  };
  for (int it = 0; it < 4; ++it) {
    for (int k = 1; k < ranks; ++k)
      if (rows[k].size() <= kMaxRow) follow(rows[k], up);
    for (int k = ranks - 2; k >= 0; --k)
      if (rows[k].size() <= kMaxRow) follow(rows[k], down);
  }

  // y: rows top to bottom; rows wider than kMaxRow wrap into several (packed, centred).
  // An item drawn larger than placed keeps its top and centre: the row grows downward
  // (the rows below all move down by as much) and the row's other items step aside by its
  // extra reach on their side, so nothing outside it moves otherwise.
  std::vector<std::vector<int>> chunks;
  for (auto& row : rows)
    for (size_t start = 0; start < row.size(); start += kMaxRow) {
      chunks.emplace_back(row.begin() + start, row.begin() + std::min(row.size(), start + kMaxRow));
      if (row.size() > kMaxRow) pack(chunks.back());
    }
  float bmin = 1e30f, bmax = -1e30f;   // the extent at base sizes: its middle is x = 0
  for (size_t v = 0; v < total; ++v) bmin = std::min(bmin, x[v] - w[v] / 2), bmax = std::max(bmax, x[v] + w[v] / 2);
  const float mid = (bmin + bmax) / 2;
  for (float& xv : x) xv -= mid;
  const int nn = static_cast<int>(n);
  auto left = [&](int v) { return v < nn ? al[v] : w[v] / 2; };
  auto right = [&](int v) { return v < nn ? ar[v] : w[v] / 2; };
  auto drawn_h = [&](int v) { return v < nn ? ah[v] : h[v]; };
  std::vector<float> y(total, 0);
  float at_y = 0;
  for (auto& chunk : chunks) {
    float rh = 0;
    for (int v : chunk) rh = std::max(rh, h[v]);
    float need = rh;
    for (int v : chunk) {
      float top = (rh - h[v]) / 2;
      y[v] = at_y + top + drawn_h(v) / 2;
      need = std::max(need, top + drawn_h(v));
    }
    // Sideways: each item moves by the extra reach of the items to its left (leftward)
    // and to its right (rightward).
    float lefts = 0;
    std::vector<float> shift(chunk.size());
    for (size_t k = 0; k < chunk.size(); ++k) {   // right-growth of items to the left
      int v = chunk[k];
      shift[k] = lefts;
      lefts += std::max(0.0f, right(v) - w[v] / 2);
    }
    float from_right = 0;
    for (size_t k = chunk.size(); k-- > 0;) {     // left-growth of items to the right
      int v = chunk[k];
      shift[k] -= from_right;
      from_right += std::max(0.0f, left(v) - w[v] / 2);
    }
    for (size_t k = 0; k < chunk.size(); ++k) x[chunk[k]] += shift[k];
    at_y += need + (rh > 0 ? kGapY : 12.0f);
  }
  float min_x = 1e30f, max_x = -1e30f;
  for (size_t v = 0; v < total; ++v)
    min_x = std::min(min_x, x[v] - left(static_cast<int>(v))), max_x = std::max(max_x, x[v] + right(static_cast<int>(v)));
  out.center.resize(n);
  for (size_t i = 0; i < n; ++i) out.center[i] = {x[i], y[i]};
  out.lo = min_x, out.hi = max_x;
  out.h = std::max(0.0f, at_y - kGapY);
  for (size_t e = 0; e < g.edges.size(); ++e) {
    const auto& c = chain[e];
    auto& r = out.routes[e];
    r.reserve(c.size());
    int a = c.front(), b = c.back();
    r.push_back({x[a], y[a] + drawn_h(a) / 2});
    for (size_t k = 1; k + 1 < c.size(); ++k) r.push_back({x[c[k]], y[c[k]]});
    r.push_back({x[b], y[b] - drawn_h(b) / 2});
  }
  return out;
}

// A polyline as cubic pieces with vertical tangents (smooth where it bends), ending a few
// units short of the target for the arrowhead.
void polyline_to_edge(const std::vector<Point>& p, LayoutEdge& e) {
  e.bezier.clear();
  if (p.size() < 2) return;
  e.bezier.push_back(p[0]);
  for (size_t k = 0; k + 1 < p.size(); ++k) {
    Point a = p[k], b = p[k + 1];
    if (k + 2 == p.size()) {   // the last piece stops short: the arrowhead covers the rest
      float dx = b.x - a.x, dy = b.y - a.y, len = std::max(1.0f, std::sqrt(dx * dx + dy * dy));
      float back = std::min(8.0f, len / 2);
      e.has_head = true, e.head = b;
      b = {b.x - dx / len * back, b.y - dy / len * back};
    }
    float t = (b.y - a.y) * 0.45f;
    if (std::fabs(b.y - a.y) < 1 || b.y < a.y) {   // sideways or upward: straight
      e.bezier.push_back({a.x + (b.x - a.x) / 3, a.y + (b.y - a.y) / 3});
      e.bezier.push_back({a.x + (b.x - a.x) * 2 / 3, a.y + (b.y - a.y) * 2 / 3});
    } else {
      e.bezier.push_back({a.x, a.y + t});
      e.bezier.push_back({b.x, b.y - t});
    }
    e.bezier.push_back(b);
  }
}

}  // namespace

Layout nested_layout(const LayoutRequest& r) {
  auto t0 = std::chrono::steady_clock::now();
  Layout out;
  out.key = r.key;
  const size_t n = r.sizes.size();
  const size_t nf = r.frame_parent.size();
  if (n == 0) return out;
  const bool nested = nf > 0 && r.box_frame.size() == n;
  const int root = static_cast<int>(nf);
  auto box_cont = [&](int i) { return nested && r.box_frame[i] >= 0 ? r.box_frame[i] : root; };
  auto frame_cont = [&](int f) { return r.frame_parent[f] >= 0 ? r.frame_parent[f] : root; };
  std::vector<int> depth(nf + 1, 0);   // frames come after their parents
  for (size_t f = 0; f < nf; ++f) depth[f] = frame_cont(static_cast<int>(f)) == root ? 1 : depth[frame_cont(static_cast<int>(f))] + 1;

  // Items per container: boxes as i, frames as n + f; each item's index in its container.
  // Items go in by order key (a frame's is the largest of its contents'), so a scope's
  // frame takes the place its collapsed box had.
  std::vector<uint64_t> key(n + nf);
  for (size_t i = 0; i < n; ++i) key[i] = r.box_order.size() == n ? r.box_order[i] : i;
  for (size_t f = 0; f < nf; ++f) key[n + f] = 0;
  for (size_t i = 0; i < n; ++i)
    for (int f = nested ? r.box_frame[i] : -1; f >= 0; f = r.frame_parent[f]) key[n + f] = std::max(key[n + f], key[i]);
  std::vector<int> items(n + nf);
  std::iota(items.begin(), items.end(), 0);
  std::stable_sort(items.begin(), items.end(), [&](int a, int b) { return key[a] < key[b]; });
  std::vector<Local> local(nf + 1);
  std::vector<int> slot(n + nf, -1);
  for (int it : items) {
    bool frame = it >= static_cast<int>(n);
    Local& L = local[frame ? frame_cont(it - static_cast<int>(n)) : box_cont(it)];
    slot[it] = static_cast<int>(L.size.size());
    L.size.push_back(frame ? std::pair<float, float>{0, 0} : r.sizes[it]);   // a frame's: once laid out
    L.base.push_back(L.size.back());
    L.reach.push_back({L.size.back().first / 2, L.size.back().first / 2});
  }

  // Each edge runs in the innermost container holding both ends, between the items there
  // that contain them (edges between the same two items share one route).
  struct EdgeAt {
    int cont, local_edge, item_a, item_b;
  };
  std::vector<EdgeAt> at(r.edges.size());
  std::vector<std::unordered_map<uint64_t, int>> seen(nf + 1);
  for (size_t e = 0; e < r.edges.size(); ++e) {
    int ia = r.edges[e].first, ib = r.edges[e].second;
    int ca = box_cont(ia), cb = box_cont(ib);
    while (ca != cb) {
      if (depth[ca == root ? nf : ca] >= depth[cb == root ? nf : cb] && ca != root) ia = static_cast<int>(n) + ca, ca = frame_cont(ca);
      else ib = static_cast<int>(n) + cb, cb = frame_cont(cb);
    }
    at[e] = {ca, -1, ia, ib};
    if (ia == ib) continue;
    uint64_t k = (uint64_t(uint32_t(slot[ia])) << 32) | uint32_t(slot[ib]);
    auto [it, fresh] = seen[ca].try_emplace(k, static_cast<int>(local[ca].edges.size()));
    if (fresh) local[ca].edges.push_back({slot[ia], slot[ib]});
    at[e].local_edge = it->second;
  }

  // Innermost frames first; each frame's size goes into its parent's items.
  std::vector<int> order(nf);
  for (size_t f = 0; f < nf; ++f) order[f] = static_cast<int>(f);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return depth[a] > depth[b]; });
  std::vector<LocalLayout> laid(nf + 1);
  // A frame reaches from its contents' drawn extent (x = 0 at its slot's centre) plus a
  // margin, and at least as far right as its title needs.
  std::vector<float> fl(nf), fr(nf), fh(nf);
  for (int f : order) {
    laid[f] = layer(local[f]);
    fl[f] = -laid[f].lo + kFramePad;
    fr[f] = std::max(laid[f].hi, laid[f].lo + r.frame_title_w[f] + 8) + kFramePad;
    fh[f] = laid[f].h + 2 * kFramePad + r.title_h;
    Local& P = local[frame_cont(f)];
    P.size[slot[n + f]] = {fl[f] + fr[f], fh[f]};
    P.reach[slot[n + f]] = {fl[f], fr[f]};
    bool known = static_cast<size_t>(f) < r.frame_base.size() && r.frame_base[f].first > 0;
    P.base[slot[n + f]] = known ? r.frame_base[f] : P.size[slot[n + f]];
  }
  laid[root] = layer(local[root]);

  // Absolute places, parents first: a frame's contents sit under its title, x = 0 at the
  // centre of its slot in the parent's rows; the drawing starts at x = 0.
  std::vector<Point> origin(nf + 1, Point{0, 0});
  origin[root] = {-laid[root].lo, 0};
  out.frames.resize(nf);
  for (size_t f = 0; f < nf; ++f) {
    int p = frame_cont(static_cast<int>(f));
    Point c = laid[p].center[slot[n + f]];
    float cx = origin[p].x + c.x, y0 = origin[p].y + c.y - fh[f] / 2;
    out.frames[f] = {cx - fl[f], y0, cx + fr[f], y0 + fh[f], r.title_h};
    origin[f] = {cx, y0 + r.title_h + kFramePad};
  }
  out.centers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int c = box_cont(static_cast<int>(i));
    Point p = laid[c].center[slot[i]];
    out.centers[i] = {origin[c].x + p.x, origin[c].y + p.y};
  }
  out.width = laid[root].hi - laid[root].lo;
  out.height = laid[root].h;

  out.edges.reserve(r.edges.size());
  std::vector<Point> pts;
  for (size_t e = 0; e < r.edges.size(); ++e) {
    LayoutEdge le;
    le.from = r.edges[e].first, le.to = r.edges[e].second;
    Point a = out.centers[le.from], b = out.centers[le.to];
    a.y += r.sizes[le.from].second / 2;
    b.y -= r.sizes[le.to].second / 2;
    pts.clear();
    pts.push_back(a);
    const EdgeAt& ea = at[e];
    if (ea.local_edge >= 0) {
      const auto& route = laid[ea.cont].routes[ea.local_edge];
      Point o = origin[ea.cont];
      if (ea.item_a >= static_cast<int>(n)) pts.push_back({a.x, out.frames[ea.item_a - n].y1});
      for (size_t k = 1; k + 1 < route.size(); ++k) pts.push_back({o.x + route[k].x, o.y + route[k].y});
      if (ea.item_b >= static_cast<int>(n)) pts.push_back({b.x, out.frames[ea.item_b - n].y0});
    }
    pts.push_back(b);
    polyline_to_edge(pts, le);
    out.edges.push_back(std::move(le));
  }
  out.layered = true;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

Layout layered_layout(const LayoutRequest& r) {
  Layout out = nested_layout(r);
  out.provisional = true;
  return out;
}

}  // namespace lathe::views
