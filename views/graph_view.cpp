// graph_view.cpp — the graph window: keeping the drawing in step with the state, the
// toolbar, search, and mouse/keyboard interaction. The drawing itself is in
// graph_view_draw.cpp.
//
// [SECTION] keeping the display graph and layout in step with AppState
// [SECTION] toolbar (level, colour, fit, expand, search)
// [SECTION] search
// [SECTION] canvas: pan, zoom, fit, select, context menu
#include "views/graph_view.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <regex>

#include "views/app_actions.h"

namespace lathe::views {

// ImGui 1.86 indexes keys by the backend's codes; GLFW's letter keys are their ASCII codes.
constexpr int kKeyF = 'F';

//-----------------------------------------------------------------------------
// [SECTION] keeping the display graph and layout in step with AppState
//-----------------------------------------------------------------------------

void GraphView::sync(AppState& s) {
  if (s.relayout_request && shown_ && step_.ok && !relayout_pending_) {   // a script's Re-layout
    fresh_layout(*shown_);
    relayout_pending_ = true;
  }
  s.relayout_request = false;
  uint64_t key = display_key(s);
  if (!wanted_ || wanted_->key != key) {
    LabelMetrics m;
    ImFont* f = fonts_.ui;
    float size = fonts_.size;
    m.text_width = [f, size](const std::string& t) { return f->CalcTextSizeA(size, FLT_MAX, 0, t.c_str()).x; };
    m.line_height = fonts_.size + 3.0f;
    wanted_ = std::make_shared<DisplayGraph>(build_display_graph(s, m));
    // The size of each collapsed scope's box, so that its frame takes the same place
    // when it expands (LayoutRequest::frame_base).
    uint64_t ctx = s.document * 1000003ull + s.version * 7919ull + static_cast<uint64_t>(s.level) * 2 + (s.show_weights ? 1 : 0);
    if (ctx != base_ctx_) base_sizes_.clear(), base_ctx_ = ctx;
    for (auto& b : wanted_->nodes)
      if (!b.group.empty()) base_sizes_[b.group] = {b.w, b.h};
  }
  if (shown_ && shown_->key == key) {
    settling_ = false;
    if (shown_layout_ && shown_layout_->provisional) swap_in_dot(s);
    if (relayout_pending_) {   // Re-layout: swap dot's layout in when it lands
      if (auto fresh = cached(key)) {
        shown_layout_ = fresh;
        step_ = StepLayout{};
        relayout_pending_ = false;
        s.view_ghosts = s.view_added = 0;
        s.view_layout = fresh->layered ? "layered" : "dot";
      } else {
        settling_ = true;
      }
    }
    return;
  }
  relayout_pending_ = false;
  std::shared_ptr<const Layout> layout =
      wanted_->nodes.empty() ? std::make_shared<const Layout>() : cached(key);
  // A rewrite step of the graph shown, at the same level: keep the old places.
  bool step = shown_ && shown_layout_ && s.document == last_document_ && s.level == last_level_ &&
              s.level != Level::Kernel && s.version != last_version_ && s.diff.from_version == last_version_;
  StepLayout st;
  if (!layout && step && !wanted_->nodes.empty()) {
    st = layout_step(*shown_, *shown_layout_, *wanted_, s.diff);
    if (st.ok) layout = st.layout;
  }
  if (!layout) {
    LayoutRequest req = request_for(*wanted_);
    // dot for a small flat drawing; a drawing with scopes (frames, or collapsed scope boxes
    // that may expand) always gets nested_layout, so expanding one keeps the rest in place.
    bool groups = has_scopes(*wanted_);
    bool dot = !groups && wanted_->nodes.size() <= kDotMaxBoxes && wanted_->edges.size() <= kDotMaxEdges;
    if (dot) {   // small and flat: dot's drawing, in the background
      engine_.request(std::move(req));
      settling_ = true;
      return;
    }
    if (groups || wanted_->nodes.size() <= kProvisionalLayoutBoxes) {
      // Frames, or too many edges for dot: each frame laid out on its own, in
      // milliseconds, on the quick worker (never queued behind a dot job); the drawing
      // shown stays until it lands, usually the next frame.
      quick_.request(std::move(req));
      settling_ = true;
      return;
    }
  }
  if (!layout) {
    LayoutRequest req = request_for(*wanted_);
    // A large graph: rows by rank now, dot's drawing when it lands (swap_in_dot).
    layout = std::make_shared<const Layout>(layered_layout(req));
    engine_.request(std::move(req));
  }
  if (step) {   // what the step did, as drawn (gui.state())
    s.view_moved = count_moved(*shown_, *shown_layout_, *wanted_, *layout, s.diff);
    s.view_kept = st.ok ? st.kept : wanted_->nodes.size() - s.view_moved;
  } else {
    s.view_moved = s.view_kept = 0;
  }
  s.view_ghosts = st.ok ? st.ghosts.size() : 0;
  s.view_added = st.ok ? static_cast<size_t>(std::count(st.added.begin(), st.added.end(), 1)) : 0;
  s.view_layout = st.ok ? "stable" : layout->provisional ? "provisional" : layout->layered ? "layered" : "dot";
  step_ = std::move(st);
  bool new_graph = !shown_ || s.document != last_document_ || s.level != last_level_ || (s.version != last_version_ && !step_.ok);
  // Expand / collapse: the scope toggled stays where it was on screen.
  bool anchored = false;
  if (!new_graph && s.version == last_version_ && !s.last_toggled.empty() && shown_ && shown_layout_) {
    Point before, after;
    bool was_drawn = scope_rect(*shown_, *shown_layout_, s.last_toggled, before);
    bool is_drawn = scope_rect(*wanted_, *layout, s.last_toggled, after);
    if (!was_drawn && is_drawn) {   // a scope deep inside collapsed ones (gui.expand): show it
      pan_.x = after.x - last_canvas_.x * 0.5f / zoom_;
      pan_.y = after.y - 40 / zoom_;
      anchored = true;
    }
    if (was_drawn && is_drawn) {
      pan_.x += after.x - before.x;
      pan_.y += after.y - before.y;
      anchored = true;
      // Toggled from a script or the menu while out of view: bring its top into view.
      float sx = (after.x - pan_.x) * zoom_, sy = (after.y - pan_.y) * zoom_;
      if (sx < 0 || sx > last_canvas_.x || sy < 0 || sy > last_canvas_.y * 0.7f) {
        pan_.x = after.x - last_canvas_.x * 0.5f / zoom_;
        pan_.y = after.y - 40 / zoom_;
      }
    }
  }
  s.last_toggled.clear();
  last_document_ = s.document;
  last_version_ = s.version;
  shown_ = wanted_;
  shown_layout_ = layout;
  settling_ = false;
  if (new_graph) {
    fit_request_ = FitKind::Readable;
    last_version_ = s.version;
    last_level_ = s.level;
  } else if (!anchored && (s.selected >= 0 || !s.selected_group.empty())) {
    s.center_request = true;   // after expand/collapse, keep the selection in view
  }
  s.view_layout_ms = layout->seconds * 1000;
  s.view_box_titles.clear();
  for (auto& b : shown_->nodes) s.view_box_titles.push_back(b.lines.empty() ? "" : b.lines[0]);
  s.view_frame_paths.clear();
  for (auto& f : shown_->frames) s.view_frame_paths.push_back(f.path);
  s.view_places = [this] {
    std::vector<AppState::BoxPlace> out;
    if (!shown_ || !shown_layout_ || shown_layout_->centers.size() != shown_->nodes.size()) return out;
    for (size_t i = 0; i < shown_->nodes.size(); ++i) {
      const DisplayNode& b = shown_->nodes[i];
      Point c = shown_layout_->centers[i];
      out.push_back({(c.x - b.w / 2 - pan_.x) * zoom_, (c.y - b.h / 2 - pan_.y) * zoom_, b.w * zoom_, b.h * zoom_});
    }
    return out;
  };
  search_key_ = 0;   // boxes changed: recompute hits
}

// The drawing shows layered_layout's rows: when dot's layout of the same boxes is done,
// show it instead, framed the way a freshly opened graph is (or around the selection).
void GraphView::swap_in_dot(AppState& s) {
  std::shared_ptr<const Layout> fresh = engine_.get(shown_->key);
  if (!fresh) {
    if (!engine_.busy()) fresh_layout(*shown_);   // a newer request displaced it
    return;
  }
  shown_layout_ = fresh;
  step_ = StepLayout{};
  s.view_layout = fresh->layered ? "layered" : "dot";
  s.view_ghosts = s.view_added = 0;
  if (s.selected >= 0 || !s.selected_group.empty()) s.center_request = true;
  else fit_request_ = FitKind::Readable;
}

bool GraphView::has_scopes(const DisplayGraph& g) {
  return !g.frames.empty() || std::any_of(g.nodes.begin(), g.nodes.end(), [](const DisplayNode& b) { return !b.group.empty(); });
}

// A layout afresh (Re-layout, or a displaced request): dot in the background for a small
// flat drawing, nested_layout at once otherwise; either lands in the engine's cache.
void GraphView::fresh_layout(const DisplayGraph& g) {
  LayoutRequest req = request_for(g);
  if (!has_scopes(g) && ((g.nodes.size() <= kDotMaxBoxes && g.edges.size() <= kDotMaxEdges) ||
                         g.nodes.size() > kProvisionalLayoutBoxes))
    engine_.request(std::move(req));
  else
    quick_.request(std::move(req));
}

LayoutRequest GraphView::request_for(const DisplayGraph& g) const {
  LayoutRequest req = make_layout_request(g);
  req.title_h = fonts_.size + 9.0f;
  if (g.frames.empty()) return req;
  // A frame's base: its scope's collapsed box, or that of an enclosing scope left without
  // a frame of its own (one holding only this one).
  std::set<std::string> framed;
  for (auto& f : g.frames) framed.insert(f.path);
  req.frame_base.assign(g.frames.size(), {0.0f, 0.0f});
  for (size_t f = 0; f < g.frames.size(); ++f)
    for (std::string p = g.frames[f].path; !p.empty() && p != "/"; p = parent_scope(p)) {
      if (p != g.frames[f].path && framed.count(p)) break;
      auto it = base_sizes_.find(p);
      if (it != base_sizes_.end()) {
        req.frame_base[f] = it->second;
        break;
      }
    }
  return req;
}

std::shared_ptr<const Layout> GraphView::cached(uint64_t key) {
  if (auto l = quick_.get(key)) return l;
  return engine_.get(key);
}

bool GraphView::scope_rect(const DisplayGraph& g, const Layout& l, const std::string& path, Point& tl) const {
  for (size_t i = 0; i < g.nodes.size() && i < l.centers.size(); ++i)
    if (g.nodes[i].group == path) {
      tl = {l.centers[i].x, l.centers[i].y - g.nodes[i].h / 2};
      return true;
    }
  for (size_t f = 0; f < g.frames.size() && f < l.frames.size(); ++f)
    if (g.frames[f].path == path) {
      tl = {(l.frames[f].x0 + l.frames[f].x1) / 2, l.frames[f].y0};
      return true;
    }
  return false;
}

int GraphView::frame_title_at(ImVec2 w) const {
  if (!shown_ || !shown_layout_) return -1;
  int hit = -1;   // the innermost: frames come after their parents
  for (size_t f = 0; f < shown_layout_->frames.size(); ++f) {
    const FrameRect& r = shown_layout_->frames[f];
    if (w.x >= r.x0 && w.x <= r.x1 && w.y >= r.y0 && w.y <= r.y0 + r.title_h) hit = static_cast<int>(f);
  }
  return hit;
}

bool GraphView::dot_pending() {
  return shown_ && shown_layout_ && shown_layout_->provisional && !settling_;
}

bool GraphView::dot_ready() { return dot_pending() && engine_.get(shown_->key) != nullptr; }

//-----------------------------------------------------------------------------
// [SECTION] toolbar (level, colour, fit, expand, search)
//-----------------------------------------------------------------------------

void GraphView::draw_toolbar(AppState& s) {
  static const char* kLevels[] = {"Tensor", "Primitive", "Kernel"};
  for (int i = 0; i < 3; ++i) {
    if (i) ImGui::SameLine(0, 2);
    bool on = static_cast<int>(s.level) == i;
    if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyle().Colors[ImGuiCol_ButtonActive]);
    if (ImGui::Button(kLevels[i])) s.set_level(static_cast<Level>(i));
    if (on) ImGui::PopStyleColor();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("%s", i == 0 ? "composites (matmul, softmax, …) as boxes that expand on click"
                              : i == 1 ? "every primitive node: what rewrite rules act on"
                                       : "fused kernels as boxes, buffers as edges");
  }
  if (s.level == Level::Kernel && !s.compiled && s.has_graph) {
    ImGui::SameLine(0, 12);
    bool compiling = s.jobs.busy() && s.jobs.kind() == "compile";
    ImGui::BeginDisabled(s.jobs.busy());
    if (ImGui::Button(compiling ? "Compiling…" : "Compile")) start_compile(s);
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("compile the graph shown with the default backend (:compile)");
  }
  ImGui::SameLine(0, 12);
  if (ImGui::Button("Fit")) fit_request_ = next_fit();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("show the graph at a readable zoom from its top; again: all of it in the window (F)");
  if (step_.ok) {   // the drawing kept the places of the version before a rewrite step
    ImGui::SameLine();
    ImGui::BeginDisabled(relayout_pending_);
    if (ImGui::Button("Re-layout")) {
      fresh_layout(*shown_);
      relayout_pending_ = true;
    }
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("boxes keep their places across rewrite steps (new ones go beside their neighbours);\n"
                        "lay the graph out afresh with dot (drops the removed-node ghosts)");
    if (!step_.ghosts.empty() || s.view_added > 0) {   // what the step's marks mean
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kGhost), "-%zu", step_.ghosts.size());
      ImGui::SameLine(0, 4);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kOk), "+%zu", s.view_added);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the last step: removed boxes are drawn faded and struck through where they were,\n"
                          "added ones outlined in green with a + tag");
    }
  }
  if (s.level != Level::Primitive) {
    ImGui::SameLine();
    if (ImGui::Button("Expand all")) s.expand_all();
    ImGui::SameLine();
    if (ImGui::Button("Collapse all")) s.collapse_all();
  }
  ImGui::SameLine();
  ImGui::Checkbox("Weights", &s.show_weights);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("draw weights and constants as boxes of their own; off: they are attributes of the\n"
                      "node that reads them (the inspector lists them with shape, dtype and values)");
  ImGui::SameLine(0, 12);
  if (ImGui::GetContentRegionAvail().x < 170) ImGui::NewLine();   // no room left on this line
  bool combo_fits = ImGui::GetContentRegionAvail().x >= 170;
  static const char* kColors[] = {"Colour: category", "Colour: kernel", "Colour: profile heat"};
  ImGui::SetNextItemWidth(170);
  if (ImGui::BeginCombo("##color", kColors[static_cast<int>(s.color_mode)])) {
    for (int i = 0; i < 3; ++i) {
      // kernel and heat need compile / profile data
      bool available = i == 0 || (i == 1 && s.compiled) || (i == 2 && s.compiled && s.compiled->profile);
      if (ImGui::Selectable(kColors[i], static_cast<int>(s.color_mode) == i,
                            available ? 0 : ImGuiSelectableFlags_Disabled))
        s.color_mode = static_cast<ColorMode>(i);
      if (!available && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip(i == 1 ? "no kernels yet: Compile first (Kernels panel, or :compile)"
                                 : "no profile yet: Profile first (Profile panel)");
    }
    ImGui::EndCombo();
  }

  // Search, right-aligned when there is room.
  ImGui::SameLine(0, 12);
  float avail = ImGui::GetContentRegionAvail().x;
  if (avail < 280) {   // no room for the search box and its arrows: a line of its own
    ImGui::NewLine();
    avail = ImGui::GetContentRegionAvail().x;
  }
  float w = std::clamp(avail - 130.0f, 120.0f, 320.0f);
  s.view_toolbar_fits = combo_fits && ImGui::GetCursorPosX() + w + 70 <= ImGui::GetWindowContentRegionMax().x + 1;
  ImGui::SetNextItemWidth(w);
  if (search_focus_) {
    ImGui::SetKeyboardFocusHere();
    search_focus_ = false;
  }
  bool enter = ImGui::InputTextWithHint("##search", "search: name, id, op, shape, regex  (Ctrl+F)", query_,
                                        sizeof query_, ImGuiInputTextFlags_EnterReturnsTrue);
  update_search(s);
  ImGui::SameLine(0, 4);
  if (ImGui::ArrowButton("##prev", ImGuiDir_Left)) step_search(s, -1);
  ImGui::SameLine(0, 2);
  if (ImGui::ArrowButton("##next", ImGuiDir_Right) || enter) {
    step_search(s, +1);
    if (enter) search_focus_ = true;   // keep typing / pressing Enter to cycle
  }
  if (query_[0]) {
    ImGui::SameLine();
    if (hit_nodes_.empty()) ImGui::TextColored(ImVec4(0.95f, 0.45f, 0.45f, 1), "no match");
    else ImGui::Text("%d/%d", hit_cursor_ + 1, static_cast<int>(hit_nodes_.size()));
  }
}

