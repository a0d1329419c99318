// gui_app.cpp — the desktop app's shell: GLFW window + OpenGL3 + ImGui, the split layout
// with its splitters, the menu bar, start-up (file, demo, script) and headless screenshots.
//
// [SECTION] start-up: display, window, GL context, ImGui
// [SECTION] the split layout and splitters
// [SECTION] menu bar and shortcuts
// [SECTION] the frame loop (interactive and headless)
#include "views/gui_app.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <GL/gl.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <time.h>

#include "views/app_actions.h"
#include "views/app_state.h"
#include "views/demo_graph.h"
#include "views/error_panel.h"
#include "views/graph_view.h"
#include "views/gui_settings.h"
#include "views/inspector.h"
#include "views/kernels_panel.h"
#include "views/log_panel.h"
#include "views/open_dialog.h"
#include "views/profile_panel.h"
#include "views/tune_panel.h"
#include "views/redraw.h"
#include "views/rules_editor.h"
#include "views/screenshot.h"
#include "views/theme.h"
#include "views/timeline.h"

#ifndef LATHE_SOURCE_SAMPLES
#define LATHE_SOURCE_SAMPLES "samples"
#endif

namespace lathe::views {

namespace {

std::string g_glfw_error;
void on_glfw_error(int code, const char* text) { g_glfw_error = text ? text : ("GLFW error " + std::to_string(code)); }

// Input and window events since start-up: the frame loop renders only when this moves (or
// something animates). Installed before ImGui's GLFW backend, which chains to them.
uint64_t g_input_events = 0;
void install_event_counters(GLFWwindow* w) {
  glfwSetCursorPosCallback(w, [](GLFWwindow*, double, double) { ++g_input_events; });
  glfwSetMouseButtonCallback(w, [](GLFWwindow*, int, int, int) { ++g_input_events; });
  glfwSetScrollCallback(w, [](GLFWwindow*, double, double) { ++g_input_events; });
  glfwSetKeyCallback(w, [](GLFWwindow*, int, int, int, int) { ++g_input_events; });
  glfwSetCharCallback(w, [](GLFWwindow*, unsigned) { ++g_input_events; });
  glfwSetWindowFocusCallback(w, [](GLFWwindow*, int) { ++g_input_events; });
  glfwSetCursorEnterCallback(w, [](GLFWwindow*, int) { ++g_input_events; });
  glfwSetWindowRefreshCallback(w, [](GLFWwindow*) { ++g_input_events; });
  glfwSetFramebufferSizeCallback(w, [](GLFWwindow*, int, int) { ++g_input_events; });
  glfwSetDropCallback(w, [](GLFWwindow*, int, const char**) { ++g_input_events; });
}

//-----------------------------------------------------------------------------
// [SECTION] the split layout and splitters
//-----------------------------------------------------------------------------

// A draggable bar between two panels; `frac` moves by the drag over `extent` pixels.
void splitter(const char* id, bool vertical, ImVec2 size, float extent, float* frac) {
  ImGui::InvisibleButton(id, size);
  bool hot = ImGui::IsItemHovered() || ImGui::IsItemActive();
  if (hot) ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
  if (ImGui::IsItemActive() && extent > 0) *frac += (vertical ? ImGui::GetIO().MouseDelta.x : ImGui::GetIO().MouseDelta.y) / extent;
  ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  ImU32 col = ImGui::GetColorU32(hot ? ImGuiCol_SeparatorHovered : ImGuiCol_Separator);
  if (vertical) ImGui::GetWindowDrawList()->AddLine(ImVec2((a.x + b.x) * 0.5f, a.y), ImVec2((a.x + b.x) * 0.5f, b.y), col, hot ? 3 : 1);
  else ImGui::GetWindowDrawList()->AddLine(ImVec2(a.x, (a.y + b.y) * 0.5f), ImVec2(b.x, (a.y + b.y) * 0.5f), col, hot ? 3 : 1);
}

// An indeterminate progress spinner: an arc turning once a second, at the cursor.
void spinner(float radius, ImU32 col) {
  ImVec2 p = ImGui::GetCursorScreenPos();
  float h = ImGui::GetFrameHeight();
  ImGui::Dummy(ImVec2(radius * 2 + 4, h));
  ImVec2 c(p.x + radius + 2, p.y + h * 0.5f);
  float t = static_cast<float>(ImGui::GetTime()) * 6.2832f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PathArcTo(c, radius, t, t + 4.2f, 16);
  dl->PathStroke(col, 0, 2.5f);
}

// While a background job runs: a badge in the graph panel's lower-left corner with a
// spinner, what runs and for how long (the menu bar says it too, smaller).
void busy_badge(const AppState& s) {
  if (!s.jobs.busy()) return;
  char text[160];
  std::snprintf(text, sizeof text, "%s… %.1f s%s", s.jobs.label().c_str(), s.jobs.seconds(), s.jobs.held() ? " (held)" : "");
  ImVec2 ts = ImGui::CalcTextSize(text);
  ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  float h = ts.y + 20, w = ts.x + 52;
  ImVec2 a(pos.x + 12, pos.y + size.y - h - 12), b(a.x + w, a.y + h);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(a, b, colors::kBusyFill, 6);
  dl->AddRect(a, b, colors::kKernelHit, 6, 0, 1.5f);
  float t = static_cast<float>(ImGui::GetTime()) * 6.2832f;
  dl->PathArcTo(ImVec2(a.x + 20, a.y + h * 0.5f), 8, t, t + 4.2f, 16);
  dl->PathStroke(colors::kKernelHit, 0, 2.5f);
  dl->AddText(ImVec2(a.x + 38, a.y + (h - ts.y) * 0.5f), colors::kText, text);
}

std::string default_file() {
  for (const char* dir : {"samples", LATHE_SOURCE_SAMPLES})
    for (auto& f : list_graph_files(dir))
      if (f.size() > 6 && f.compare(f.size() - 6, 6, ".lathe") == 0) return f;
  return "";
}

struct App {
  GuiOptions opts;
  bool headless = false;
  GuiSettings settings;
  Fonts fonts;
  AppState state;
  std::unique_ptr<GraphView> graph;
  OpenDialog open_dialog;
  Console console;
  Timeline timeline;
  KernelsPanel kernels;
  ProfilePanel profile;
  TunePanel tune;
  RulesEditor rules_editor;
  // --script: running until it ends; what it waits for between resumes.
  bool script_running = false, script_failed = false;
  std::string open_failed;   // why FILE (the command line's) did not open; --screenshot then exits 1
  ScriptStep script_wait;          // Frames: script_wait.frames left; Screenshot: the path
  int shot_countdown = 0;          // settled frames to render before the screenshot
  uint64_t published = 0;   // the AppState::document last handed to the command layer
  std::vector<std::pair<std::string, NodeRef>> console_g;   // `g` as last seen there
  bool quit = false;
  bool show_help = false;
  // Background rectangles of this frame (screen pixels, colour), cleared before ImGui
  // draws: the panels and the graph canvas.
  struct Clear {
    ImVec2 min, max;
    ImU32 color;
    bool canvas = false;   // the graph view's canvas: only its tiles drawn on last frame (redraw.h)
  };
  std::vector<Clear> clears;
  void clear_this_window(ImU32 color) {
    ImVec2 p = ImGui::GetWindowPos(), sz = ImGui::GetWindowSize();
    clears.push_back({p, ImVec2(p.x + sz.x, p.y + sz.y), color});
  }
  void clear_backgrounds(int fb_w, int fb_h, ImVec4 dirty) const;
  ImVec2 graph_min{0, 0}, graph_max{0, 0};   // the graph panel's rectangle this frame
  PartialRedraw redraw;

