// layout_diff.cpp — a stable layout for the next version of a graph (see layout_diff.h).
//
// [SECTION] box identity across versions
// [SECTION] placing new boxes
// [SECTION] edges and ghosts
#include "views/layout_diff.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <unordered_map>

namespace lathe::views {

namespace {

// More than this share of the new boxes without an old place: lay out afresh.
constexpr float kMaxNewShare = 0.35f;
constexpr float kGapX = 22.0f, kGapY = 29.0f;   // dot's nodesep / ranksep (0.3 in, 0.4 in) in points

//-----------------------------------------------------------------------------
// [SECTION] box identity across versions
//-----------------------------------------------------------------------------

// A key per box that names the same thing in both versions: the (old) node of a single
// box, a composite's path and how many boxes of that path precede it, and for the copies
// of a scalar constant, the constant and the box it feeds. `was` maps a new node to the
// old one whose place it takes (empty for the old version).
std::vector<std::string> box_keys(const DisplayGraph& g, const std::unordered_map<uint32_t, uint32_t>& was) {
  const size_t n = g.nodes.size();
  std::vector<std::string> key(n);
  std::vector<int> first_user(n, -1);
  for (const DisplayEdge& e : g.edges)
    if (first_user[e.from] < 0) first_user[e.from] = e.to;
  std::unordered_map<std::string, int> seen_groups;
  std::vector<char> is_const(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const DisplayNode& b = g.nodes[i];
    if (b.kernel >= 0) {
      key[i] = "k" + std::to_string(b.kernel);
    } else if (!b.group.empty()) {
      key[i] = "g" + b.group + "#" + std::to_string(seen_groups[b.group]++);
    } else {
      auto w = was.find(b.rep);
      key[i] = "n" + std::to_string(w == was.end() ? b.rep : w->second);
      NodeRef nd = node_by_id(b.rep);
      is_const[i] = nd && nd->is_scalar_const() && first_user[i] >= 0;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (is_const[i]) key[i] += ">" + key[first_user[i]];
  return key;
}

//-----------------------------------------------------------------------------
// [SECTION] placing new boxes
//-----------------------------------------------------------------------------

struct Rect {
  float x0, y0, x1, y1;
};

Rect rect_of(Point c, float w, float h) { return {c.x - w * 0.5f, c.y - h * 0.5f, c.x + w * 0.5f, c.y + h * 0.5f}; }

bool overlaps(const Rect& a, const Rect& b) {
  return a.x0 < b.x1 + kGapX * 0.5f && b.x0 < a.x1 + kGapX * 0.5f && a.y0 < b.y1 + kGapY * 0.3f && b.y0 < a.y1 + kGapY * 0.3f;
}

// A spot for a box of size w × h near `want`: the first free one going sideways
// (alternately right and left), then a rank lower.
Point free_spot(Point want, float w, float h, const std::vector<Rect>& taken) {
  for (int row = 0; row < 6; ++row)
    for (int step = 0; step < 40; ++step) {
      float dx = (step + 1) / 2 * (w + kGapX) * (step % 2 ? 1.0f : -1.0f);
      Point p{want.x + dx, want.y + row * (h + kGapY)};
      Rect r = rect_of(p, w, h);
      bool clear = true;
      for (const Rect& t : taken)
        if (overlaps(r, t)) {
          clear = false;
          break;
        }
      if (clear) return p;
    }
  return want;
}

//-----------------------------------------------------------------------------
// [SECTION] edges and ghosts
//-----------------------------------------------------------------------------

// A downward curve from the bottom of box a to the top of box b, ending in an arrowhead.
LayoutEdge short_curve(int from, int to, Point a, float ah, Point b, float bh) {
  LayoutEdge e;
  e.from = from, e.to = to;
  Point p0{a.x, a.y + ah * 0.5f}, head{b.x, b.y - bh * 0.5f};
  Point p3{head.x, head.y - 9.0f};
  float dy = std::max(std::fabs(p3.y - p0.y) * 0.45f, 12.0f);
  e.bezier = {p0, {p0.x, p0.y + dy}, {p3.x, p3.y - dy}, p3};
  e.has_head = true, e.head = head;
  return e;
}

}  // namespace

size_t count_moved(const DisplayGraph& before, const Layout& before_layout, const DisplayGraph& after,
                   const Layout& after_layout, const AppState::VersionDiff& diff) {
  if (before_layout.centers.size() != before.nodes.size() || after_layout.centers.size() != after.nodes.size()) return 0;
  std::vector<std::string> old_keys = box_keys(before, {}), new_keys = box_keys(after, diff.was);
  std::unordered_map<std::string, int> old_box;
  for (size_t i = 0; i < old_keys.size(); ++i) old_box.emplace(old_keys[i], static_cast<int>(i));
  size_t moved = 0;
  for (size_t i = 0; i < new_keys.size(); ++i) {
    auto it = old_box.find(new_keys[i]);
    if (it == old_box.end()) continue;
    Point a = before_layout.centers[it->second], b = after_layout.centers[i];
    if (std::fabs(a.x - b.x) > 1.0f || std::fabs(a.y - b.y) > 1.0f) ++moved;
  }
  return moved;
}

StepLayout layout_step(const DisplayGraph& before, const Layout& before_layout, const DisplayGraph& after,
                       const AppState::VersionDiff& diff) {
  StepLayout out;
  if (before_layout.centers.size() != before.nodes.size() || after.nodes.empty()) return out;
  const size_t n = after.nodes.size();
  std::vector<std::string> old_keys = box_keys(before, {}), new_keys = box_keys(after, diff.was);
  std::unordered_map<std::string, int> old_box;
  for (size_t i = 0; i < old_keys.size(); ++i) old_box.emplace(old_keys[i], static_cast<int>(i));

  // 1. Boxes that stay: their old centres.
  std::vector<int> old_of(n, -1);
  std::vector<char> old_taken(before.nodes.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    auto it = old_box.find(new_keys[i]);
    if (it == old_box.end() || old_taken[it->second]) continue;
    old_of[i] = it->second;
    old_taken[it->second] = 1;
  }
  size_t fresh = std::count(old_of.begin(), old_of.end(), -1);
  if (fresh > std::max<size_t>(4, static_cast<size_t>(kMaxNewShare * n))) return out;

  auto layout = std::make_shared<Layout>();
  layout->key = after.key;
  layout->centers.resize(n);
  std::vector<char> placed(n, 0);
  std::vector<Rect> taken;
  for (size_t i = 0; i < n; ++i)
    if (old_of[i] >= 0) {
      layout->centers[i] = before_layout.centers[old_of[i]];
      placed[i] = 1;
      taken.push_back(rect_of(layout->centers[i], after.nodes[i].w, after.nodes[i].h));
      ++out.kept;
    }

  // 2. Ghosts: old boxes nobody took whose nodes left the graph. They keep their places
  //    (new boxes go beside them), so the step reads as "this was here, now that".
  std::vector<char> ghost(before.nodes.size(), 0);
  for (size_t j = 0; j < before.nodes.size(); ++j) {
    const DisplayNode& b = before.nodes[j];
    if (old_taken[j]) continue;
    bool gone = std::any_of(b.members.begin(), b.members.end(), [&](uint32_t id) { return diff.removed.count(id) > 0; });
    if (!gone) continue;
    ghost[j] = 1;
    out.ghosts.push_back({b.lines, before_layout.centers[j], b.w, b.h});
    taken.push_back(rect_of(before_layout.centers[j], b.w, b.h));
  }

  // 3. New boxes, in topological order: under their placed operands (above their placed
  //    users when they have no operands), in the first free spot.
  std::vector<std::vector<int>> preds(n), succs(n);
  for (const DisplayEdge& e : after.edges) preds[e.to].push_back(e.from), succs[e.from].push_back(e.to);
  for (size_t i = 0; i < n; ++i) {
    if (placed[i]) continue;
    const DisplayNode& b = after.nodes[i];
    float sx = 0, bottom = -FLT_MAX, top = FLT_MAX;
    int np = 0, ns = 0;
    for (int p : preds[i])
      if (placed[p]) sx += layout->centers[p].x, ++np, bottom = std::max(bottom, layout->centers[p].y + after.nodes[p].h * 0.5f);
    for (int q : succs[i])
      if (placed[q]) {
        if (np == 0) sx += layout->centers[q].x;
        ++ns, top = std::min(top, layout->centers[q].y - after.nodes[q].h * 0.5f);
      }
    Point want{0, 0};
    auto w = b.group.empty() ? diff.replaced.find(b.rep) : diff.replaced.end();
    int replaced = -1;   // the old box (a ghost now) of the node this one stands in for
    if (w != diff.replaced.end())
      if (auto it = old_box.find("n" + std::to_string(w->second)); it != old_box.end()) replaced = it->second;
    if (replaced >= 0) want = before_layout.centers[replaced];
    else if (np > 0) want = {sx / np, bottom + kGapY + b.h * 0.5f};
    else if (ns > 0) want = {sx / ns, top - kGapY - b.h * 0.5f};
    else want = {before_layout.x0 + before_layout.width + kGapX + b.w * 0.5f, before_layout.y0 + b.h};
    layout->centers[i] = free_spot(want, b.w, b.h, taken);
    taken.push_back(rect_of(layout->centers[i], b.w, b.h));
    placed[i] = 1;
    ++out.placed;
  }

  // 4. Edges: an old spline where both ends stayed and were joined before, else a curve.
  std::unordered_map<uint64_t, const LayoutEdge*> old_edges;
  for (const LayoutEdge& e : before_layout.edges)
    old_edges.emplace((uint64_t(uint32_t(e.from)) << 32) | uint32_t(e.to), &e);
  for (const DisplayEdge& e : after.edges) {
    const LayoutEdge* old = nullptr;
    if (old_of[e.from] >= 0 && old_of[e.to] >= 0) {
      auto it = old_edges.find((uint64_t(uint32_t(old_of[e.from])) << 32) | uint32_t(old_of[e.to]));
      if (it != old_edges.end()) old = it->second;
    }
    if (old) {
      LayoutEdge copy = *old;
      copy.from = e.from, copy.to = e.to;
      layout->edges.push_back(std::move(copy));
    } else {
      layout->edges.push_back(short_curve(e.from, e.to, layout->centers[e.from], after.nodes[e.from].h,
                                          layout->centers[e.to], after.nodes[e.to].h));
    }
  }

  // 5. The extent (ghosts included), and the ghosts' old edges.
  float x0 = FLT_MAX, y0 = FLT_MAX, x1 = -FLT_MAX, y1 = -FLT_MAX;
  for (const Rect& r : taken) x0 = std::min(x0, r.x0), y0 = std::min(y0, r.y0), x1 = std::max(x1, r.x1), y1 = std::max(y1, r.y1);
  layout->x0 = std::min(x0, before_layout.x0);
  layout->y0 = std::min(y0, before_layout.y0);
  layout->width = std::max(x1, before_layout.x0 + before_layout.width) - layout->x0;
  layout->height = std::max(y1, before_layout.y0 + before_layout.height) - layout->y0;
  for (const LayoutEdge& e : before_layout.edges)
    if ((ghost[e.from] || ghost[e.to]) && e.bezier.size() >= 4) out.ghost_edges.push_back(e.bezier);

  out.added.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const DisplayNode& b = after.nodes[i];
    out.added[i] = old_of[i] < 0 && std::any_of(b.members.begin(), b.members.end(),
                                                [&](uint32_t id) { return diff.added.count(id) > 0; });
  }
  layout->seconds = 0;
  out.layout = std::move(layout);
  out.ok = true;
  return out;
}

}  // namespace lathe::views