//-----------------------------------------------------------------------------
// [SECTION] search
//-----------------------------------------------------------------------------

void GraphView::update_search(AppState& s) {
  std::string q = query_;
  if (!shown_ || (q == last_query_ && search_key_ == shown_->key)) return;
  if (q != last_query_) {   // a new query: its matching nodes, exact names and ids first
    last_query_ = q;
    hit_nodes_ = find_nodes(s, q, true);
    hit_cursor_ = -1;
  }
  search_key_ = shown_->key;
  // The boxes that hold a hit (outlined); a scope opened by stepping keeps the cursor.
  hits_.clear();
  std::vector<char> hit(shown_->nodes.size(), 0);
  for (uint32_t id : hit_nodes_) {
    auto b = shown_->box_of.find(id);
    if (b != shown_->box_of.end() && b->second >= 0 && !hit[b->second]) hit[b->second] = 1, hits_.push_back(b->second);
  }
}

void GraphView::step_search(AppState& s, int dir) {
  if (hit_nodes_.empty()) return;
  int n = static_cast<int>(hit_nodes_.size());
  hit_cursor_ = hit_cursor_ < 0 ? (dir > 0 ? 0 : n - 1) : ((hit_cursor_ + dir) % n + n) % n;
  int id = static_cast<int>(hit_nodes_[hit_cursor_]);
  // The scope the previous hit opened closes again, unless this hit is inside it too:
  // stepping through a hundred hits leaves one scope open, not a hundred.
  NodeRef hit = node_by_id(static_cast<uint32_t>(id));
  if (!search_opened_.empty() && s.expanded.count(search_opened_) &&
      !(hit && (hit->prov.path == search_opened_ || hit->prov.path.rfind(search_opened_ + "/", 0) == 0)))
    s.collapse(search_opened_), s.last_toggled.clear();
  std::string opened = s.reveal(id);   // open the scopes that hide it
  if (!opened.empty()) search_opened_ = opened;
  s.select_node(id, true);
}

