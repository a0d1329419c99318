// gui_script.cpp — the `gui` Lua table and the --script coroutine driver for the desktop
// app (see gui_script.h). Every `gui` function acts on the views' AppState through the
// same commands the windows use (views/app_actions.h), so a script sees what a user
// clicking around would.
//
//   gui.open(path)            gui.level([name])        gui.color([mode])
//   gui.select(text | id)     gui.select_kernel(k | name)   gui.tab(name)
//   gui.compile([backend])    gui.profile([runs])      gui.run()      gui.stats()
//   gui.kernel_code(kind)     gui.state()              gui.frames(n)  gui.screenshot(path)
//   gui.expand(path)          gui.collapse(path)  gui.collapse_all()  gui.weights([on])  gui.boxes()       gui.fit()      gui.frame_ms([n])
//   gui.frame_stats([n])     gui.zoom([z])            gui.relayout()
//   gui.wait()                gui.job()                gui.hold_jobs(on)
//   gui.tune{…}  gui.tune_result()  gui.tune_cancel()  gui.tune_apply()   (gui_script_tune.cpp)
//
// Compile, profile and run are background jobs (views/jobs.h). gui.compile / profile / run
// wait for theirs unless told not to: in a --script the coroutine yields "job" and the app
// renders until the job is applied; elsewhere (the console) the call blocks. Rewrite and
// rules-editor functions are in gui_script_rewrite.cpp.
#if defined(HAVE_LATHE_VIEWS) && defined(HAVE_LATHE_SCRIPTING)
#include "app/gui_script.h"

#include <chrono>

#include <lua.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "backends/backend.h"
#include "core/ir/dot.h"
#include "core/loop/loop_print.h"
#include "scripting/binding.h"
#include "scripting/program_box.h"
#include "views/app_actions.h"

namespace lathe::app {
namespace {
views::AppState* g_state = nullptr;
}  // namespace

namespace gui_lua {

views::AppState& app(lua_State* L) {
  if (!g_state) script::raise(L, "gui: the desktop app is not running");
  return *g_state;
}

void set_str(lua_State* L, const char* k, const std::string& v) {
  lua_pushstring(L, v.c_str());
  lua_setfield(L, -2, k);
}
void set_num(lua_State* L, const char* k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}
void set_int(lua_State* L, const char* k, int64_t v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}
void set_bool(lua_State* L, const char* k, bool v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, k);
}

}  // namespace gui_lua

