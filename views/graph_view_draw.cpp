// graph_view_draw.cpp — drawing the laid-out display graph with ImDrawList: bezier edges
// with arrowheads, rounded boxes coloured by op category, label lines scaled with the
// zoom, highlights (selection, search hits, hover) and the colour legend.
// Everything outside the visible rectangle is skipped, and text is skipped when it would
// be too small to read, so frame time stays flat for large graphs.
#include <algorithm>
#include <cmath>

#include "views/graph_view.h"

namespace lathe::views {

namespace {

void arrowhead(ImDrawList* dl, ImVec2 tip, ImVec2 from, float size, ImU32 col) {
  float dx = tip.x - from.x, dy = tip.y - from.y, len = std::sqrt(dx * dx + dy * dy);
  if (len < 1e-3f) return;
  dx /= len, dy /= len;
  ImVec2 base(tip.x - dx * size, tip.y - dy * size);
  float w = size * 0.45f;
  dl->AddTriangleFilled(tip, ImVec2(base.x - dy * w, base.y + dx * w), ImVec2(base.x + dy * w, base.y - dx * w), col);
}

}  // namespace

// The boxes the last rewrite step removed, faded at their old places with their old edges
// and the title struck through, under everything else.
void GraphView::draw_ghosts(ImDrawList* dl, ImVec2 origin) {
  if (!step_.ok || step_.ghosts.empty()) return;
  auto to_screen = [&](Point p) { return ImVec2(origin.x + (p.x - pan_.x) * zoom_, origin.y + (p.y - pan_.y) * zoom_); };
  float thick = std::clamp(1.2f * std::sqrt(zoom_), 0.8f, 2.5f);
  for (const auto& pts : step_.ghost_edges)
    for (size_t k = 0; k + 3 < pts.size(); k += 3)
      dl->AddBezierCubic(to_screen(pts[k]), to_screen(pts[k + 1]), to_screen(pts[k + 2]), to_screen(pts[k + 3]),
                         colors::kGhostEdge, thick, 0);
  const float font_px = fonts_.size * zoom_, line_h = (fonts_.size + 3.0f) * zoom_;
  const float round = std::min(5.0f * zoom_, 6.0f);
  for (const Ghost& g : step_.ghosts) {
    ImVec2 a = to_screen({g.center.x - g.w * 0.5f, g.center.y - g.h * 0.5f});
    ImVec2 z = to_screen({g.center.x + g.w * 0.5f, g.center.y + g.h * 0.5f});
    dl->AddRectFilled(a, z, colors::kGhostFill, round);
    dl->AddRect(a, z, colors::kGhost, round, 0, std::max(1.5f, 2.0f * std::sqrt(zoom_)));
    if (font_px < 5.0f) continue;
    for (size_t l = 0; l < g.lines.size(); ++l) {
      const char* t = g.lines[l].c_str();
      ImVec2 ts = fonts_.ui->CalcTextSizeA(font_px, FLT_MAX, 0, t);
      ImVec2 pos((a.x + z.x - ts.x) * 0.5f, a.y + 6.0f * zoom_ + l * line_h + 1.5f * zoom_);
      dl->AddText(fonts_.ui, font_px, pos, IM_COL32(235, 200, 200, l == 0 ? 220 : 150), t);
      if (l == 0)   // struck through: removed
        dl->AddLine(ImVec2(pos.x - 2, pos.y + ts.y * 0.55f), ImVec2(pos.x + ts.x + 2, pos.y + ts.y * 0.55f), colors::kGhost, 1.5f);
    }
  }
}

// Expanded scopes: a frame behind their contents, with a title bar that collapses it on
// a click. Inner frames come after (on top of) their parents; each level adds a little
// light, so depth reads at a glance.
void GraphView::draw_frames(AppState& s, ImDrawList* dl, ImVec2 origin) {
  s.view_frames = 0;
  if (!shown_ || !shown_layout_ || shown_layout_->frames.size() != shown_->frames.size()) return;
  ImVec2 cmax = dl->GetClipRectMax();
  float wx0 = pan_.x, wy0 = pan_.y, wx1 = pan_.x + (cmax.x - origin.x) / zoom_, wy1 = pan_.y + (cmax.y - origin.y) / zoom_;
  auto to_screen = [&](float x, float y) { return ImVec2(origin.x + (x - pan_.x) * zoom_, origin.y + (y - pan_.y) * zoom_); };
  const float font_px = fonts_.size * zoom_;
  const float round = std::min(6.0f * zoom_, 6.0f);
  for (size_t f = 0; f < shown_->frames.size(); ++f) {
    const FrameRect& r = shown_layout_->frames[f];
    ++s.view_frames;
    if (r.x1 < wx0 || r.x0 > wx1 || r.y1 < wy0 || r.y0 > wy1) continue;
    ImVec2 a = to_screen(r.x0, r.y0), z = to_screen(r.x1, r.y1), t = to_screen(r.x1, r.y0 + r.title_h);
    bool sel = shown_->frames[f].path == s.selected_group;
    // No fill inside: a blended rectangle over the whole frame (and again for each frame
    // nested in it) was a third of a pan frame's rasterizing on llvmpipe; the border and
    // the title bar show the nesting.
    dl->AddRectFilled(a, t, IM_COL32(70, 80, 108, 200), round, ImDrawFlags_RoundCornersTop);
    dl->AddRect(a, z, sel ? colors::kSelected : IM_COL32(92, 104, 138, 220), round, 0, sel ? 2.5f : 1.2f);
    if (font_px >= 5.0f) {
      const std::string& title = shown_->frames[f].title;
      ImVec2 pos(a.x + 6 * zoom_, a.y + (r.title_h - fonts_.size) * 0.5f * zoom_);
      dl->PushClipRect(a, t, true);
      dl->AddText(fonts_.ui, font_px, pos, colors::kText, title.c_str());
      if (zoom_ > 0.5f && "▼ " + shown_->frames[f].path != title) {   // the full path after the title, dimmed
        float tw = fonts_.ui->CalcTextSizeA(font_px, FLT_MAX, 0, title.c_str()).x;
        dl->AddText(fonts_.ui, font_px * 0.85f, ImVec2(pos.x + tw + 10 * zoom_, pos.y + font_px * 0.1f), colors::kTextDim,
                    shown_->frames[f].path.c_str());
      }
      dl->PopClipRect();
    }
  }
}

bool GraphView::draw_minimap(ImDrawList* dl, ImVec2 p0, ImVec2 size) {
  if (!shown_ || !shown_layout_ || shown_layout_->centers.empty()) return false;
  const Layout& L = *shown_layout_;
  float W = std::max(L.width, 1.0f), H = std::max(L.height, 1.0f);
  if (W * zoom_ <= size.x && H * zoom_ <= size.y) return false;   // all of it is in view
  float k = std::min(190.0f / W, 150.0f / H);
  float mw = std::max(W * k, 24.0f), mh = std::max(H * k, 24.0f);
  ImVec2 a(p0.x + size.x - mw - 12, p0.y + 10), z(a.x + mw, a.y + mh);
  dl->AddRectFilled(ImVec2(a.x - 4, a.y - 4), ImVec2(z.x + 4, z.y + 4), IM_COL32(16, 18, 22, 230), 4);
  auto m = [&](float x, float y) { return ImVec2(a.x + (x - L.x0) * k, a.y + (y - L.y0) * k); };
  if (mini_layout_ != shown_layout_ || mini_fills_ != fills_) {   // once per layout and colouring
    mini_layout_ = shown_layout_;
    mini_fills_ = fills_;
    mini_runs_.clear();
    const int gw = static_cast<int>(std::ceil(mw)), gh = static_cast<int>(std::ceil(mh));
    std::vector<ImU32> grid(static_cast<size_t>(gw) * gh, 0);
    auto paint = [&](float x0, float y0, float x1, float y1, ImU32 c) {   // layout coordinates
      int px0 = std::clamp(static_cast<int>((x0 - L.x0) * k), 0, gw - 1), py0 = std::clamp(static_cast<int>((y0 - L.y0) * k), 0, gh - 1);
      int px1 = std::clamp(static_cast<int>((x1 - L.x0) * k), px0, gw - 1), py1 = std::clamp(static_cast<int>((y1 - L.y0) * k), py0, gh - 1);
      for (int y = py0; y <= py1; ++y)
        for (int x = px0; x <= px1; ++x) grid[static_cast<size_t>(y) * gw + x] = c;
    };
    const ImU32 frame_col = IM_COL32(92, 104, 138, 160);
    for (const FrameRect& f : L.frames) {   // outlines: four one-pixel lines
      paint(f.x0, f.y0, f.x1, f.y0, frame_col), paint(f.x0, f.y1, f.x1, f.y1, frame_col);
      paint(f.x0, f.y0, f.x0, f.y1, frame_col), paint(f.x1, f.y0, f.x1, f.y1, frame_col);
    }
    if (shown_->nodes.size() <= 200000)
      for (size_t i = 0; i < shown_->nodes.size(); ++i) {
        const DisplayNode& b = shown_->nodes[i];
        paint(L.centers[i].x - b.w / 2, L.centers[i].y - b.h / 2, L.centers[i].x + b.w / 2, L.centers[i].y + b.h / 2,
              i < fills_.size() ? fills_[i] : b.fill);
      }
    for (int y = 0; y < gh; ++y)
      for (int x = 0; x < gw;) {
        ImU32 c = grid[static_cast<size_t>(y) * gw + x];
        int end = x + 1;
        while (end < gw && grid[static_cast<size_t>(y) * gw + end] == c) ++end;
        if (c) {
          bool merged = false;   // the same run on the row above: grow it
          for (auto it = mini_runs_.rbegin(); it != mini_runs_.rend() && it->y1 >= y; ++it)
            if (it->y1 == y && it->x0 == x && it->x1 == end && it->color == c) {
              it->y1 = y + 1;
              merged = true;
              break;
            }
          if (!merged) mini_runs_.push_back({static_cast<float>(x), static_cast<float>(y), static_cast<float>(end), static_cast<float>(y + 1), c});
        }
        x = end;
      }
  }
  for (const MiniRun& r : mini_runs_) dl->AddRectFilled(ImVec2(a.x + r.x0, a.y + r.y0), ImVec2(a.x + r.x1, a.y + r.y1), r.color);
  ImVec2 v0 = m(pan_.x, pan_.y), v1 = m(pan_.x + size.x / zoom_, pan_.y + size.y / zoom_);
  v0.x = std::max(v0.x, a.x - 4), v0.y = std::max(v0.y, a.y - 4), v1.x = std::min(v1.x, z.x + 4), v1.y = std::min(v1.y, z.y + 4);
  dl->AddRect(v0, v1, colors::kSelected, 0, 0, 1.5f);
  // A click or drag inside moves the view's centre there.
  ImGuiIO& io = ImGui::GetIO();
  auto inside = [&](ImVec2 p) { return p.x >= a.x - 4 && p.x <= z.x + 4 && p.y >= a.y - 4 && p.y <= z.y + 4; };
  if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && inside(io.MousePos) && ImGui::IsWindowHovered()) minimap_drag_ = true;
  if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) minimap_drag_ = false;
  if (minimap_drag_) {
    float wx = L.x0 + (io.MousePos.x - a.x) / k, wy = L.y0 + (io.MousePos.y - a.y) / k;
    pan_ = ImVec2(wx - size.x * 0.5f / zoom_, wy - size.y * 0.5f / zoom_);
  }
  return minimap_drag_ || inside(io.MousePos);
}

