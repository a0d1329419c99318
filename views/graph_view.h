// graph_view.h — the graph window: the AppState's graph at the tensor, primitive or
// kernel level, laid out by Graphviz (graph_layout.h) and drawn with ImDrawList.
//
// Interaction:  drag = pan · wheel = zoom at the cursor · F or "Fit" = fit to window ·
//               click a box = select it (a collapsed scope expands in place, its frame's
//               title collapses it) · right-click = expand/collapse menu · hover =
//               tooltip · minimap (top right) = jump · search box: a name or id matches
//               exactly first, then op, input/output name, shape or dtype substrings, or a
//               regex; Enter / ▶ cycle through hits, opening the scopes that hold them.
// While a layout runs the previous drawing stays up with "laying out…" over it, so the
// window stays responsive however large the graph is. A graph of more than
// kProvisionalLayoutBoxes boxes is drawn at once in rows by rank (layered_layout) and
// dot's drawing replaces it when it lands.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <imgui.h>

#include "views/app_state.h"
#include "views/display_graph.h"
#include "views/graph_layout.h"
#include "views/layout_diff.h"
#include "views/theme.h"

namespace lathe::views {

// The zoom at which a box's labels read (15 px font -> 11 px).
constexpr float kReadableZoom = 0.75f;

class GraphView {
 public:
  explicit GraphView(const Fonts& fonts) : fonts_(fonts) {}
  // Draws the toolbar and canvas into the current window / child.
  void draw(AppState& s);
  // True while the drawing does not yet match the state (layout queued or running).
  bool settling() const { return settling_; }
  void fit() { fit_request_ = FitKind::Exact; }
  // A large graph shows a quick rows-by-rank layout while dot runs in the background:
  // dot_pending() while it does, dot_ready() once dot's layout waits to be swapped in
  // (the app's loop wakes up for it).
  bool dot_pending();
  bool dot_ready();
  // The canvas rectangle of the last draw (screen pixels). The canvas draws no background
  // of its own: the app clears this rectangle to colors::kCanvas before ImGui renders.
  ImVec2 canvas_min() const { return canvas_min_; }
  ImVec2 canvas_max() const { return canvas_max_; }

 private:
  enum class FitKind { None, Readable, Exact };
  void sync(AppState& s);
  static bool has_scopes(const DisplayGraph& g);   // collapsed scope boxes or frames
  void fresh_layout(const DisplayGraph& g);
  void swap_in_dot(AppState& s);
  void draw_toolbar(AppState& s);
  void draw_canvas(AppState& s);
  void draw_boxes_and_edges(AppState& s, ImDrawList* dl, ImVec2 origin, int hovered);
  void draw_ghosts(ImDrawList* dl, ImVec2 origin);
  void draw_legend(AppState& s, ImDrawList* dl, ImVec2 min, ImVec2 max);
  void draw_frames(AppState& s, ImDrawList* dl, ImVec2 origin);
  // The minimap (top-right): the whole drawing, the view's rectangle; a click or drag in
  // it moves the view there. Returns true while it has the mouse.
  bool draw_minimap(ImDrawList* dl, ImVec2 p0, ImVec2 size);
  int frame_title_at(ImVec2 world) const;   // the frame whose title bar is at `world`, or -1
  // Where a scope is drawn (the middle of its box's or frame's top edge), for keeping it
  // in place on expand.
  bool scope_rect(const DisplayGraph& g, const Layout& l, const std::string& path, Point& top_mid) const;
  // The layout request for `g`, with each frame's collapsed size (base_sizes_).
  LayoutRequest request_for(const DisplayGraph& g) const;
  void update_colors(const AppState& s);   // fills_ / in_kernel_ for the colour mode
  int selected_box(const AppState& s) const;
  void update_search(AppState& s);
  void step_search(AppState& s, int dir);
  void apply_fit(FitKind kind, ImVec2 canvas);
  FitKind next_fit() const;
  void center_on(int box, ImVec2 canvas);
  void frame_kernel(ImVec2 canvas);
  int box_at(ImVec2 world) const;
  void context_menu(AppState& s);