namespace {

using gui_lua::app;
using gui_lua::set_bool;
using gui_lua::set_int;
using gui_lua::set_num;
using gui_lua::set_str;

// A failed command raises with what the error panel shows.
[[noreturn]] void raise_panel(lua_State* L, views::AppState& s, const std::string& fallback) {
  script::raise(L, s.error ? s.error->what + ": " + s.error->diag.message : fallback);
}

int l_state(lua_State* L) {
  views::AppState& s = app(L);
  lua_createtable(L, 0, 24);
  set_str(L, "file", s.path);
  set_str(L, "title", s.title);
  set_int(L, "nodes", static_cast<int64_t>(s.topo.size()));
  set_str(L, "level", views::level_name(s.level));
  set_str(L, "color", views::color_mode_name(s.color_mode));
  set_int(L, "boxes", static_cast<int64_t>(s.view_boxes));
  set_int(L, "edges", static_cast<int64_t>(s.view_edges));
  set_int(L, "highlighted", static_cast<int64_t>(s.view_highlighted));
  set_int(L, "folded", static_cast<int64_t>(s.view_folded));
  set_int(L, "frames", static_cast<int64_t>(s.view_frames));
  set_int(L, "legend", static_cast<int64_t>(s.view_legend_items));
  set_int(L, "profile_columns", s.view_profile_columns);
  lua_pushboolean(L, s.view_toolbar_fits);
  lua_setfield(L, -2, "toolbar_fits");
  set_int(L, "search_hits", static_cast<int64_t>(s.view_search_hits));
  set_int(L, "search_cursor", s.view_search_cursor + 1);
  set_num(L, "layout_ms", s.view_layout_ms);
  set_num(L, "zoom", s.view_zoom);
  set_bool(L, "weights", s.show_weights);
  set_int(L, "expanded", static_cast<int64_t>(s.expanded.size()));
  // The last version change as drawn: "stable" (old places kept) or "dot" (laid out afresh);
  // "provisional" while a large graph shows quick rows by rank and dot still runs.
  if (!s.view_layout.empty()) set_str(L, "layout", s.view_layout);
  set_int(L, "ghosts", static_cast<int64_t>(s.view_ghosts));
  set_int(L, "added_boxes", static_cast<int64_t>(s.view_added));
  set_int(L, "kept", static_cast<int64_t>(s.view_kept));
  set_int(L, "moved", static_cast<int64_t>(s.view_moved));
  if (NodeRef n = s.selected_node()) {
    set_int(L, "selected", n->id);
    set_str(L, "selected_summary", node_summary(n));
  }
  if (!s.selected_group.empty()) set_str(L, "selected_group", s.selected_group);
  set_bool(L, "compiled", s.compiled != nullptr);
  set_int(L, "kernels", s.compiled ? s.compiled->num_kernels() : 0);
  if (s.compiled) {
    set_str(L, "backend", s.compiled->backend);
    set_bool(L, "stale", s.compiled->graph_version != s.version);
    if (s.selected_kernel >= 0) {
      set_int(L, "selected_kernel", s.selected_kernel + 1);
      set_str(L, "kernel_name", s.compiled->program().kg.kernels[s.selected_kernel].name);
    }
  }
  set_bool(L, "profiled", s.compiled && s.compiled->profile);
  if (s.compiled && s.compiled->profile) {
    set_num(L, "total_ms", s.compiled->profile->total_ms);
    double mins = 0;   // the kernels' fastest calls added up: what load moves least
    for (const KernelProfile& k : s.compiled->profile->kernels) mins += k.min_ms;
    set_num(L, "kernels_min_ms", mins);
  }
  set_bool(L, "ran", s.run && s.run->graph_version == s.version);
  if (s.error) set_str(L, "error", s.error->what + ": " + s.error->diag.message);
  set_int(L, "log_lines", static_cast<int64_t>(s.log.size()));
  if (s.jobs.busy()) set_str(L, "busy", s.jobs.kind());
  set_int(L, "jobs_finished", static_cast<int64_t>(s.jobs.finished));
  if (!s.rules_source.empty()) set_str(L, "rules", s.rules_source);
  if (!s.break_rule.empty()) {
    set_str(L, "break_rule", s.break_rule);
    set_int(L, "break_node", s.break_node);
  }
  if (!s.rules_doc.path.empty()) set_str(L, "rules_file", s.rules_doc.path);
  set_bool(L, "rules_dirty", s.rules_doc.dirty);
  if (!s.rules_doc.error.empty()) {
    set_str(L, "rules_error", s.rules_doc.error);
    set_int(L, "rules_error_line", s.rules_doc.error_line);
  }
  return 1;
}

// The last n rendered frames' timings (AppState::frames), oldest first.
std::vector<views::AppState::FrameTiming> last_frames(lua_State* L, int arg) {
  views::AppState& s = app(L);
  size_t n = static_cast<size_t>(std::max<lua_Integer>(1, luaL_optinteger(L, arg, 30)));
  return {s.frames.end() - std::min(n, s.frames.size()), s.frames.end()};
}

double median_of(const std::vector<views::AppState::FrameTiming>& f, double views::AppState::FrameTiming::*part) {
  std::vector<double> t;
  for (auto& x : f) t.push_back(x.*part);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// gui.frame_ms([n]): the median time of the last n frames (default 30), in ms.
int l_frame_ms(lua_State* L) {
  auto f = last_frames(L, 1);
  if (f.empty()) return 0;
  lua_pushnumber(L, median_of(f, &views::AppState::FrameTiming::total_ms));
  return 1;
}

// gui.frame_stats([n]): medians over the last n frames of where the time went, and what
// the graph view drew in the last one.
int l_frame_stats(lua_State* L) {
  views::AppState& s = app(L);
  auto f = last_frames(L, 1);
  if (f.empty()) return 0;
  using FT = views::AppState::FrameTiming;
  lua_createtable(L, 0, 8);
  set_int(L, "frames", static_cast<int64_t>(f.size()));
  set_num(L, "total_ms", median_of(f, &FT::total_ms));
  set_num(L, "ui_ms", median_of(f, &FT::ui_ms));
  set_num(L, "render_ms", median_of(f, &FT::render_ms));
  set_num(L, "swap_ms", median_of(f, &FT::swap_ms));
  set_num(L, "cpu_ms", median_of(f, &FT::cpu_ms));
  set_int(L, "vertices", f.back().vertices);
  int partial = 0;
  for (auto& t : f) partial += t.partial ? 1 : 0;   // frames that drew only the graph panel
  set_int(L, "partial", partial);
  set_int(L, "drawn_boxes", static_cast<int64_t>(s.view_drawn_boxes));
  set_bool(L, "text", s.view_text);
  return 1;
}

// gui.zoom([z]): zooms the graph view to z about its centre (from the next frame);
// returns the zoom shown last frame.
int l_zoom(lua_State* L) {
  views::AppState& s = app(L);
  if (!lua_isnoneornil(L, 1)) s.zoom_request = static_cast<float>(luaL_checknumber(L, 1));
  lua_pushnumber(L, s.view_zoom);
  return 1;
}

// gui.relayout(): after rewrite steps, lay the graph out afresh with dot (the Re-layout
// button); the script's next frames wait for it.
int l_relayout(lua_State* L) {
  app(L).relayout_request = true;
  return 0;
}

// gui.search(text [, steps]): types text into the graph view's search box and steps to
// the next hit `steps` times (default 1), as Enter does; applied at the next frame.
int l_search(lua_State* L) {
  views::AppState& s = app(L);
  s.search_request = luaL_checkstring(L, 1);
  s.search_steps = static_cast<int>(luaL_optinteger(L, 2, 1));
  s.search_pending = true;
  return 0;
}

// gui.pan(dx, dy): move the view by dx, dy screen pixels (as a drag does).
int l_pan(lua_State* L) {
  app(L).pan_request_x += static_cast<float>(luaL_checknumber(L, 1));
  app(L).pan_request_y += static_cast<float>(luaL_checknumber(L, 2));
  return 0;
}

// gui.full_redraw(): the next frame draws the whole window afresh (no partial redraw), so
// a test can compare a screenshot after partial frames with one drawn whole.
int l_full_redraw(lua_State* L) {
  app(L).full_redraw_request = true;
  return 0;
}

// gui.clock(): seconds since the process started (a steady clock), for benchmark scripts.
const auto g_process_start = std::chrono::steady_clock::now();   // static initialization: before main()
int l_clock(lua_State* L) {
  lua_pushnumber(L, std::chrono::duration<double>(std::chrono::steady_clock::now() - g_process_start).count());
  return 1;
}

int l_fit(lua_State* L) {
  std::string mode = luaL_optstring(L, 1, "all");
  if (mode != "all" && mode != "readable") script::raise(L, "gui.fit: \"all\" or \"readable\"");
  app(L).fit_request = true;
  app(L).fit_readable = mode == "readable";
  return 0;
}

int l_open(lua_State* L) {
  views::AppState& s = app(L);
  if (!s.open(luaL_checkstring(L, 1))) raise_panel(L, s, "cannot open");
  return 0;
}

int l_level(lua_State* L) {
  views::AppState& s = app(L);
  if (!lua_isnoneornil(L, 1)) {
    auto l = views::level_from_name(luaL_checkstring(L, 1));
    if (!l) script::raise(L, std::string("gui.level: unknown level '") + lua_tostring(L, 1) + "' (tensor, primitive or kernel)");
    s.set_level(*l);
    s.center_request = s.selected >= 0 || s.selected_kernel >= 0;
  }
  lua_pushstring(L, views::level_name(s.level));
  return 1;
}

int l_color(lua_State* L) {
  views::AppState& s = app(L);
  if (!lua_isnoneornil(L, 1)) {
    auto m = views::color_mode_from_name(luaL_checkstring(L, 1));
    if (!m) script::raise(L, std::string("gui.color: unknown mode '") + lua_tostring(L, 1) + "' (category, kernel or heat)");
    if (*m == views::ColorMode::Kernel && !s.compiled) script::raise(L, "gui.color: compile first (gui.compile())");
    if (*m == views::ColorMode::Heat && !(s.compiled && s.compiled->profile)) script::raise(L, "gui.color: profile first (gui.profile())");
    s.color_mode = *m;
  }
  lua_pushstring(L, views::color_mode_name(s.color_mode));
  return 1;
}

int l_select(lua_State* L) {
  views::AppState& s = app(L);
  int id = -1;
  if (lua_isinteger(L, 1)) {
    id = static_cast<int>(lua_tointeger(L, 1));
    NodeRef n = id >= 0 ? node_by_id(static_cast<uint32_t>(id)) : nullptr;
    if (!n || !s.topo_index.count(n)) script::raise(L, "gui.select: the graph shown has no node %" + std::to_string(id));
  } else {
    std::string text = luaL_checkstring(L, 1);
    id = views::find_node(s, text);
    if (id < 0) script::raise(L, "gui.select: no node matches '" + text + "'");
  }
  s.reveal(id);   // open the scopes that hide it
  s.select_node(id, true);
  lua_pushinteger(L, id);
  return 1;
}

int l_select_kernel(lua_State* L) {
  views::AppState& s = app(L);
  if (!s.compiled) script::raise(L, "gui.select_kernel: nothing compiled yet (gui.compile())");
  const auto& ks = s.compiled->program().kg.kernels;
  int k = -1;
  if (lua_isinteger(L, 1)) {
    k = static_cast<int>(lua_tointeger(L, 1)) - 1;
  } else {
    std::string name = luaL_checkstring(L, 1);
    for (size_t i = 0; i < ks.size() && k < 0; ++i)
      if (ks[i].name == name || ks[i].name.find(name) != std::string::npos) k = static_cast<int>(i);
  }
  if (k < 0 || k >= static_cast<int>(ks.size()))
    script::raise(L, "gui.select_kernel: no such kernel (1.." + std::to_string(ks.size()) + " or a name)");
  s.select_kernel(k, true);
  lua_pushstring(L, ks[k].name.c_str());
  return 1;
}

int l_tab(lua_State* L) {
  views::AppState& s = app(L);
  std::string t = luaL_checkstring(L, 1);
  if (t == "inspector" || t == "Inspector") s.side_tab_request = "Inspector";
  else if (t == "kernels" || t == "Kernels") s.side_tab_request = "Kernels";
  else if (t == "profile" || t == "Profile") s.side_tab_request = "Profile";
  else if (t == "loop" || t == "source" || t == "asm") s.side_tab_request = "Kernels", s.code_tab_request = t;
  else if (t == "roofline" || t == "bars") s.side_tab_request = "Profile", s.profile_view_request = t;
  else if (t == "log" || t == "Log") s.bottom_tab_request = "Log";
  else if (t == "timeline" || t == "Timeline") s.bottom_tab_request = "Timeline";
  else if (t == "rules" || t == "Rules") s.bottom_tab_request = "Rules";
  else if (t == "console" || t == "Console") s.bottom_tab_request = "Console";
  else if (t == "tune" || t == "Tune") s.bottom_tab_request = "Tune";
  else script::raise(L, "gui.tab: unknown tab '" + t + "' (inspector, kernels, profile, loop, source, asm, roofline, bars, log, timeline, rules, console, tune)");
  return 0;
}

// gui._start(kind [, arg]): starts a background job ("compile" with a backend, "profile"
// with a run count, "run"). True when a job runs now (gui._await waits for it); false
// when the work was done at once (a build without background compiling).
int l_start(lua_State* L) {
  views::AppState& s = app(L);
  std::string kind = luaL_checkstring(L, 1);
  uint64_t before = s.jobs.finished;
  bool ok = false;
  if (kind == "compile") {
    if (!s.has_graph) script::raise(L, "gui.compile: no graph is open");
    ok = views::start_compile(s, luaL_optstring(L, 2, ""));
    if (!ok) raise_panel(L, s, "gui.compile failed");
  } else if (kind == "profile") {
    if (!s.compiled) script::raise(L, "gui.profile: nothing compiled yet (gui.compile())");
    ok = views::start_profile(s, static_cast<int>(luaL_optinteger(L, 2, 10)));
    if (!ok) script::raise(L, "gui.profile: could not start (" + (s.log.empty() ? std::string("?") : s.log.back().text) + ")");
  } else if (kind == "run") {
    if (!s.has_graph) script::raise(L, "gui.run: no graph is open");
    ok = views::start_run(s);
    if (!ok) script::raise(L, "gui.run: could not start (" + (s.log.empty() ? std::string("?") : s.log.back().text) + ")");
  } else {
    script::raise(L, "gui._start: compile, profile or run");
  }
  lua_pushboolean(L, s.jobs.busy() && s.jobs.finished == before);
  return 1;
}

int l_busy(lua_State* L) {
  lua_pushboolean(L, app(L).jobs.busy());
  return 1;
}

int l_block(lua_State* L) {
  views::finish_job(app(L));
  return 0;
}

int l_job_error(lua_State* L) {
  views::AppState& s = app(L);
  if (s.jobs.last_error.empty()) return 0;
  lua_pushstring(L, s.jobs.last_error.c_str());
  return 1;
}

// gui.job(): the running job {kind, label, seconds, held}, or nil.
int l_job(lua_State* L) {
  views::AppState& s = app(L);
  if (!s.jobs.busy()) return 0;
  lua_createtable(L, 0, 4);
  set_str(L, "kind", s.jobs.kind());
  set_str(L, "label", s.jobs.label());
  set_num(L, "seconds", s.jobs.seconds());
  set_bool(L, "held", s.jobs.held());
  return 1;
}

int l_hold_jobs(lua_State* L) {
  app(L).jobs.hold(lua_toboolean(L, 1));
  return 0;
}

int l_stats(lua_State* L) {
  views::AppState& s = app(L);
  NodeRef n = s.selected_node();
  const views::NodeStats* st = n ? views::node_stats(s, n->id) : nullptr;
  if (!st) return 0;
  lua_createtable(L, 0, 9);
  set_bool(L, "ok", st->ok);
  if (!st->ok) set_str(L, "error", st->error);
  set_int(L, "count", st->count);
  set_int(L, "nans", st->nans);
  set_int(L, "infs", st->infs);
  set_num(L, "min", st->min);
  set_num(L, "max", st->max);
  set_num(L, "mean", st->mean);
  set_num(L, "std", st->stddev);
  return 1;
}

// The text the kernels panel shows for the selected kernel: "loop", "source" or "asm".
int l_kernel_code(lua_State* L) {
  views::AppState& s = app(L);
  std::string kind = luaL_optstring(L, 1, "loop");
  if (!s.compiled || s.selected_kernel < 0) script::raise(L, "gui.kernel_code: select a kernel first");
  int k = s.selected_kernel;
  if (kind == "loop") {
    lua_pushstring(L, loop::print_loop(s.compiled->program().funcs.at(k)).c_str());
    return 1;
  }
  if (kind != "source" && kind != "asm") script::raise(L, "gui.kernel_code: loop, source or asm");
  views::KernelCode c = s.hooks.code(*s.compiled->exe, k, kind == "asm");
  lua_pushstring(L, (kind == "asm" ? c.assembly : c.source).c_str());
  return 1;
}

// gui.expand(path) / gui.collapse(path): a scope at the tensor or kernel level (from the
// primitive level they switch to the tensor level). An unknown scope is an error.
bool known_scope(const views::AppState& s, const std::string& p) {
  for (NodeRef n : s.topo) {
    const std::string& q = n->prov.path;
    if (q == p || (q.size() > p.size() && q.compare(0, p.size(), p) == 0 && q[p.size()] == '/')) return true;
  }
  return false;
}

int l_expand(lua_State* L) {
  views::AppState& s = app(L);
  std::string p = luaL_checkstring(L, 1);
  if (!known_scope(s, p)) script::raise(L, "gui.expand: no scope '" + p + "' in the graph shown");
  if (s.level == views::Level::Primitive && !s.primitive_frames()) s.set_level(views::Level::Tensor);
  s.expand(p);
  return 0;
}

int l_collapse(lua_State* L) {
  views::AppState& s = app(L);
  std::string p = luaL_checkstring(L, 1);
  if (!known_scope(s, p)) script::raise(L, "gui.collapse: no scope '" + p + "' in the graph shown");
  if (s.level == views::Level::Primitive && !s.primitive_frames()) s.set_level(views::Level::Tensor);
  s.collapse(p);
  return 0;
}

int l_collapse_all(lua_State* L) {
  views::AppState& s = app(L);
  if (s.level == views::Level::Primitive) s.set_level(views::Level::Tensor);
  s.collapse_all();
  return 0;
}

// gui.weights([on]): weights and constants as boxes (true) or as attributes of their reader.
int l_weights(lua_State* L) {
  views::AppState& s = app(L);
  if (!lua_isnoneornil(L, 1)) s.show_weights = lua_toboolean(L, 1);
  lua_pushboolean(L, s.show_weights);
  return 1;
}

// gui.boxes(): the first label line of each box shown; gui.frames_shown(): the scopes drawn as frames.
int l_boxes(lua_State* L) {
  views::AppState& s = app(L);
  lua_createtable(L, static_cast<int>(s.view_box_titles.size()), 0);
  for (size_t i = 0; i < s.view_box_titles.size(); ++i) {
    lua_pushstring(L, s.view_box_titles[i].c_str());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_createtable(L, static_cast<int>(s.view_frame_paths.size()), 0);
  for (size_t i = 0; i < s.view_frame_paths.size(); ++i) {
    lua_pushstring(L, s.view_frame_paths[i].c_str());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 2;
}

// gui.places(): per box shown, {title, x, y, w, h} on screen (pixels from the canvas'
// top-left corner), in gui.boxes() order.
int l_places(lua_State* L) {
  views::AppState& s = app(L);
  std::vector<views::AppState::BoxPlace> p = s.view_places ? s.view_places() : std::vector<views::AppState::BoxPlace>{};
  lua_createtable(L, static_cast<int>(p.size()), 0);
  for (size_t i = 0; i < p.size(); ++i) {
    lua_createtable(L, 0, 5);
    lua_pushstring(L, i < s.view_box_titles.size() ? s.view_box_titles[i].c_str() : "");
    lua_setfield(L, -2, "title");
    const float v[4] = {p[i].x, p[i].y, p[i].w, p[i].h};
    const char* k[4] = {"x", "y", "w", "h"};
    for (int j = 0; j < 4; ++j) {
      lua_pushnumber(L, v[j]);
      lua_setfield(L, -2, k[j]);
    }
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

int l_sync(lua_State* L) {
  views::poll_program(app(L));
  return 0;
}

const script::Function kGui[] = {
    {"state", l_state, "gui.state()", "the app's state: level, colour, selection, kernels, boxes drawn, error, …"},
    {"open", l_open, "gui.open(path)", "open a graph file (raises with the error panel's text on failure)"},
    {"level", l_level, "gui.level([name])", "switch the graph view to tensor | primitive | kernel; returns the level"},
    {"color", l_color, "gui.color([mode])", "colour boxes by category | kernel | heat; returns the mode"},
    {"select", l_select, "gui.select(text | id)", "select the first node matching text (op, input or output name) or node id"},
    {"select_kernel", l_select_kernel, "gui.select_kernel(k | name)", "select kernel k (1-based) or by name; returns its name"},
    {"tab", l_tab, "gui.tab(name)", "show a tab: inspector, kernels, profile, loop, source, asm, roofline, bars, log, timeline, rules, console, tune"},
    {"job", l_job, "gui.job()", "the background job running now: {kind, label, seconds, held}, or nil"},
    {"hold_jobs", l_hold_jobs, "gui.hold_jobs(on)", "tests: a job started while held waits before working (gui.wait releases it)"},
    {"_start", l_start, "gui._start(kind [, arg])", "start a background job (compile | profile | run)"},
    {"_busy", l_busy, "gui._busy()", "whether a background job is running or not applied yet"},
    {"_block", l_block, "gui._block()", "wait for the running job and apply it (blocks the app)"},
    {"_job_error", l_job_error, "gui._job_error()", "the error of the last job applied, or nil"},
    {"stats", l_stats, "gui.stats()", "the selected node's values after gui.run(): {min, max, mean, std, nans, infs, count}"},
    {"kernel_code", l_kernel_code, "gui.kernel_code([kind])", "the selected kernel's loop | source | asm text"},
    {"expand", l_expand, "gui.expand(path)",
     "expand a scope in place: its box becomes a frame of its contents (at the primitive level of a graph drawn in frames, "
     "a scope collapsed there opens again; of a small one, the tensor level shows)"},
    {"collapse", l_collapse, "gui.collapse(path)",
     "collapse a scope (and the scopes inside it) into one box, in place; at the primitive level too when it draws frames"},
    {"collapse_all", l_collapse_all, "gui.collapse_all()", "collapse every scope (the model's top level)"},
    {"weights", l_weights, "gui.weights([on])", "draw weights and constants as boxes (true) or as attributes of their reader (false, the default)"},
    {"boxes", l_boxes, "gui.boxes()", "the boxes shown (their titles) and, second, the scopes drawn as frames"},
    {"places", l_places, "gui.places()",
     "where each box shown is on screen: {title, x, y, w, h} in pixels from the canvas' top-left (gui.boxes() order)"},
    {"search", l_search, "gui.search(text [, steps])",
     "type text into the search box and step to the next hit steps times (default 1; applied at the next frame): "
     "gui.state().search_hits, search_cursor"},
    {"pan", l_pan, "gui.pan(dx, dy)", "move the graph view by dx, dy screen pixels (as dragging does)"},
    {"full_redraw", l_full_redraw, "gui.full_redraw()",
     "draw the next frame whole (not only the graph panel), e.g. to compare with a partial redraw's screenshot"},
    {"clock", l_clock, "gui.clock()", "seconds on a steady clock since the app started (for benchmark scripts)"},
    {"fit", l_fit, "gui.fit([mode])", "fit the graph to the window: \"all\" (default) or \"readable\" (a readable zoom from the top, as the Fit button)"},
    {"relayout", l_relayout, "gui.relayout()", "lay the graph out afresh with dot (drops the stable places and ghosts of rewrite steps)"},
    {"zoom", l_zoom, "gui.zoom([z])", "zoom the graph view to z (1 = 100%) about its centre; returns the zoom shown"},
    {"frame_ms", l_frame_ms, "gui.frame_ms([n])", "median time of the last n frames (default 30), ms"},
    {"frame_stats", l_frame_stats, "gui.frame_stats([n])",
     "medians of the last n frames: total_ms, ui_ms (building draw lists), render_ms (rasterizing), swap_ms, "
     "cpu_ms (CPU time of all the app's threads, the rasterizer's included); "
     "vertices, drawn_boxes (boxes in view) and text (labels drawn) of the last frame; partial: how many of the n "
     "frames drew only the graph panel (the rest kept from the frame before)"},
    {"_sync", l_sync, "gui._sync()", "show the command layer's program `p` now"},
    {nullptr, nullptr, nullptr, nullptr},
};

// gui.compile / frames / screenshot and the coroutine driver, in Lua.
const char* const kGuiLua = R"lua(
-- A background job: in the --script coroutine, yield "job" until the app has applied it
-- (frames keep rendering); anywhere else, block. Returns the job's error, or nil.
local function await()
  if gui._busy() then
    gui.hold_jobs(false)   -- waiting for a held job would never end
    if __gui_co ~= nil and coroutine.running() == __gui_co then
      while gui._busy() do coroutine.yield("job") end
    else
      gui._block()
    end
  end
  return gui._job_error()
end
local function start(kind, arg, wait)
  await()   -- one job at a time: let a running one finish first
  if gui._start(kind, arg) and wait ~= false then
    local err = await()
    if err then error(err, 3) end
  end
  return wait ~= false
end
function gui.compile(backend, wait)
  if start("compile", backend, wait) then return gui.state().kernels end
end
function gui.profile(runs, wait)
  if start("profile", runs or 10, wait) then return gui.state().total_ms end
end
function gui.run(wait) start("run", nil, wait) end
gui._await = await   -- for gui.tune (gui_script_tune.cpp)
function gui.wait()
  local err = await()
  if err then error(err, 2) end
end
function __gui_publish(prog, backend)
  p = prog
  local st = lathe.cmd.state
  st.backend, st.compiled_step, st.profile = backend, s and s:current() or nil, nil
end
function gui.frames(n) coroutine.yield("frames", n or 1) end
function gui.screenshot(path)
  if type(path) ~= "string" then error("gui.screenshot(path): path must be a string", 2) end
  coroutine.yield("screenshot", path)
end
function __gui_start(fn, arg) __gui_co, __gui_arg = coroutine.create(fn), arg end
function __gui_resume()
  local ok, what, arg = coroutine.resume(__gui_co, __gui_arg)
  if not ok then return "error", tostring(what) end
  if coroutine.status(__gui_co) == "dead" then return "done" end
  return tostring(what), arg
end
)lua";

std::string read_text(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The gui.* help topics, registered at start-up so that `lathe help gui.compile` and the
// REPL's :help know them outside the app too.
void add_gui_help() {
  for (const script::Function* f = kGui; f->name; ++f) script::add_help(std::string("gui.") + f->name, f->signature, f->doc);
  gui_lua::add_rewrite_help();
  gui_lua::add_tune_help();
  script::add_help("gui.compile", "gui.compile([backend [, wait=true]])",
                   "compile the graph shown in the background (as :compile does) and wait; returns the kernel count");
  script::add_help("gui.profile", "gui.profile([runs [, wait=true]])",
                   "profile the compiled program in the background (default 10 runs) and wait; returns ms per run");
  script::add_help("gui.run", "gui.run([wait=true])", "run the graph on random inputs in the background (values for the inspector)");
  script::add_help("gui.wait", "gui.wait()", "wait for the background job started with wait=false; raises its error");
  script::add_help("gui.frames", "gui.frames(n)", "pause a --script while the app renders n frames (the layout done)");
  script::add_help("gui.screenshot", "gui.screenshot(path)", "pause a --script, render, write the window to a PNG");
}
[[maybe_unused]] const bool kGuiHelpAdded = (add_gui_help(), true);

}  // namespace

void bind_gui_state(views::AppState* s) { g_state = s; }

void wire_gui_script(views::GuiOptions& o, std::shared_ptr<script::Workbench> wb) {
  lua_State* L = wb->engine().L();
  lua_newtable(L);
  script::register_functions(L, lua_gettop(L), kGui, "gui.");
  gui_lua::register_rewrite_functions(L, lua_gettop(L));
  gui_lua::register_tune_functions(L, lua_gettop(L));
  add_gui_help();
  lua_setglobal(L, "gui");
  script::ScriptError err;
  if (!wb->engine().run_string(kGuiLua, "=gui", 0, &err)) throw std::runtime_error("gui.lua: " + err.message);
  if (!wb->engine().run_string(gui_lua::kRewriteLua, "=gui", 0, &err)) throw std::runtime_error("gui.lua: " + err.message);
  if (!wb->engine().run_string(gui_lua::kTuneLua, "=gui", 0, &err)) throw std::runtime_error("gui.lua: " + err.message);
  gui_lua::wire_tune_hooks(o.program);

  o.program.compile = [wb](const std::string& backend) -> std::string {
    script::Workbench::Result r = wb->execute(":compile" + (backend.empty() ? "" : " " + backend));
    return r.ok ? "" : r.error;
  };
  // Off the UI thread (no Lua): what lathe.compile does. publish then makes it `p`.
  o.program.build = [](const Graph& g, const std::string& backend) {
    std::string b = backend.empty() ? default_backend() : backend;
    std::shared_ptr<script::ProgramState> st = script::compile_program_state(g, b);
    return views::BuiltProgram{st->exe, b, st};
  };
  o.program.publish = [wb](const views::BuiltProgram& bp) {
    lua_State* L = wb->engine().L();
    lua_getglobal(L, "__gui_publish");
    script::push_program(L, std::static_pointer_cast<script::ProgramState>(bp.handle));
    lua_pushstring(L, bp.backend.c_str());
    script::ScriptError e;
    if (!wb->engine().call(2, 0, &e)) throw UserError("publishing the program as p: " + e.message);
  };
  o.program.program = [wb]() -> std::shared_ptr<Executable> {
    lua_State* L = wb->engine().L();
    lua_getglobal(L, "p");
    std::shared_ptr<Executable> exe;
    if (luaL_testudata(L, -1, "lathe.Program")) {
      try {
        exe = script::check_program_exe(L, -1);
      } catch (...) {
      }
    }
    lua_pop(L, 1);
    return exe;
  };
  o.program.code = [](const Executable& exe, int k, bool assembly) {
    views::KernelCode c;
    Backend& b = get_backend(exe.backend());
    c.source = b.render(exe.program(), k);
    if (assembly) {
      std::shared_ptr<CompiledProgram> cp = b.compile(exe.program());   // a kernel-cache hit
      c.assembly = cp->assembly(k);
      if (c.assembly.empty()) c.note = "the " + exe.backend() + " backend cannot show assembly";
    }
    return c;
  };
  o.program.backends = [] {
    std::vector<std::string> names{default_backend()};
    for (const std::string& n : backend_names()) {
      Backend* b = find_backend(n);
      if (n != names[0] && n != "interp" && b && b->available().empty()) names.push_back(n);
    }
    return names;
  };

  o.start_script = [wb](const std::string& path, const std::string& arg, views::AppState& s) -> std::string {
    bind_gui_state(&s);
    bool ok = false;
    std::string code = read_text(path, &ok);
    if (!ok) return "cannot read " + path;
    script::ScriptError e;
    if (!wb->engine().load(code, "@" + path, &e)) return e.message;
    lua_State* L = wb->engine().L();
    lua_getglobal(L, "__gui_start");
    lua_insert(L, -2);
    lua_pushstring(L, arg.c_str());
    if (!wb->engine().call(2, 0, &e)) return e.message;
    return "";
  };
  o.resume_script = [wb](views::AppState& s) -> views::ScriptStep {
    bind_gui_state(&s);
    views::ScriptStep st;
    lua_State* L = wb->engine().L();
    script::ScriptError e;
    int top = lua_gettop(L);
    if (!wb->engine().run_string("return __gui_resume()", "=gui", 2, &e)) {
      st.kind = views::ScriptStep::Kind::Error;
      st.error = e.message;
      return st;
    }
    std::string what = lua_tostring(L, top + 1) ? lua_tostring(L, top + 1) : "";
    if (what == "done") {
      st.kind = views::ScriptStep::Kind::Done;
    } else if (what == "error") {
      st.kind = views::ScriptStep::Kind::Error;
      st.error = lua_tostring(L, top + 2) ? lua_tostring(L, top + 2) : "error";
    } else if (what == "frames") {
      st.kind = views::ScriptStep::Kind::Frames;
      st.frames = lua_isinteger(L, top + 2) ? static_cast<int>(lua_tointeger(L, top + 2)) : 1;
    } else if (what == "job") {
      st.kind = views::ScriptStep::Kind::Job;
    } else if (what == "screenshot") {
      st.kind = views::ScriptStep::Kind::Screenshot;
      st.path = lua_tostring(L, top + 2) ? lua_tostring(L, top + 2) : "";
    } else {
      st.kind = views::ScriptStep::Kind::Error;
      st.error = "the script yielded '" + what + "': only gui.frames, gui.screenshot and the gui functions that wait for a job may pause it";
    }
    lua_settop(L, top);
    return st;
  };
}

}  // namespace lathe::app
#endif
