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
  bool enabled() const { return enabled_; }
  bool last_partial() const { return last_partial_; }

 private:
  bool enabled_ = false;
  int probe_ = 0;                  // 0 = not yet, 1 = pixels read before the swap, 2 = done
  std::vector<unsigned char> before_;
  std::vector<uint64_t> sigs_;     // per draw list outside the region, last frame
  int fb_w_ = 0, fb_h_ = 0;
  bool last_partial_ = false;
};

}  // namespace lathe::views