  void load_initial();
  void sync_command_layer();
  void resume_script();
  void script_frame(bool settled, int fb_w, int fb_h);
  void draw_frame();
  void menu_bar();
};

void App::load_initial() {
  if (!opts.level.empty()) {
    if (opts.level == "tensor") state.level = Level::Tensor;
    else if (opts.level == "kernel") state.level = Level::Kernel;
    else state.level = Level::Primitive;
  }
  Level wanted = state.level;
  std::string file = opts.file;
  if (file.empty() && !opts.demo) file = default_file();
  if (opts.demo || file.empty()) {
    state.set_graph(make_demo_mlp(opts.demo_layers), "demo MLP (" + std::to_string(opts.demo_layers) + " hidden layers)");
    state.info(opts.demo ? "opened the demo MLP" : "no FILE and no samples/*.lathe: showing the demo MLP");
  } else if (!state.open(file)) {
    std::string why = state.error ? state.error->diag.format() : "";
    open_failed = why.find(file) != std::string::npos ? why : "cannot open " + file + (why.empty() ? "" : ": " + why);
  }
  if (!opts.level.empty()) state.level = wanted;   // the command line overrides the size rule
  sync_command_layer();   // the script sees the graph as `g`
  if (!opts.script.empty()) {
    std::string dir = opts.screenshot.empty() ? "." : std::filesystem::path(opts.screenshot).parent_path().string();
    std::string err = opts.start_script ? opts.start_script(opts.script, dir.empty() ? "." : dir, state)
                                        : "--script needs the scripting layer, which is not in this build";
    if (!err.empty()) {
      script_failed = true;
      state.error = LoadError{"script " + opts.script + " failed", Diagnostic{err}, ""};
      state.fail(err);
    } else {
      script_running = true;
      resume_script();
    }
  }
  if (!opts.select.empty())
    for (NodeRef n : state.topo)
      if (node_summary(n).find(opts.select) != std::string::npos || (n->op == Op::Input && n->attrs.name == opts.select)) {
        state.select_node(static_cast<int>(n->id), true);
        break;
      }
}

// Runs the script until it pauses (frames, screenshot), ends or fails.
void App::resume_script() {
  if (!script_running || !opts.resume_script) return;
  ScriptStep st;
  try {
    st = opts.resume_script(state);
  } catch (const std::exception& e) {
    st.kind = ScriptStep::Kind::Error, st.error = e.what();
  }
  sync_command_layer();
  script_wait = st;
  if (st.kind == ScriptStep::Kind::Screenshot) shot_countdown = 3;   // tabs and layout settle first
  if (st.kind == ScriptStep::Kind::Done || st.kind == ScriptStep::Kind::Error) script_running = false;
  if (st.kind == ScriptStep::Kind::Done) state.info("script " + opts.script + " finished");
  if (st.kind == ScriptStep::Kind::Error) {
    script_failed = true;
    state.error = LoadError{"script " + opts.script + " failed", Diagnostic{st.error}, ""};
    state.fail(st.error);
  }
}

// After a frame is rendered: counts it toward what the script waits for (only frames
// with the graph laid out count), writes a requested screenshot, resumes the script.
void App::script_frame(bool settled, int fb_w, int fb_h) {
  if (!script_running) return;
  if (script_wait.kind == ScriptStep::Kind::Job) {   // applied at the start of a frame (draw_frame)
    if (!state.jobs.busy()) resume_script();
    return;
  }
  if (!settled) return;
  if (script_wait.kind == ScriptStep::Kind::Frames && --script_wait.frames <= 0) {
    resume_script();
  } else if (script_wait.kind == ScriptStep::Kind::Screenshot && --shot_countdown <= 0) {
    std::string err = write_back_buffer_png(script_wait.path, fb_w, fb_h);
    if (!err.empty()) state.fail("screenshot: " + err);
    else std::printf("lathe gui: wrote %s (%dx%d)\n", script_wait.path.c_str(), fb_w, fb_h);
    resume_script();
  }
}

// The graph shown and the command layer's `g` / `s` follow each other: a file opened in
// the app becomes `g`; a session step or a new `g` from the console is shown.
void App::sync_command_layer() {
  if (state.has_graph && state.document != published && opts.publish_graph) {
    opts.publish_graph(state.graph, state.path, state);
    published = state.document;
    console_g = state.graph.outputs;
  }
  timeline.sync(state);
  poll_program(state);   // a :compile in the console shows here too
}

//-----------------------------------------------------------------------------
// [SECTION] menu bar and shortcuts
//-----------------------------------------------------------------------------

void App::menu_bar() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed('O')) open_dialog.open(state.path);
  if (ImGui::IsKeyPressed(GLFW_KEY_F5) || (io.KeyCtrl && ImGui::IsKeyPressed('R'))) state.reload();
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open…", "Ctrl+O")) open_dialog.open(state.path);
    if (ImGui::MenuItem("Reload", "F5", false, !state.path.empty())) state.reload();
    if (ImGui::MenuItem("Demo graph")) state.set_graph(make_demo_mlp(2), "demo MLP (2 hidden layers)");
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Tensor level", nullptr, state.level == Level::Tensor)) state.set_level(Level::Tensor);
    if (ImGui::MenuItem("Primitive level", nullptr, state.level == Level::Primitive)) state.set_level(Level::Primitive);
    if (ImGui::MenuItem("Kernel level", nullptr, state.level == Level::Kernel)) state.set_level(Level::Kernel);
    ImGui::Separator();
    if (ImGui::MenuItem("Fit to window", "F")) graph->fit();
    if (ImGui::MenuItem("Expand all scopes")) {
      if (state.level == Level::Primitive) state.set_level(Level::Tensor);
      state.expand_all();
    }
    if (ImGui::MenuItem("Collapse all scopes (top level)")) {
      if (state.level == Level::Primitive) state.set_level(Level::Tensor);
      state.collapse_all();
    }
    ImGui::MenuItem("Weights as boxes", nullptr, &state.show_weights);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Mouse and keys")) show_help = true;
    ImGui::EndMenu();
  }
  if (io.KeyCtrl && ImGui::IsKeyPressed('Q')) quit = true;
  // A background job: a spinner, what it does and for how long.
  if (state.jobs.busy()) {
    ImGui::SameLine(0, 24);
    spinner(7, colors::kKernelHit);
    char line[160];
    std::snprintf(line, sizeof line, "%s… %.1f s%s", state.jobs.label().c_str(), state.jobs.seconds(),
                  state.jobs.held() ? " (held)" : "");
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kKernelHit), "%s", line);
  }
  // The file shown, right-aligned.
  std::string t = state.has_graph ? state.title + "  ·  " + std::to_string(state.topo.size()) + " nodes" : "no graph";
  float w = ImGui::CalcTextSize(t.c_str()).x;
  ImGui::SameLine(std::max(ImGui::GetCursorPosX() + 16, ImGui::GetWindowWidth() - w - 16));
  ImGui::TextDisabled("%s", t.c_str());
  ImGui::EndMenuBar();
}

