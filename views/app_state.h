// app_state.h — the document the desktop app's windows draw: the loaded graph and the
// view state they share (level, selection, expanded composites, the log).
//
// Windows read this state and change it only through the member functions below (the
// "commands"), so that every window, the console and --script see one truth. The graph is
// a cheap value (core/ir/graph.h) that the command layer can share; AppState keeps the
// copy being shown plus a few indexes derived from it once per version.
//
// A load that fails never throws out of here: the diagnostic is kept in `error` (shown by
// the error panel) and the log, and the previous graph, if any, stays on screen.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/diag.h"
#include "core/ir/graph.h"
#include "core/rewrite/quantize.h"
#include "views/compiled.h"
#include "views/jobs.h"

namespace lathe::views {

class TuneRun;   // tune_job.h

// GraphView levels (DESIGN.md "The levels a user sees").
enum class Level : uint8_t { Tensor, Primitive, Kernel };
// How boxes are coloured. Kernel and Heat need compile / profile data.
enum class ColorMode : uint8_t { Category, Kernel, Heat };

struct LogLine {
  enum class Kind : uint8_t { Info, Warn, Error } kind;
  std::string text;
};

struct LoadError {
  std::string what;   // "cannot open samples/bad.lathe"
  Diagnostic diag;    // where and what (file:line:col, source line)
  std::string file;   // what was being opened (for Retry)
};

class AppState {
 public:
  // --- the document --------------------------------------------------------------------
  Graph graph;
  bool has_graph = false;
  uint64_t version = 0;      // bumps on every graph change (layout caches key on it)
  uint64_t document = 0;     // bumps when a different graph is opened (not on a rewrite step)
  std::string path;          // the file the graph came from; "" for the demo
  std::string title;         // shown in the window title and the graph view
  std::optional<LoadError> error;  // the last failed load, until dismissed or replaced

  // Derived from `graph` once per version.
  std::vector<NodeRef> topo;
  std::unordered_map<NodeRef, size_t> topo_index;          // node -> position in topo
  std::unordered_map<NodeRef, std::vector<NodeRef>> users;
  std::unordered_map<NodeRef, std::string> output_name;   // node -> output name(s)

  // --- view state shared by windows ----------------------------------------------------
  Level level = Level::Primitive;
  ColorMode color_mode = ColorMode::Category;
  std::set<std::string> expanded;   // composite paths shown expanded at the tensor level
  uint64_t expanded_version = 0;    // bumps when `expanded` or `prim_collapsed` changes
  // The primitive level of a large graph draws every scope as a frame; these scopes are
  // collapsed there into one box each (a click on a frame's title, gui.collapse).
  std::set<std::string> prim_collapsed;
  bool show_weights = false;        // weights / constants as boxes, not attributes of their reader
  int selected = -1;                // selected primitive node id, -1 = none
  std::string selected_group;       // or a selected collapsed composite path
  bool center_request = false;      // one-shot: the graph view centres on the selection
  // The rewrite step being shown (timeline): the node it rewrote and the nodes it added.
  int step_root = -1;
  std::set<uint32_t> step_added;
  // Between the version shown before and this one (show_version fills it): the graph view
  // keeps surviving boxes where they were, places new ones near their neighbours, marks
  // them, and draws the removed ones as faded ghosts at their old places.
  struct VersionDiff {
    uint64_t from_version = 0;      // the version it is against; 0 = none (a new document)
    std::set<uint32_t> added, removed;                // node ids
    std::unordered_map<uint32_t, uint32_t> was;       // rebuilt node id -> its old self (same op, new operands)
    std::unordered_map<uint32_t, uint32_t> replaced;  // new node id -> the removed node it stands in for
  } diff;
  // Where the last rewrite run stopped at a breakpoint: the rule about to fire and the
  // node it would rewrite (outlined in the graph view); cleared by the next command.
  std::string break_rule;
  int break_node = -1;
  std::string rules_source;         // what the timeline loaded: a rules file or a built-in name
  // The float graph before the last quantize step (`:quantize`: a session step named
  // "quantize …") at or before the step shown; the inspector measures the error of the
  // graph shown against it. quant_step names that step ("step 2: quantize dynamic per-channel").
  std::optional<Graph> quant_float;
  std::string quant_step;
  struct QuantErrors {
    uint64_t version = 0;             // the graph version measured
    std::string backend;              // what ran both graphs
    std::vector<QuantError> errors;   // per output, on seeded inputs
  };
  std::optional<QuantErrors> quant_errors;
  // The rules editor's document (rules_editor.h): one file's text being edited.
  struct RulesDoc {
    std::string path;               // the file edited; "" = none yet
    std::string text;               // the buffer (saved or not)
    bool dirty = false;             // edited since the last load / save
    bool builtin = false;           // one of assets/rules: Save asks for another path
    int error_line = 0;             // the line of the last failed reload (0 = none)
    std::string error;              // its message
  } rules_doc;
  std::vector<LogLine> log;

