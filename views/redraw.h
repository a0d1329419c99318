// redraw.h — drawing only the part of the window that changed.
//
// Under software OpenGL (Mesa llvmpipe, as under Xvfb) shading the pixels is most of a
// frame. While the user pans or zooms the graph, only the graph panel changes: when every
// other draw list is the same as last frame's, the frame clips everything it draws to the
// graph panel's rectangle and keeps the rest of the back buffer. That needs a back buffer
// that keeps its pixels across a swap (llvmpipe's does; a GPU driver's that flips may
// not), so it is checked once at startup by reading pixels back before and after a swap;
// LATHE_GUI_FULL_REDRAW=1 turns it off.
#pragma once
#include <cstdint>
#include <vector>

#include <imgui.h>

namespace lathe::views {

// A rectangle of framebuffer pixels, [x0, x1) x [y0, y1), y from the top.
struct ClearRect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool empty() const { return x1 <= x0 || y1 <= y0; }
  bool operator==(const ClearRect& o) const { return x0 == o.x0 && y0 == o.y0 && x1 == o.x1 && y1 == o.y1; }
};
ClearRect intersect(ClearRect a, ClearRect b);
// The pixels of `rects` (disjoint) not in `cut`, as disjoint rectangles (no empty ones).
std::vector<ClearRect> subtract(const std::vector<ClearRect>& rects, ClearRect cut);

class PartialRedraw {
 public:
  // The rectangle (display coordinates) this frame must redraw: `region` when only the
  // draw lists whose window name starts with `owner` changed, else the whole display.
  ImVec4 plan(ImDrawData* dd, ImVec2 region_min, ImVec2 region_max, const char* owner, int fb_w, int fb_h);
  // Intersects every draw command's clip rectangle with `r`.
  static void clip(ImDrawData* dd, ImVec4 r);
  // The start-up check: call before and after the first swaps (reads pixels back).
  void probe_before_swap(int fb_w, int fb_h);
  void probe_after_swap(int fb_w, int fb_h);
  // The canvas (the graph view's drawing area, display coordinates) and what was drawn
  // on it: call after ImGui::Render. Marks the tiles of the canvas that the graph panel's
  // draw lists (`owner`) touch this frame.
  void track(ImDrawData* dd, ImVec2 canvas_min, ImVec2 canvas_max, const char* owner);
  // What of the canvas this frame must clear, in framebuffer pixels: on a partial redraw
  // with the canvas where it was, only the tiles drawn on last frame (the rest still has
  // the canvas colour); else all of it. Call before track().
  std::vector<ClearRect> canvas_clears(ImVec2 canvas_min, ImVec2 canvas_max, ImVec2 scale) const;
  // The next plan() draws the whole window.
  void invalidate() { invalid_ = true; }
  bool enabled() const { return enabled_; }
  bool last_partial() const { return last_partial_; }

 private:
  bool enabled_ = false;
  int probe_ = 0;                  // 0 = not yet, 1 = pixels read before the swap, 2 = done
  std::vector<unsigned char> before_;
  std::vector<uint64_t> sigs_;     // per draw list outside the region, last frame
  int fb_w_ = 0, fb_h_ = 0;
  bool last_partial_ = false;
  bool invalid_ = false;
  static constexpr int kTile = 32;   // display pixels
  ImVec2 tiles_min_{0, 0}, tiles_max_{0, 0};   // the canvas they cover
  int tiles_w_ = 0, tiles_h_ = 0;
  std::vector<char> tiles_;          // drawn on last frame
};

}  // namespace lathe::views
