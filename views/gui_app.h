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
//   | Log | Timeline | Console                        |
//   +------------------------------------------------+
//
// The splitters, window size and ImGui's own state persist in the XDG config directory
// (gui_settings.h). With `screenshot` set the app renders `frames` frames once the graph
// is laid out, writes the back buffer to the PNG and returns 0 (settings are neither read
// nor written then, so screenshots are reproducible).
#pragma once
#include <functional>
#include <string>

#include <optional>

#include "views/console.h"
#include "views/timeline.h"

namespace lathe::views {

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
  std::function<void(const Graph&, const std::string& path)> publish_graph;   // sets `g`
  std::function<std::optional<Graph>()> console_graph;                        // reads `g`
  // Runs --script against the app state; returns "" or an error message.
  std::function<std::string(const std::string& path, AppState& s)> run_script;
};

// Runs the app until the window closes (or the screenshot is written). Returns the exit
// code: 0, or 1 when there is no display or the window/GL context cannot be created.
int run_gui(const GuiOptions& opts);

}  // namespace lathe::views