  // --- compiled program, profile, values (compiled.h; app_actions.h changes them) -----
  ProgramHooks hooks;                   // set by the app from GuiOptions
  std::shared_ptr<Compiled> compiled;   // nullptr until compiled (here or in the console)
  const Executable* seen_program = nullptr;   // the command layer's `p` last adopted
  int selected_kernel = -1;             // kernel index in compiled->program(), -1 = none
  std::optional<RunValues> run;         // after Run: inputs and per-node stats
  // One-shot requests from scripts / other windows to the tab bars: "Inspector",
  // "Kernels", "Profile"; the kernels panel's "loop" / "source" / "asm"; the profile
  // panel's "roofline" / "bars".
  std::string side_tab_request, code_tab_request, profile_view_request;
  // The bottom tab bar: "Log", "Timeline", "Rules", "Console".
  std::string bottom_tab_request;
  std::string rules_open_request;   // one-shot: the rules editor opens this (a file or a built-in name)
  // Resolves what the timeline loads (a file, or a built-in set's name) to the file to
  // edit; throws UserError for an unknown built-in. Set by the app when the scripting
  // layer is built in (without it, sources are taken as paths).
  std::function<std::string(const std::string& source)> resolve_rules;
  // Follows the command layer now (the session's current graph, `p`): the app sets it,
  // and the `gui` Lua functions call it after a command so the state they return is current.
  std::function<void()> sync;
  // What the graph view drew last frame (scripts and tests read it).
  size_t view_boxes = 0, view_edges = 0, view_highlighted = 0;
  size_t view_folded = 0;             // weights / constants folded into their readers as attributes
  size_t view_frames = 0;             // expanded scopes drawn as frames
  std::vector<std::string> view_box_titles;   // the boxes shown (first label line), for scripts
  std::vector<std::string> view_frame_paths;  // the frames shown
  // Where each box shown is on screen (pixels from the canvas' top-left; gui.places()):
  // x, y of its top-left corner, w, h. Set by the graph view; empty before the first draw.
  struct BoxPlace {
    float x = 0, y = 0, w = 0, h = 0;
  };
  std::function<std::vector<BoxPlace>()> view_places;
  double view_layout_ms = 0;          // how long the layout shown took
  std::string last_toggled;           // the scope expanded or collapsed last (the view keeps it in place)
  bool fit_request = false;           // one-shot: the graph view fits the drawing to the window
  bool fit_readable = false;          // … at a readable zoom from its top (the Fit button's first press)
  bool relayout_request = false;      // one-shot: the graph view lays the graph out afresh (Re-layout)
  float zoom_request = 0;             // one-shot when > 0: the graph view zooms to this about its centre
  float pan_request_x = 0, pan_request_y = 0;   // one-shot: the graph view pans by this many pixels
  bool full_redraw_request = false;              // one-shot: the next frame draws the whole window
  // One-shot: the graph view's search box gets this text and steps to its next hit this
  // many times (gui.search); it reports the hits and the cursor back.
  std::string search_request;
  int search_steps = 0;
  bool search_pending = false;
  size_t view_search_hits = 0;
  int view_search_cursor = -1;
  float view_zoom = 1;                // the graph view's zoom last frame (1 = 1 layout unit per pixel)
  // The last frames' times (the app's loop records them): the work of a frame, not the
  // wait for events before it. ui = building ImGui's draw lists (our views), render =
  // rasterizing them (software OpenGL: most of a frame), swap = presenting (and a script's
  // or screenshot's work between).
  struct FrameTiming {
    double total_ms = 0, ui_ms = 0, render_ms = 0, swap_ms = 0;
    // CPU time of all the process's threads (llvmpipe's rasterizers included) during the
    // frame: on a shared, loaded machine it moves much less than the wall-clock times.
    double cpu_ms = 0;
    int vertices = 0;
    bool partial = false;   // only the graph panel was drawn (redraw.h)
  };
  std::vector<FrameTiming> frames;
  // The last version change as drawn: ghosts (removed boxes), boxes marked added, boxes
  // that kept their place and boxes that moved; layout "dot" (laid out afresh) or "stable".
  size_t view_ghosts = 0, view_added = 0, view_kept = 0, view_moved = 0;
  std::string view_layout;
  size_t view_drawn_boxes = 0;        // boxes inside the visible rectangle last frame
  bool view_toolbar_fits = true;      // the graph view's toolbar (search box and arrows included) is in view
  int view_profile_columns = 0;       // profile table columns in view (all 7 when nothing is cut off)
  size_t view_legend_items = 0;       // entries of the graph view's colour legend (all of them; it scrolls)
  bool view_text = false;             // whether their labels were drawn (zoom level of detail)
  // Compile, profile and run go to this worker (jobs.h); app_actions.h starts them.
  JobRunner jobs;
  // The last Tune job (tune_job.h): its candidates' times, records and loop IR; the Tune
  // tab shows it, tune_selected is the row (distinct kernel) shown there (-1: the latest).
  std::shared_ptr<TuneRun> tune;
  int tune_selected = -1;