void GraphView::draw_boxes_and_edges(AppState& s, ImDrawList* dl, ImVec2 origin, int hovered) {
  if (!shown_ || !shown_layout_ || shown_layout_->centers.size() != shown_->nodes.size()) return;
  const Layout& L = *shown_layout_;
  const DisplayGraph& G = *shown_;
  ImVec2 canvas_max = dl->GetClipRectMax();
  // The visible world rectangle, for culling.
  float wx0 = pan_.x, wy0 = pan_.y;
  float wx1 = pan_.x + (canvas_max.x - origin.x) / zoom_, wy1 = pan_.y + (canvas_max.y - origin.y) / zoom_;
  auto to_screen = [&](Point p) { return ImVec2(origin.x + (p.x - pan_.x) * zoom_, origin.y + (p.y - pan_.y) * zoom_); };

  // Which box is selected (a node hidden in a collapsed composite selects its box; at the
  // kernel level, the selected kernel's box).
  const int sel_box = selected_box(s);
  update_colors(s);
  // A kernel selected: its boxes are outlined and the others dimmed a little.
  const bool kernel_focus = highlighted_ > 0 && s.level != Level::Kernel;
  std::vector<char> is_hit(G.nodes.size(), 0);
  for (int h : hits_) is_hit[h] = 1;

  // Zoomed far out (a whole large graph in view) nothing is legible anyway: skip
  // anti-aliasing, curves, arrowheads and rounded corners, which dominate the frame time
  // under software OpenGL with thousands of boxes.
  const bool far = zoom_ < 0.3f;
  const ImDrawListFlags saved_flags = dl->Flags;
  if (far) dl->Flags &= ~(ImDrawListFlags_AntiAliasedLines | ImDrawListFlags_AntiAliasedLinesUseTex | ImDrawListFlags_AntiAliasedFill);

  draw_frames(s, dl, origin);
  // Edges next, so boxes sit on top of their ends.
  float thick = std::clamp(1.4f * std::sqrt(zoom_), 0.8f, 3.0f);
  float arrow = 9.0f * zoom_;
  if (edge_bounds_layout_ != shown_layout_) {   // once per layout, not per frame
    edge_bounds_layout_ = shown_layout_;
    edge_bounds_.clear();
    edge_bounds_.reserve(L.edges.size());
    for (const LayoutEdge& e : L.edges) {
      float x0 = FLT_MAX, y0 = FLT_MAX, x1 = -FLT_MAX, y1 = -FLT_MAX;
      for (auto& p : e.bezier) x0 = std::min(x0, p.x), y0 = std::min(y0, p.y), x1 = std::max(x1, p.x), y1 = std::max(y1, p.y);
      if (e.has_head) x0 = std::min(x0, e.head.x), y0 = std::min(y0, e.head.y), x1 = std::max(x1, e.head.x), y1 = std::max(y1, e.head.y);
      edge_bounds_.push_back({x0, y0, x1, y1});
    }
  }
  for (size_t ei = 0; ei < L.edges.size(); ++ei) {
    const LayoutEdge& e = L.edges[ei];
    if (e.bezier.size() < 4) continue;
    const EdgeBounds& eb = edge_bounds_[ei];
    if (eb.x1 < wx0 || eb.x0 > wx1 || eb.y1 < wy0 || eb.y0 > wy1) continue;
    bool hot = sel_box >= 0 && (e.from == sel_box || e.to == sel_box);
    ImU32 col = hot ? colors::kEdgeHot : colors::kEdge;
    float t = hot ? thick * 1.8f : thick;
    if (far) {   // zoomed far out: straight runs through the spline's on-curve points
      ImVec2 pts[48];
      int np = 0;
      for (size_t k = 0; k < e.bezier.size() && np < 47; k += 3) pts[np++] = to_screen(e.bezier[k]);
      if (e.has_head) pts[np++] = to_screen(e.head);
      dl->AddPolyline(pts, np, col, 0, t);
      continue;
    }
    for (size_t k = 0; k + 3 < e.bezier.size(); k += 3) {
      // Each piece on its own: a long edge (an input read by every layer) crosses the view
      // with most of its pieces off screen, and tessellating those costs triangles.
      const Point* q = &e.bezier[k];
      float px0 = std::min({q[0].x, q[1].x, q[2].x, q[3].x}), px1 = std::max({q[0].x, q[1].x, q[2].x, q[3].x});
      float py0 = std::min({q[0].y, q[1].y, q[2].y, q[3].y}), py1 = std::max({q[0].y, q[1].y, q[2].y, q[3].y});
      if (px1 < wx0 || px0 > wx1 || py1 < wy0 || py0 > wy1) continue;
      dl->AddBezierCubic(to_screen(q[0]), to_screen(q[1]), to_screen(q[2]), to_screen(q[3]), col, t, 0);
    }
    if (e.has_head) arrowhead(dl, to_screen(e.head), to_screen(e.bezier.back()), arrow, col);
    else arrowhead(dl, to_screen(e.bezier.back()), to_screen(e.bezier[e.bezier.size() - 2]), arrow, col);
  }

  draw_ghosts(dl, origin);

  // Boxes.
  const float line_h = (fonts_.size + 3.0f) * zoom_, pad_y = 6.0f * zoom_;
  const float font_px = fonts_.size * zoom_;
  const bool text = font_px >= 5.0f;
  const float round = far ? 0.0f : std::min(5.0f * zoom_, 6.0f);
  size_t drawn = 0;
  for (size_t i = 0; i < G.nodes.size(); ++i) {
    const DisplayNode& b = G.nodes[i];
    Point c = L.centers[i];
    if (c.x + b.w * 0.5f < wx0 || c.x - b.w * 0.5f > wx1 || c.y + b.h * 0.5f < wy0 || c.y - b.h * 0.5f > wy1) continue;
    ImVec2 a = to_screen({c.x - b.w * 0.5f, c.y - b.h * 0.5f});
    ImVec2 z = to_screen({c.x + b.w * 0.5f, c.y + b.h * 0.5f});
    ++drawn;
    if (!b.group.empty()) {   // a composite: a second box behind it, like a stack of cards
      // (only its strips that show are filled: the box itself covers the rest)
      float o = 4.0f * zoom_;
      dl->AddRectFilled(ImVec2(z.x - round, a.y + o), ImVec2(z.x + o, z.y + o), IM_COL32(40, 44, 58, 255), round,
                        ImDrawFlags_RoundCornersRight);
      dl->AddRectFilled(ImVec2(a.x + o, z.y - round), ImVec2(z.x, z.y + o), IM_COL32(40, 44, 58, 255), round,
                        ImDrawFlags_RoundCornersBottomLeft);
      dl->AddRect(ImVec2(a.x + o, a.y + o), ImVec2(z.x + o, z.y + o), IM_COL32(90, 100, 130, 255), round);
    }
    ImU32 fill = i < fills_.size() ? fills_[i] : b.fill;
    if (kernel_focus && !in_kernel_[i]) fill = (fill & 0x00FFFFFF) | (150u << IM_COL32_A_SHIFT);
    dl->AddRectFilled(a, z, fill, round);
    bool sel = static_cast<int>(i) == sel_box || (b.kernel < 0 && b.group.empty() && static_cast<int>(b.rep) == s.selected) ||
               (!b.group.empty() && b.group == s.selected_group);
    if (kernel_focus && in_kernel_[i])   // provenance: a node of the selected kernel
      dl->AddRect(ImVec2(a.x - 4, a.y - 4), ImVec2(z.x + 4, z.y + 4), colors::kKernelHit, round + 4, 0, 2.5f);
    if (b.group.empty() && static_cast<int>(b.rep) == s.break_node)   // a breakpoint rule is about to rewrite it
      dl->AddRect(ImVec2(a.x - 6, a.y - 6), ImVec2(z.x + 6, z.y + 6), colors::kBreakpoint, round + 6, 0, 3.0f);
    if (sel) dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), colors::kSelected, round + 2, 0, 2.5f);
    else if (b.group.empty() && static_cast<int>(b.rep) == s.step_root)   // what the step made
      dl->AddRect(ImVec2(a.x - 3, a.y - 3), ImVec2(z.x + 3, z.y + 3), colors::kStepRoot, round + 3, 0, 3.0f);
    else if (step_.ok ? i < step_.added.size() && step_.added[i] : b.group.empty() && s.step_added.count(b.rep))
      dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), colors::kOk, round + 2, 0, 2.0f);
    else if (is_hit[i]) dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), colors::kSearchHit, round + 2, 0, 2.0f);
    else if (static_cast<int>(i) == hovered) dl->AddRect(a, z, colors::kHover, round, 0, 1.5f);
    else if (!far) dl->AddRect(a, z, b.group.empty() ? colors::kBorder : IM_COL32(120, 132, 170, 255), round);
    if (b.is_output) dl->AddRectFilled(ImVec2(a.x, z.y - 3 * zoom_), z, IM_COL32(255, 255, 255, 90), round, ImDrawFlags_RoundCornersBottom);
    if (step_.ok && i < step_.added.size() && step_.added[i] && zoom_ >= 0.3f) {   // "+": new in this step
      float r = 7.0f * std::sqrt(zoom_);
      ImVec2 c(z.x, a.y);
      dl->AddCircleFilled(c, r, colors::kAddedTag, 12);
      dl->AddLine(ImVec2(c.x - r * 0.55f, c.y), ImVec2(c.x + r * 0.55f, c.y), colors::kText, 1.8f);
      dl->AddLine(ImVec2(c.x, c.y - r * 0.55f), ImVec2(c.x, c.y + r * 0.55f), colors::kText, 1.8f);
    }
    if (!text) continue;
    for (size_t l = 0; l < b.lines.size(); ++l) {
      const std::string& t = b.lines[l];
      float w = fonts_.ui->CalcTextSizeA(font_px, FLT_MAX, 0, t.c_str()).x;
      ImVec2 pos((a.x + z.x - w) * 0.5f, a.y + pad_y + l * line_h + 1.5f * zoom_);
      ImU32 tc = l == 0 ? colors::kText : colors::kTextDim;
      if (kernel_focus && !in_kernel_[i]) tc = (tc & 0x00FFFFFF) | (170u << IM_COL32_A_SHIFT);
      dl->AddText(fonts_.ui, font_px, pos, tc, t.c_str());
    }
  }
  dl->Flags = saved_flags;
  s.view_drawn_boxes = drawn;
  s.view_text = text && drawn > 0;
}

}  // namespace lathe::views