//-----------------------------------------------------------------------------
// [SECTION] canvas: pan, zoom, fit, select, context menu
//-----------------------------------------------------------------------------

void GraphView::apply_fit(FitKind kind, ImVec2 canvas) {
  if (!shown_layout_ || shown_layout_->centers.empty()) return;
  const float margin = 24.0f;
  // The legend and the info line sit at the bottom: boxes are fitted above them.
  const float avail_y = std::max(80.0f, canvas.y - legend_h_ - 8);
  float W = shown_layout_->width + 2 * margin, H = shown_layout_->height + 2 * margin;
  float z = std::min({canvas.x / W, avail_y / H, 1.25f});
  // "Readable": a graph too big to fit legibly is shown at a zoom where labels read
  // (11 px text), from its top (the inputs), instead of a grey smear; Fit again (or F)
  // fits it whole.
  bool top = false;
  if (kind == FitKind::Readable && z < kReadableZoom) {
    z = std::clamp(canvas.x / W, kReadableZoom, 1.0f);
    top = true;
  }
  zoom_ = std::max(z, 0.01f);
  pan_.x = shown_layout_->x0 - margin + (W - canvas.x / zoom_) * 0.5f;
  pan_.y = shown_layout_->y0 + (top ? -margin : -margin + (H - avail_y / zoom_) * 0.5f);
  // Deep graphs often drift sideways as they go down: start at the topmost box, not at
  // the middle of an empty top row.
  if (top && W * zoom_ > canvas.x) {   // centre on the median box of the part in view
    std::vector<float> xs;
    for (const Point& c : shown_layout_->centers)
      if (c.y < shown_layout_->y0 + avail_y / zoom_) xs.push_back(c.x);
    if (!xs.empty()) {
      std::nth_element(xs.begin(), xs.begin() + xs.size() / 2, xs.end());
      pan_.x = xs[xs.size() / 2] - canvas.x * 0.5f / zoom_;
    }
  }
  fitted_readable_ = top;
  fitted_zoom_ = zoom_;
  fitted_pan_ = pan_;
}