  // --- commands ------------------------------------------------------------------------
  // Loads FILE through load_graph (core/ir/loader.h). On failure keeps the old graph,
  // sets `error`, logs, and returns false.
  bool open(const std::string& file);
  bool reload();
  // Shows a graph built elsewhere (the demo, a rewrite step, the console).
  void set_graph(Graph g, std::string title, std::string path = "");
  // Shows another version of the same graph (a rewrite step): keeps the title, path,
  // level and expanded composites, so the picture changes only where the graph did.
  void show_version(Graph g);
  // Selecting a node also selects the kernel that computes it (when compiled).
  void select_node(int id, bool center = false);
  // Selects kernel k (and its root node, so the inspector shows what it computes).
  void select_kernel(int k, bool center = false);
  void select_group(const std::string& path, bool center = false);
  // Opens the scopes that hide node `id` at the tensor or kernel level (its box, or its
  // kernel's, shows on its own). Returns the shortest scope it opened ("" = none).
  std::string reveal(int id);
  void clear_selection();
  void set_level(Level l);
  // At the tensor and kernel levels: open / close a scope (`expanded`). At the primitive
  // level of a graph drawn in frames (primitive_frames()): the same for `prim_collapsed`.
  void expand(const std::string& path);
  void collapse(const std::string& path);   // and everything below it
  bool primitive_frames() const;            // the primitive level draws scopes as frames
  void collapse_all();
  void expand_all();
  void info(std::string text) { log.push_back({LogLine::Kind::Info, std::move(text)}); }
  void warn(std::string text) { log.push_back({LogLine::Kind::Warn, std::move(text)}); }
  void fail(std::string text) { log.push_back({LogLine::Kind::Error, std::move(text)}); }

  NodeRef selected_node() const;   // nullptr when none (or not in this graph)

 private:
  void reindex();   // topo, topo_index, users, output_name from `graph`
};

// Graphs above this many nodes open at the tensor level with every composite collapsed.
constexpr size_t kLargeGraphNodes = 300;

}  // namespace lathe::views
