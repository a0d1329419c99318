// theme.h — the app's look: a dark ImGui style, the DejaVu fonts and the colour keys
// that every window shares (op categories, selection, search hits, errors).
//
// Colours are ImU32 (0xAABBGGRR, ImGui's packing); use IM_COL32 to make new ones.
// Fonts are read at run time from fonts-dejavu-core; when a file is missing the
// ImGui default font is used instead, so the app never fails to start over a font.
#pragma once
#include <imgui.h>

#include "core/ir/ops.h"

namespace lathe::views {

struct Fonts {
  ImFont* ui = nullptr;     // DejaVuSans, the UI and graph labels
  ImFont* mono = nullptr;   // DejaVuSansMono, IR text, code and the console
  float size = 15.0f;       // pixel size the fonts were baked at
};

// Loads the fonts into the current ImGui context (call before the first frame).
Fonts load_fonts(float pixel_size = 15.0f);
// Installs the dark style on the current context.
void apply_dark_theme();

// Box fill for an op category (ops.h OpCategory), and for a collapsed composite group.
ImU32 category_color(OpCategory c);
ImU32 group_color();
// A colour for the k-th kernel (cycles through a qualitative palette).
ImU32 kernel_color(int k);
// Heat colour for t in [0, 1] (cool blue -> yellow -> red).
ImU32 heat_color(float t);
// Box fills for the kernel and heat colourings: kernel_color / heat_color darkened so the
// light label text stays readable on them.
ImU32 kernel_fill(int k);
// A small square of kernel k's colour at the cursor, then the cursor after it (table rows).
void kernel_swatch(int k);
ImU32 heat_fill(float t);
// A box that no kernel computes (inputs, constants) when colouring by kernel or heat.
constexpr ImU32 kNoKernelFill = IM_COL32(52, 56, 64, 255);

namespace colors {
constexpr ImU32 kCanvas     = IM_COL32(24, 26, 31, 255);
// The main window (the gaps between panels) and the panels. Neither is drawn by ImGui: the
// frame loop clears these areas (a clear costs llvmpipe far less than a blended quad).
constexpr ImU32 kWindowBg   = IM_COL32(27, 29, 34, 255);
constexpr ImU32 kPanelBg    = IM_COL32(32, 34, 40, 255);
constexpr ImU32 kGrid       = IM_COL32(36, 39, 46, 255);
constexpr ImU32 kEdge       = IM_COL32(150, 156, 170, 200);
constexpr ImU32 kEdgeHot    = IM_COL32(255, 214, 102, 255);
constexpr ImU32 kText       = IM_COL32(235, 238, 245, 255);
constexpr ImU32 kTextDim    = IM_COL32(190, 196, 210, 255);
constexpr ImU32 kBorder     = IM_COL32(10, 10, 12, 255);
constexpr ImU32 kSelected   = IM_COL32(255, 255, 255, 255);
constexpr ImU32 kSearchHit  = IM_COL32(255, 200, 40, 255);
constexpr ImU32 kHover      = IM_COL32(180, 200, 255, 255);
constexpr ImU32 kError      = IM_COL32(240, 90, 90, 255);
constexpr ImU32 kWarn       = IM_COL32(240, 190, 90, 255);
constexpr ImU32 kOk         = IM_COL32(120, 210, 130, 255);   // also: nodes a rewrite step added
constexpr ImU32 kStepRoot   = IM_COL32(90, 230, 120, 255);    // the node a rewrite step produced
constexpr ImU32 kKernelHit  = IM_COL32(80, 220, 255, 255);    // nodes of the selected kernel
constexpr ImU32 kBreakpoint = IM_COL32(235, 80, 215, 255);    // a breakpoint rule and the node it is about to rewrite
constexpr ImU32 kBreakRow   = IM_COL32(92, 34, 88, 255);      // the timeline's row of the rule a run stopped before
constexpr ImU32 kBusyFill   = IM_COL32(28, 62, 84, 255);      // the "compiling…" badge over the graph
constexpr ImU32 kGhost      = IM_COL32(232, 96, 96, 255);     // outline of a box the last rewrite step removed
constexpr ImU32 kGhostEdge  = IM_COL32(232, 96, 96, 110);
constexpr ImU32 kGhostFill  = IM_COL32(62, 38, 42, 255);      // its faded fill (whatever its category was)
constexpr ImU32 kAddedTag   = IM_COL32(60, 170, 80, 255);     // the "+" tag on a box the step added
}  // namespace colors

}  // namespace lathe::views