// Fit: readable from the top first; pressed again with the view untouched, all of it.
GraphView::FitKind GraphView::next_fit() const {
  bool untouched = fitted_readable_ && zoom_ == fitted_zoom_ && pan_.x == fitted_pan_.x && pan_.y == fitted_pan_.y;
  return untouched ? FitKind::Exact : FitKind::Readable;
}

void GraphView::center_on(int box, ImVec2 canvas) {
  if (!shown_layout_ || box < 0 || box >= static_cast<int>(shown_layout_->centers.size())) return;
  Point c = shown_layout_->centers[box];
  if (zoom_ < 0.5f) zoom_ = 0.8f;   // centring on something too small to read is no help
  pan_ = ImVec2(c.x - canvas.x * 0.5f / zoom_, c.y - canvas.y * 0.5f / zoom_);
}

// Frames the boxes of the selected kernel (in_kernel_): their bounding box centred, at a
// zoom that fits it (between 0.35 and 1).
void GraphView::frame_kernel(ImVec2 canvas) {
  if (!shown_layout_ || in_kernel_.size() != shown_layout_->centers.size()) return;
  float x0 = FLT_MAX, y0 = FLT_MAX, x1 = -FLT_MAX, y1 = -FLT_MAX;
  for (size_t i = 0; i < in_kernel_.size(); ++i) {
    if (!in_kernel_[i]) continue;
    Point c = shown_layout_->centers[i];
    const DisplayNode& b = shown_->nodes[i];
    x0 = std::min(x0, c.x - b.w * 0.5f), x1 = std::max(x1, c.x + b.w * 0.5f);
    y0 = std::min(y0, c.y - b.h * 0.5f), y1 = std::max(y1, c.y + b.h * 0.5f);
  }
  if (x0 > x1) return;
  const float margin = 40;
  zoom_ = std::clamp(std::min(canvas.x / (x1 - x0 + 2 * margin), canvas.y / (y1 - y0 + 2 * margin)), 0.35f, 1.0f);
  pan_ = ImVec2((x0 + x1) * 0.5f - canvas.x * 0.5f / zoom_, (y0 + y1) * 0.5f - canvas.y * 0.5f / zoom_);
}