  Fonts fonts_;
  LayoutEngine engine_;                      // dot (small flat drawings; large ones in the background)
  LayoutEngine quick_{nested_layout};        // nested_layout: drawings with scopes, and the rest
  std::shared_ptr<const Layout> cached(uint64_t key);   // from either
  // What is on screen: a display graph and its layout (always a matching pair).
  std::shared_ptr<DisplayGraph> shown_;
  std::shared_ptr<const Layout> shown_layout_;
  // What the state asks for, waiting for its layout.
  std::shared_ptr<DisplayGraph> wanted_;
  bool settling_ = true;

  float zoom_ = 1.0f;
  ImVec2 pan_{0, 0};                 // world point at the canvas' top-left corner
  FitKind fit_request_ = FitKind::Readable;
  uint64_t last_version_ = ~0ull;    // graph version and level the view was last fitted for
  Level last_level_ = Level::Primitive;
  uint64_t last_document_ = ~0ull;
  // The last version change as drawn (layout_diff.h): ghosts and added marks when the
  // layout kept the old places (step_.ok); Re-layout asks dot for a fresh one.
  StepLayout step_;
  bool relayout_pending_ = false;

  char query_[256] = {};
  std::string last_query_;
  uint64_t search_key_ = 0;
  std::vector<int> hits_;            // box indices, in box order
  std::vector<uint32_t> hit_nodes_;  // matching primitive node per hit box
  int hit_cursor_ = -1;
  std::string search_opened_;        // the scope the last search step opened
  bool search_focus_ = false;

  int context_box_ = -1;
  bool fitted_readable_ = false;     // the last fit showed the top at a readable zoom
  float fitted_zoom_ = 0;
  ImVec2 fitted_pan_{0, 0};
  float legend_h_ = 30;              // the legend's height last frame: fits keep boxes above it
  bool minimap_drag_ = false;
  bool on_minimap_ = false;          // the mouse is over the minimap (last frame)
  // The scope expanded / collapsed last, and where it was drawn, so the new drawing keeps
  // it at the same place on screen.
  std::string anchor_path_;
  ImVec2 anchor_screen_{0, 0};
  // The size each scope's box had while collapsed (path -> w, h), for the document,
  // version, level and weights setting base_ctx_ names.
  std::unordered_map<std::string, std::pair<float, float>> base_sizes_;
  uint64_t base_ctx_ = ~0ull;
  bool anchor_pending_ = false;
  ImVec2 last_canvas_{800, 600};
  ImVec2 canvas_min_{0, 0}, canvas_max_{0, 0};

  // Per box of shown_: its fill in the current colour mode, and whether it holds a node of
  // the selected kernel (provenance highlight). Recomputed when colors_key_ changes.
  std::vector<ImU32> fills_;
  std::vector<char> in_kernel_;
  uint64_t colors_key_ = 0;
  size_t highlighted_ = 0;
  // Per edge of shown_layout_: its bounding box in layout units, for culling.
  struct EdgeBounds {
    float x0, y0, x1, y1;
  };
  std::vector<EdgeBounds> edge_bounds_;
  // The minimap's boxes and frames, painted once per layout and colouring into a
  // pixel grid and drawn as runs of one colour (a few hundred rectangles instead of one
  // per box and four lines per frame: thousands of tiny triangles cost llvmpipe more
  // than their pixels).
  struct MiniRun {
    float x0, y0, x1, y1;   // minimap pixels from its top-left corner
    ImU32 color;
  };
  std::vector<MiniRun> mini_runs_;
  std::shared_ptr<const Layout> mini_layout_;
  std::vector<ImU32> mini_fills_;
  std::shared_ptr<const Layout> edge_bounds_layout_;   // held, so a new layout never reuses its address
};

}  // namespace lathe::views