// Clears the window to kWindowBg and each recorded rectangle to its colour, only inside
// `dirty` (display coordinates: a partial redraw keeps the rest). Under llvmpipe a whole
// clear is a memset, but a scissored one is a quad that shades every pixel (as a
// background quad would, less the texture and blending): so each pixel is cleared once,
// to its final colour (a rectangle minus the ones recorded after it; the graph panel, its
// canvas and the window's background overlap, and clearing them in turn tripled the
// cost of a pan frame).
void App::clear_backgrounds(int fb_w, int fb_h, ImVec4 dirty) const {
  ImVec2 scale = ImGui::GetIO().DisplayFramebufferScale;
  auto to_px = [&](ImVec4 r) {   // display rectangle -> framebuffer pixels (x0, y0, x1, y1 from the top)
    return ClearRect{static_cast<int>(std::floor(r.x * scale.x)), static_cast<int>(std::floor(r.y * scale.y)),
                     static_cast<int>(std::ceil(r.z * scale.x)), static_cast<int>(std::ceil(r.w * scale.y))};
  };
  ClearRect screen{0, 0, fb_w, fb_h};
  ClearRect d = intersect(to_px(dirty), screen);
  struct R {
    ClearRect r;
    ImU32 color;
    bool canvas;
  };
  std::vector<R> rects;   // in order: later ones cover earlier ones
  bool whole = d.x0 <= 0 && d.y0 <= 0 && d.x1 >= fb_w && d.y1 >= fb_h;
  if (!whole) rects.push_back({d, colors::kWindowBg, false});
  for (const Clear& c : clears) rects.push_back({intersect(to_px(ImVec4(c.min.x, c.min.y, c.max.x, c.max.y)), d), c.color, c.canvas});
  if (whole) {   // the unscissored clear is the fast one
    ImVec4 bg = ImGui::ColorConvertU32ToFloat4(colors::kWindowBg);
    glClearColor(bg.x, bg.y, bg.z, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
  }
  glEnable(GL_SCISSOR_TEST);
  for (size_t i = 0; i < rects.size(); ++i) {
    std::vector<ClearRect> parts{rects[i].r};
    if (rects[i].canvas) {   // a partial redraw: what was drawn on it last frame (else all of it)
      parts.clear();
      for (const ClearRect& t : redraw.canvas_clears(graph->canvas_min(), graph->canvas_max(), scale))
        parts.push_back(intersect(t, rects[i].r));
    }
    for (size_t j = i + 1; j < rects.size() && !parts.empty(); ++j) parts = subtract(parts, rects[j].r);
    ImVec4 col = ImGui::ColorConvertU32ToFloat4(rects[i].color);
    glClearColor(col.x, col.y, col.z, 1.0f);
    for (const ClearRect& r : parts) {
      if (r.x1 <= r.x0 || r.y1 <= r.y0) continue;
      glScissor(r.x0, fb_h - r.y1, r.x1 - r.x0, r.y1 - r.y0);
      glClear(GL_COLOR_BUFFER_BIT);
    }
  }
  glDisable(GL_SCISSOR_TEST);
}

void App::draw_frame() {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(4, 4));
  ImGui::Begin("##lathe", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_MenuBar | ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground);
  clears.clear();
  ImGui::PopStyleVar();
  state.jobs.poll(state);   // a finished compile / profile / run shows from this frame on
  menu_bar();
  sync_command_layer();

  const float bar = 6.0f;
  ImVec2 avail = ImGui::GetContentRegionAvail();
  settings.clamp();
  float top_h = std::floor((avail.y - bar) * settings.split_y);
  float left_w = std::floor((avail.x - bar) * settings.split_x);
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(0, 0));

  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(8, 5));
  ImGui::BeginChild("graph-panel", ImVec2(left_w, top_h), true, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  clear_this_window(colors::kPanelBg);
  graph_min = ImGui::GetWindowPos();
  graph_max = ImVec2(graph_min.x + ImGui::GetWindowSize().x, graph_min.y + ImGui::GetWindowSize().y);
  draw_error_panel(state, fonts);
  graph->draw(state);
  if (graph->canvas_max().x > graph->canvas_min().x) clears.push_back({graph->canvas_min(), graph->canvas_max(), colors::kCanvas, true});
  busy_badge(state);
  ImGui::EndChild();
  ImGui::PopStyleVar();

  ImGui::SameLine();
  splitter("##vsplit", true, ImVec2(bar, top_h), avail.x - bar, &settings.split_x);
  ImGui::SameLine();

  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(8, 5));
  ImGui::BeginChild("side-panel", ImVec2(0, top_h), true);
  clear_this_window(colors::kPanelBg);
  if (ImGui::BeginTabBar("side-tabs")) {
    std::string req = state.side_tab_request;
    state.side_tab_request.clear();
    auto flags = [&](const char* name) { return req == name ? ImGuiTabItemFlags_SetSelected : 0; };
    if (ImGui::BeginTabItem("Inspector", nullptr, flags("Inspector"))) {
      ImGui::BeginChild("inspector");
      draw_inspector(state, fonts);
      ImGui::EndChild();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Kernels", nullptr, flags("Kernels"))) {
      kernels.draw(state, fonts);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Profile", nullptr, flags("Profile"))) {
      profile.draw(state);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::PopStyleVar();

  splitter("##hsplit", false, ImVec2(avail.x, bar), avail.y - bar, &settings.split_y);

  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(8, 5));
  ImGui::BeginChild("bottom-panel", ImVec2(0, 0), true);
  clear_this_window(colors::kPanelBg);
  if (ImGui::BeginTabBar("bottom-tabs")) {
    std::string req = state.bottom_tab_request;
    state.bottom_tab_request.clear();
    auto flags = [&](const char* name) { return req == name ? ImGuiTabItemFlags_SetSelected : 0; };
    // The Tune tab shows a plot and two loop IRs: asked for, it gets half the window (from
    // the next frame; the splitter moves it back).
    if (req == "Tune" && settings.split_y > 0.5f) settings.split_y = 0.5f;
    if (ImGui::BeginTabItem("Log", nullptr, flags("Log"))) {
      draw_log_panel(state, fonts);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Timeline", nullptr, flags("Timeline"))) {
      timeline.draw(state);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Rules", nullptr, flags("Rules"))) {
      rules_editor.draw(state, fonts, timeline);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Console", nullptr, flags("Console"))) {
      console.draw(state, fonts);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Tune", nullptr, flags("Tune"))) {
      tune.draw(state, fonts);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::PopStyleVar();
  ImGui::PopStyleVar();

  open_dialog.draw(state);
  if (show_help) {
    ImGui::OpenPopup("Mouse and keys");
    show_help = false;
  }
  if (ImGui::BeginPopupModal("Mouse and keys", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted(
        "drag            pan\n"
        "wheel           zoom at the cursor\n"
        "F               fit the graph to the window\n"
        "click           select a box; a composite expands\n"
        "right-click     expand / collapse menu\n"
        "Ctrl+F          search (op, name, shape, regex); Enter cycles hits\n"
        "Ctrl+O / F5     open / reload\n"
        "Ctrl+S          save the rules file (Rules tab)\n"
        "Ctrl+Q          quit");
    if (ImGui::Button("Close") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  ImGui::End();
}

// CPU time used by the whole process so far (all threads), in ms.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

}  // namespace

//-----------------------------------------------------------------------------
// [SECTION] start-up: display, window, GL context, ImGui
// [SECTION] the frame loop (interactive and headless)
//-----------------------------------------------------------------------------

int run_gui(const GuiOptions& opts) {
  App app;
  app.opts = opts;
  app.headless = !opts.screenshot.empty();
  app.timeline.run = opts.console;
  app.timeline.session = opts.session;
  app.state.resolve_rules = opts.resolve_rules;
  app.state.sync = [&app] { app.sync_command_layer(); };
  if (opts.console) {
    // Console lines go through the command layer; a new `g` from it is then shown.
    app.console.eval = [&app](const std::string& line, AppState& s) {
      // `:compile [backend]` goes to the background job, as the Compile button does (the
      // console's `p` is the program once it is done); everything else to the command layer.
      std::istringstream words(line);
      std::string cmd, backend, extra;
      words >> cmd >> backend >> extra;
      if (cmd == ":compile" && extra.empty() && s.hooks.build) {
        if (!start_compile(s, backend)) return ConsoleResult{s.log.empty() ? "cannot compile" : s.log.back().text, false};
        return ConsoleResult{"compiling" + (backend.empty() ? "" : " with " + backend) +
                             " in the background: the Kernels panel and `p` show it when done"};
      }
      ConsoleResult r = app.opts.console(line, s);
      if (app.opts.console_graph)
        if (std::optional<Graph> g = app.opts.console_graph(); g && g->outputs != app.console_g) {
          app.console_g = g->outputs;
          s.set_graph(std::move(*g), "g (console)");
          app.published = s.document;   // it came from there
        }
      return r;
    };
  }
  if (!app.headless) app.settings = load_gui_settings();
  else app.settings.window_w = opts.width, app.settings.window_h = opts.height;

  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    std::cerr << "lathe gui: no display (" << (g_glfw_error.empty() ? "glfwInit failed" : g_glfw_error)
              << "); run it under X, or headless: xvfb-run -a lathe gui FILE --screenshot OUT.png\n";
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  GLFWwindow* window = glfwCreateWindow(app.settings.window_w, app.settings.window_h, "Lathe", nullptr, nullptr);
  if (!window) {
    std::cerr << "lathe gui: cannot create an OpenGL 3.3 window (" << g_glfw_error << ")\n";
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(app.headless ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  static std::string ini;   // ImGui keeps the pointer
  ini = app.headless ? "" : imgui_ini_path();
  std::error_code ec;
  if (!ini.empty()) std::filesystem::create_directories(config_dir(), ec);   // else ImGui cannot save
  io.IniFilename = ini.empty() ? nullptr : ini.c_str();
  install_event_counters(window);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  app.fonts = load_fonts(15.0f);
  apply_dark_theme();
  app.graph = std::make_unique<GraphView>(app.fonts);
  app.state.hooks = opts.program;
  app.state.jobs.wake = [] { glfwPostEmptyEvent(); };
  app.load_initial();

  int settled_frames = 0;
  std::vector<double> frame_ms;
  auto start = std::chrono::steady_clock::now();
  int rc = 0;
  std::string title_shown;
  // Idle frames are not rendered: after the last input event (and the frames ImGui needs
  // to settle hover state), the loop sleeps until the next event, a job's wake-up or a
  // one-second tick. Software OpenGL spends most of a frame rasterizing, so a window that
  // sits there would otherwise keep a core busy.
  int quiet_frames = 0;
  uint64_t seen_events = g_input_events, seen_jobs = app.state.jobs.finished;
  auto last_draw = std::chrono::steady_clock::now();
  while (!glfwWindowShouldClose(window) && !app.quit) {
    bool animating = app.headless || app.graph->settling() || app.script_running;
    bool typing = ImGui::GetIO().WantTextInput;   // the caret blinks
    // While a profile job measures, the window draws once a second (the title and the
    // menu bar's spinner say it runs): rasterizing on the CPU would compete with the
    // kernels for the cores and inflate their times. The job's end wakes the loop.
    // So does a Tune job that times candidates (its plot and progress move once a second).
    bool profiling = app.state.jobs.busy() && (app.state.jobs.kind() == "profile" ||
                                               (app.state.jobs.kind() == "tune" && app.state.tune &&
                                                app.state.tune->req.measure == "time"));
    if (profiling) {
      glfwWaitEventsTimeout(1.0);
      double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_draw).count();
      if (app.state.jobs.busy() && since < 1.0) continue;
    } else if (animating) glfwPollEvents();
    else if (app.state.jobs.busy()) glfwWaitEventsTimeout(1.0 / 30);   // the spinner turns; the job's end wakes us
    else glfwWaitEventsTimeout(quiet_frames < 3 || typing || app.graph->dot_pending() ? 0.25 : 1.0);
    bool woke = g_input_events != seen_events || app.state.jobs.finished != seen_jobs || app.state.jobs.busy() ||
                app.graph->dot_ready();   // dot finished a large graph drawn in quick rows until now
    seen_events = g_input_events, seen_jobs = app.state.jobs.finished;
    quiet_frames = woke || animating ? 0 : quiet_frames + 1;
    if (quiet_frames > 3 && !typing && quiet_frames % 8 != 0) continue;   // nothing changed: keep the last image
    auto t_begin = std::chrono::steady_clock::now();
    double cpu_begin = process_cpu_ms();
    last_draw = t_begin;
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    // Headless: no pointer, so wherever Xvfb's cursor sits it hovers nothing (no tooltips
    // in screenshots).
    if (app.headless) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
    ImGui::NewFrame();
    app.draw_frame();
    ImGui::Render();
    auto t_ui = std::chrono::steady_clock::now();
    int fb_w, fb_h;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    // The window, the panels and the canvas draw no background quads: their areas are
    // cleared here, so llvmpipe shades each pixel two or three times less.
    // While only the graph panel changed (panning, zooming), only it is drawn (redraw.h).
    ImDrawData* dd = ImGui::GetDrawData();
    if (app.state.full_redraw_request) app.redraw.invalidate(), app.state.full_redraw_request = false;
    ImVec4 dirty = app.redraw.plan(dd, app.graph_min, app.graph_max, "##lathe/graph-panel", fb_w, fb_h);
    if (app.redraw.last_partial()) PartialRedraw::clip(dd, dirty);
    app.clear_backgrounds(fb_w, fb_h, dirty);
    ImGui_ImplOpenGL3_RenderDrawData(dd);
    glFinish();   // so that render_ms is the rasterization, not a queue
    auto t_render = std::chrono::steady_clock::now();

    std::string title = "Lathe — " + (app.state.has_graph ? app.state.title : std::string("no graph"));
    if (profiling) title += app.state.jobs.kind() == "tune" ? "  (tuning…)" : "  (profiling…)";
    if (title != title_shown) glfwSetWindowTitle(window, title.c_str()), title_shown = title;

    auto now = std::chrono::steady_clock::now();
    // A script waiting for frames or a screenshot counts this one once the layout is on
    // screen (or after a generous timeout).
    bool waited_too_long = std::chrono::duration<double>(now - start).count() > 120.0;
    if (app.script_running) {
      app.script_frame(!app.graph->settling() || waited_too_long, fb_w, fb_h);
      if (app.script_running) start = now;   // the final screenshot's timeout starts after the script
    } else if (app.headless) {
      // Count frames only once the layout is on screen and no job is running (or after a
      // generous timeout).
      if ((!app.graph->settling() && !app.state.jobs.busy()) || waited_too_long) {
        if (++settled_frames >= std::max(1, opts.frames)) {
          std::string err = write_back_buffer_png(opts.screenshot, fb_w, fb_h);
          if (!err.empty()) {
            std::cerr << "lathe gui: " << err << "\n";
            rc = 1;
          } else {
            std::sort(frame_ms.begin(), frame_ms.end());
            double median = frame_ms.empty() ? 0 : frame_ms[frame_ms.size() / 2];
            std::printf("lathe gui: wrote %s (%dx%d; %d frames, median frame %.1f ms)\n", opts.screenshot.c_str(),
                        fb_w, fb_h, settled_frames, median);
          }
          if (!app.open_failed.empty()) {
            std::cerr << "lathe gui: " << app.open_failed << "\n";
            rc = 1;
          }
          if (app.script_failed) {
            std::cerr << "lathe gui: the script failed: " << (app.state.error ? app.state.error->diag.message : "") << "\n";
            rc = 1;
          }
          break;
        }
      }
    }
    app.redraw.track(dd, app.graph->canvas_min(), app.graph->canvas_max(), "##lathe/graph-panel");
    app.redraw.probe_before_swap(fb_w, fb_h);
    glfwSwapBuffers(window);
    app.redraw.probe_after_swap(fb_w, fb_h);
    auto t_end = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    AppState::FrameTiming ft;
    ft.total_ms = ms(t_begin, t_end);
    ft.ui_ms = ms(t_begin, t_ui);
    ft.render_ms = ms(t_ui, t_render);
    ft.swap_ms = ms(t_render, t_end);
    ft.cpu_ms = process_cpu_ms() - cpu_begin;
    ft.vertices = ImGui::GetDrawData() ? ImGui::GetDrawData()->TotalVtxCount : 0;
    ft.partial = app.redraw.last_partial();
    app.state.frames.push_back(ft);
    if (app.state.frames.size() > 240) app.state.frames.erase(app.state.frames.begin(), app.state.frames.begin() + 120);
    if (app.headless && settled_frames > 1) frame_ms.push_back(ft.total_ms);
  }

  if (!app.headless) {
    glfwGetWindowSize(window, &app.settings.window_w, &app.settings.window_h);
    if (!app.state.path.empty()) app.settings.last_file = app.state.path;
    save_gui_settings(app.settings);
  }
  if (app.state.tune) app.state.tune->stop = true;   // a Tune job ends after its batch in flight
  app.state.jobs.join();   // a job still running finishes first (its wake call needs GLFW)
  app.graph.reset();   // before the GL context goes (a layout thread still in dot is left to finish)
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace lathe::views