int GraphView::box_at(ImVec2 world) const {
  if (!shown_ || !shown_layout_) return -1;
  for (size_t i = 0; i < shown_layout_->centers.size() && i < shown_->nodes.size(); ++i) {
    Point c = shown_layout_->centers[i];
    const DisplayNode& b = shown_->nodes[i];
    if (std::fabs(world.x - c.x) <= b.w * 0.5f && std::fabs(world.y - c.y) <= b.h * 0.5f) return static_cast<int>(i);
  }
  return -1;
}

void GraphView::context_menu(AppState& s) {
  if (!ImGui::BeginPopup("box-menu")) return;
  if (!shown_ || context_box_ < 0 || context_box_ >= static_cast<int>(shown_->nodes.size())) {
    ImGui::EndPopup();
    return;
  }
  const DisplayNode& b = shown_->nodes[context_box_];
  ImGui::TextDisabled("%s", b.lines[0].c_str());
  ImGui::Separator();
  if (!b.group.empty()) {
    if (ImGui::MenuItem(("Expand " + b.group).c_str())) s.expand(b.group);
  } else if (ImGui::MenuItem("Select")) {
    if (b.kernel >= 0) s.select_kernel(b.kernel);
    else s.select_node(static_cast<int>(b.rep));
  }
  // Provenance: jump between a kernel and its primitive nodes.
  if (b.kernel >= 0 && ImGui::MenuItem("Show its nodes at the primitive level")) {
    s.select_kernel(b.kernel, true);
    s.set_level(Level::Primitive);
  }
  if (b.kernel < 0 && s.compiled && s.level != Level::Kernel) {
    auto k = s.compiled->kernel_of.find(b.rep);
    if (k != s.compiled->kernel_of.end() &&
        ImGui::MenuItem(("Show kernel " + s.compiled->program().kg.kernels[k->second].name).c_str())) {
      s.select_kernel(k->second, true);
      s.set_level(Level::Kernel);
    }
  }
  // Collapse any expanded composite this box sits in.
  NodeRef n = node_by_id(b.rep);
  std::string path = b.group.empty() && n ? n->prov.path : b.group;
  for (size_t i = path.size(); i > 0; --i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    bool open = s.level == Level::Primitive ? s.primitive_frames() : s.expanded.count(prefix) > 0;
    if (open && ImGui::MenuItem(("Collapse " + prefix).c_str())) s.collapse(prefix);
  }
  ImGui::EndPopup();
}

