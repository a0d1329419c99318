// gui_app.h — the desktop app: `lathe gui [FILE] [--script S.lua] [--screenshot OUT.png]
// [--frames N]` (SPEC.md). app/cmd_gui.cpp parses the command line and calls run_gui().
//
// The window is one fixed, resizable split layout (ImGui 1.86 has no docking):
//
//   +-------------------------------+----------------+
//   | graph view (+ error panel)    | Inspector |    |
//   |                               | Kernels   |    |
//   |                               | Profile        |
//   +-------------------------------+----------------+
//   | Log | Timeline | Rules | Console | Tune         |
//   +------------------------------------------------+
//
// The splitters, window size and ImGui's own state persist in the XDG config directory
// (gui_settings.h). With `screenshot` set the app renders `frames` frames once the graph
// is laid out, writes the back buffer to the PNG and returns 0 (settings are neither read
// nor written then, so screenshots are reproducible). A --script may pause for frames and
// take screenshots along the way (gui.frames / gui.screenshot); in headless mode a script
// that fails makes the exit code 1 (the final screenshot, showing the error, is still
// written). Compile, profile and run are background jobs (jobs.h): the menu bar shows a
// spinner while one runs and the window stays interactive.
#pragma once
#include <functional>
#include <string>

#include <optional>

#include "views/compiled.h"
#include "views/console.h"
#include "views/timeline.h"

namespace lathe::views {

// Where a running --script stands after a resume.
struct ScriptStep {
  // Job: the script waits for the background job (compile, profile, run) to be applied.
  enum class Kind { Done, Error, Frames, Screenshot, Job } kind = Kind::Done;
  int frames = 0;          // Frames: how many to render (once the graph is laid out)
  std::string path;        // Screenshot: the PNG to write
  std::string error;       // Error: "file:line: message"
};

struct GuiOptions {
  std::string file;          // graph to open; "" = the first samples/*.lathe, else the demo
  bool demo = false;         // open the built-in demo MLP instead of a file
  int demo_layers = 2;
  std::string script;        // --script: run after loading (needs `run_script`)
  std::string screenshot;    // --screenshot OUT.png: render, write, exit
  int frames = 5;            // frames to render (after layout) before the screenshot
  std::string level;         // "tensor" | "primitive" | "kernel"; "" = by graph size
  std::string select;        // select the first node matching this search at start
  int width = 1280, height = 800;   // headless window size
  // Hooks into the command layer (scripting/commands.h), set by app/cmd_gui.cpp when the
  // scripting layer is built in; views never link Lua themselves.
  ConsoleEval console;       // runs one console line (Lua or a :command)
  SessionSource session;     // the command layer's rewrite session (Lua global `s`)
  // Sets `g` to a graph the app opened (path: its file, "" when built elsewhere); the app's
  // state to show where the command layer starts on it (an .onnx model's attention fused as
  // a rewrite session: the timeline's steps and a log line).
  std::function<void(const Graph&, const std::string& path, AppState&)> publish_graph;
  std::function<std::optional<Graph>()> console_graph;                        // reads `g`
  // Resolves a rules source (FILE.lua or a built-in set's name) to the file the rules
  // editor opens (AppState::resolve_rules).
  std::function<std::string(const std::string& source)> resolve_rules;
  // Compiling, rendering kernels and reading the console's `p` (views/compiled.h).
  ProgramHooks program;
  // --script: start_script loads the file as a coroutine ("" or the error); resume_script
  // runs it until it pauses for frames or a screenshot (gui.frames / gui.screenshot), ends
  // or fails. The app renders the frames asked for between resumes.
  // The script's `...` is the folder of --screenshot (or "."), where its own screenshots go.
  std::function<std::string(const std::string& path, const std::string& arg, AppState& s)> start_script;
  std::function<ScriptStep(AppState& s)> resume_script;
};

// Runs the app until the window closes (or the screenshot is written). Returns the exit
// code: 0, or 1 when there is no display or the window/GL context cannot be created.
int run_gui(const GuiOptions& opts);

}  // namespace lathe::views