void GraphView::draw(AppState& s) {
  sync(s);
  if (s.search_pending && shown_ && !settling_) {   // gui.search: as if typed, then Enter n times
    std::snprintf(query_, sizeof query_, "%s", s.search_request.c_str());
    update_search(s);
    for (int i = 0; i < s.search_steps; ++i) step_search(s, +1);
    s.search_pending = false;
  }
  s.view_search_hits = hit_nodes_.size();
  s.view_search_cursor = hit_cursor_;
  if (s.fit_request && !settling_) fit_request_ = s.fit_readable ? FitKind::Readable : FitKind::Exact, s.fit_request = false;
  draw_toolbar(s);
  draw_canvas(s);
  // What is on screen, for scripts and tests (gui.state()).
  s.view_boxes = shown_ && !settling_ ? shown_->nodes.size() : 0;
  s.view_edges = shown_ && !settling_ ? shown_->edges.size() : 0;
  s.view_highlighted = shown_ && !settling_ ? highlighted_ : 0;
  s.view_folded = shown_ && !settling_ ? shown_->folded : 0;
  s.view_zoom = zoom_;
}

void GraphView::draw_canvas(AppState& s) {
  ImGuiIO& io = ImGui::GetIO();
  ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImVec2 size = ImGui::GetContentRegionAvail();
  size.x = std::max(size.x, 50.0f);
  size.y = std::max(size.y, 50.0f);
  last_canvas_ = size;
  ImGui::InvisibleButton("canvas", size, ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  bool hovered = ImGui::IsItemHovered();
  bool active = ImGui::IsItemActive();

  if (fit_request_ != FitKind::None && shown_layout_ && !shown_layout_->centers.empty()) {
    apply_fit(fit_request_, size);
    fit_request_ = FitKind::None;
  }
  if (s.center_request && shown_ && !settling_) {   // after the layout for this level lands
    int box = selected_box(s);
    if (box < 0 && !s.selected_group.empty())
      for (size_t i = 0; i < shown_->nodes.size(); ++i)
        if (shown_->nodes[i].group == s.selected_group) box = static_cast<int>(i);
    update_colors(s);
    if (s.level != Level::Kernel && highlighted_ > 1) frame_kernel(size);   // all of the kernel's nodes
    else center_on(box, size);
    s.center_request = false;
  }

  if (s.pan_request_x != 0 || s.pan_request_y != 0) {   // a script: pan by screen pixels
    pan_.x += s.pan_request_x / zoom_;
    pan_.y += s.pan_request_y / zoom_;
    s.pan_request_x = s.pan_request_y = 0;
  }
  if (s.zoom_request > 0) {   // a script: zoom about the canvas centre
    ImVec2 mid(pan_.x + size.x * 0.5f / zoom_, pan_.y + size.y * 0.5f / zoom_);
    zoom_ = std::clamp(s.zoom_request, 0.01f, 6.0f);
    pan_ = ImVec2(mid.x - size.x * 0.5f / zoom_, mid.y - size.y * 0.5f / zoom_);
    s.zoom_request = 0;
  }
  // Pan (drag), zoom at the cursor (wheel), keys. A drag that began on the minimap moves
  // the view there instead (draw_minimap).
  if (active && !minimap_drag_ && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
    pan_.x -= io.MouseDelta.x / zoom_;
    pan_.y -= io.MouseDelta.y / zoom_;
  }
  if (hovered && io.MouseWheel != 0) {
    ImVec2 m(io.MousePos.x - p0.x, io.MousePos.y - p0.y);
    ImVec2 world(pan_.x + m.x / zoom_, pan_.y + m.y / zoom_);
    zoom_ = std::clamp(zoom_ * std::pow(1.15f, io.MouseWheel), 0.01f, 6.0f);
    pan_ = ImVec2(world.x - m.x / zoom_, world.y - m.y / zoom_);
  }
  if (!io.WantTextInput && ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows)) {
    if (ImGui::IsKeyPressed(kKeyF) && !io.KeyCtrl) fit_request_ = next_fit();
  }
  if (io.KeyCtrl && ImGui::IsKeyPressed(kKeyF)) search_focus_ = true;

  ImVec2 mouse_world(pan_.x + (io.MousePos.x - p0.x) / zoom_, pan_.y + (io.MousePos.y - p0.y) / zoom_);
  int hover_box = hovered && !on_minimap_ ? box_at(mouse_world) : -1;
  int hover_frame = hovered && !on_minimap_ && hover_box < 0 ? frame_title_at(mouse_world) : -1;

  // Click (press and release without dragging) selects; a collapsed composite expands; a
  // frame's title bar collapses it.
  if (hovered && !on_minimap_ && ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 4.0f * 4.0f) {
    if (hover_frame >= 0) {
      s.info("collapsed " + shown_->frames[hover_frame].path);
      s.collapse(shown_->frames[hover_frame].path);
    } else if (hover_box < 0) {
      s.clear_selection();
    } else if (!shown_->nodes[hover_box].group.empty()) {
      const DisplayNode& b = shown_->nodes[hover_box];
      s.select_node(static_cast<int>(b.rep));
      s.info("expanded " + b.group);
      s.expand(b.group);
    } else if (shown_->nodes[hover_box].kernel >= 0) {
      s.select_kernel(shown_->nodes[hover_box].kernel);
    } else {
      s.select_node(static_cast<int>(shown_->nodes[hover_box].rep));
    }
  }
  if (hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Right) && hover_box >= 0) {
    context_box_ = hover_box;
    ImGui::OpenPopup("box-menu");
  }
  context_menu(s);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p1(p0.x + size.x, p0.y + size.y);
  dl->PushClipRect(p0, p1, true);
  ImVec2 clip_min = dl->GetClipRectMin(), clip_max = dl->GetClipRectMax();   // the part of the canvas on screen
  canvas_min_ = clip_min, canvas_max_ = clip_max;
  // The drawing stops above the legend and info line (a band of their own), so no label
  // ever sits under them.
  float band = shown_ && !shown_->nodes.empty() ? legend_h_ : 0.0f;
  dl->PushClipRect(p0, ImVec2(p1.x, std::max(p0.y + 40, p1.y - band)), true);
  draw_boxes_and_edges(s, dl, p0, hover_box);
  dl->PopClipRect();
  if (band > 0) dl->AddLine(ImVec2(p0.x, p1.y - band), ImVec2(p1.x, p1.y - band), IM_COL32(60, 64, 76, 255));
  draw_legend(s, dl, p0, p1);
  on_minimap_ = draw_minimap(dl, p0, size);

  // Overlays: why there is nothing, or that a layout is on its way.
  auto centered_text = [&](const std::string& t, ImU32 col, float y) {
    ImVec2 ts = ImGui::CalcTextSize(t.c_str());
    dl->AddText(ImVec2(p0.x + (size.x - ts.x) * 0.5f, y), col, t.c_str());
  };
  if (wanted_ && wanted_->nodes.empty())
    centered_text(wanted_->empty_reason, colors::kTextDim, p0.y + size.y * 0.45f);
  if (settling_) {
    const char* spin = "|/-\\";
    std::string t = std::string("laying out ") + std::to_string(wanted_ ? wanted_->nodes.size() : 0) + " boxes… " +
                    spin[static_cast<int>(ImGui::GetTime() * 8) % 4];
    ImVec2 ts = ImGui::CalcTextSize(t.c_str());
    ImVec2 a(p0.x + (size.x - ts.x) * 0.5f - 10, p0.y + 12);
    dl->AddRectFilled(a, ImVec2(a.x + ts.x + 20, a.y + ts.y + 10), IM_COL32(40, 60, 100, 230), 4);
    dl->AddText(ImVec2(a.x + 10, a.y + 5), colors::kText, t.c_str());
  }
  if (s.compiled && s.compiled->graph_version != s.version && (s.level == Level::Kernel || s.color_mode != ColorMode::Category))
    dl->AddText(ImVec2(p0.x + 10, p0.y + 8), colors::kWarn,
                "kernels are from an earlier version of the graph: Recompile (Kernels panel) to update");
  if (shown_layout_ && !shown_layout_->error.empty())
    dl->AddText(ImVec2(p0.x + 10, p1.y - 24), colors::kWarn, shown_layout_->error.c_str());
  if (shown_ && !shown_->nodes.empty()) {
    char info[128];
    if (shown_layout_ && shown_layout_->provisional)
      std::snprintf(info, sizeof info, "%zu boxes · %zu edges · quick layout: dot still running · zoom %.0f%%",
                    shown_->nodes.size(), shown_->edges.size(), zoom_ * 100);
    else
      std::snprintf(info, sizeof info, "%zu boxes · %zu edges · %s %.0f ms · zoom %.0f%%", shown_->nodes.size(),
                    shown_->edges.size(), shown_layout_ && !shown_layout_->frames.empty() ? "frames" : "layout",
                    shown_layout_ ? shown_layout_->seconds * 1000 : 0.0, zoom_ * 100);
    ImVec2 ts = ImGui::CalcTextSize(info);
    ImVec2 at(p1.x - ts.x - 10, p1.y - ts.y - 6);
    dl->AddRectFilled(ImVec2(at.x - 6, at.y - 3), ImVec2(p1.x - 4, p1.y - 3), IM_COL32(24, 26, 31, 215), 4);
    dl->AddText(at, colors::kTextDim, info);
  }
  dl->PopClipRect();

  if (hover_frame >= 0 && !ImGui::IsPopupOpen("box-menu"))
    ImGui::SetTooltip("%s: click the title to collapse", shown_->frames[hover_frame].path.c_str());
  // Tooltip for the hovered box.
  if (hover_box >= 0 && !ImGui::IsPopupOpen("box-menu")) {
    const DisplayNode& b = shown_->nodes[hover_box];
    ImGui::BeginTooltip();
    for (size_t i = 0; i < b.lines.size(); ++i) {
      if (i == 0) ImGui::TextUnformatted(b.lines[i].c_str());
      else ImGui::TextDisabled("%s", b.lines[i].c_str());
    }
    NodeRef n = node_by_id(b.rep);
    if (b.kernel >= 0) {
      const KernelProfile* kp = s.compiled && s.compiled->profile && b.kernel < static_cast<int>(s.compiled->profile->kernels.size())
                                    ? &s.compiled->profile->kernels[b.kernel] : nullptr;
      if (kp) ImGui::TextDisabled("%.4f ms · %.2f GFLOP/s · %.2f GB/s · %s-bound", kp->median_ms, kp->gflops, kp->gbps, kp->bound.c_str());
      ImGui::TextDisabled("click to select (its nodes light up at the primitive level)");
    } else if (b.group.empty() && n) {
      ImGui::TextDisabled("%%%u · %s", n->id, std::string(n->info().doc).c_str());
      if (!n->prov.path.empty()) ImGui::TextDisabled("in %s", n->prov.path.c_str());
    } else {
      ImGui::TextDisabled("click to expand · right-click for more");
    }
    ImGui::EndTooltip();
  }
}

}  // namespace lathe::views
