// cmd_gui.cpp — `lathe gui [FILE] [--script S.lua] [--screenshot OUT.png] [--frames N]`:
// the desktop app (views/gui_app.h). Without a display it prints one line and exits 1.
//
// Hidden options for tests, screenshots and frame-time checks:
//   --demo [LAYERS]     the built-in MLP (views/demo_graph.h) instead of FILE
//   --level L           start at tensor | primitive | kernel
//   --select TEXT       select the first node whose summary contains TEXT (or input TEXT)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"

#ifdef HAVE_LATHE_VIEWS
#include "views/gui_app.h"
#endif
#if defined(HAVE_LATHE_VIEWS) && defined(HAVE_LATHE_SCRIPTING)
#include <lua.hpp>

#include <memory>

#include "app/gui_script.h"
#include "scripting/binding.h"
#include "scripting/commands.h"
#include "scripting/rules_lua.h"
#include "scripting/session_lua.h"
#endif

namespace lathe::app {
namespace {

#if defined(HAVE_LATHE_VIEWS) && defined(HAVE_LATHE_SCRIPTING)
// Connects the app to the command layer the REPL uses (scripting/commands.h): one
// Workbench whose globals g (graph) and s (session) the console, the timeline and --script
// share with the windows.
void wire_scripting(views::GuiOptions& o, std::shared_ptr<script::Workbench> wb) {
  o.console = [wb](const std::string& line, views::AppState& app) {
    bind_gui_state(&app);
    // print() inside the line goes to the console's transcript, not the terminal.
    std::string printed;
    auto saved = wb->engine().out;
    wb->engine().out = [&printed](std::string_view t) { printed += t; };
    script::Workbench::Result r = wb->execute(line);
    wb->engine().out = saved;
    std::string text = printed + (r.ok ? r.output : r.error);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return views::ConsoleResult{text, r.ok};
  };
  o.session = [wb]() -> std::shared_ptr<RewriteSession> {
    lua_State* L = wb->engine().L();
    lua_getglobal(L, "s");
    std::shared_ptr<RewriteSession> s = script::test_session(L, -1);
    lua_pop(L, 1);
    return s;
  };
  o.publish_graph = [wb](const Graph& g, const std::string& path, views::AppState& app) {
    // A graph opened in the app is a new document, as :load makes one: g is it, and the
    // session and program of the previous graph are gone.
    lua_State* L = wb->engine().L();
    script::push_graph(L, g);
    lua_setglobal(L, "g");
    lua_pushnil(L);
    lua_setglobal(L, "s");
    lua_pushnil(L);
    lua_setglobal(L, "p");
    // and, as :load does, an .onnx model's attention fused as `lathe run` fuses it: a session
    // s of the flash-attention rules the timeline shows at its last step (Back / step 0 undoes)
    if (path.empty()) return;
    script::Workbench::Result r = wb->command({"_attention_on_load", path});
    if (!r.ok) {
      app.fail("opened " + path + ", its attention left unfused: " + r.error);
    } else if (!r.output.empty()) {
      app.rules_source = "flash-attention";
      app.info(r.output);
    }
  };
  o.console_graph = [wb]() -> std::optional<Graph> {
    lua_State* L = wb->engine().L();
    lua_getglobal(L, "g");
    Graph* g = script::test_udata<Graph>(L, -1, script::kGraphMT);
    std::optional<Graph> r = g ? std::optional<Graph>(*g) : std::nullopt;
    lua_pop(L, 1);
    return r;
  };
  o.resolve_rules = [](const std::string& source) -> std::string {
    bool file = source.find('/') != std::string::npos || (source.size() > 4 && source.compare(source.size() - 4, 4, ".lua") == 0);
    return file ? source : script::builtin_rules_path(source);   // UserError naming the built-in sets
  };
  wire_gui_script(o, wb);   // gui.* for --script and the console, compile / code hooks
}
#endif

int run_gui_command(const std::vector<std::string>& args) {
  CLI::App cli{"The desktop app: the graph at every level, the inspector, the rewrite timeline, kernels,\n"
               "profile and a Lua console. FILE defaults to the first samples/*.lathe.\n"
               "With --screenshot it renders N frames offscreen (Xvfb is enough), writes the PNG and exits.\n\n"
               "Mouse and keys: drag = pan, wheel = zoom, F = fit (readable from the top; again: all),\n"
               "click = select (a collapsed scope expands in place; a frame's title collapses it),\n"
               "right-click = expand/collapse, Ctrl+F = search, Ctrl+O = open, F5 = reload.\n"
               "Large graphs open at their top level: scopes (lathe.scope, composite calls, ONNX node paths)\n"
               "as boxes; weights and constants are attributes of their reader (the Weights box shows them).\n\n"
               "Compile (Kernels panel) adds the kernel level and kernel colours; Profile (Profile panel) adds\n"
               "times, a sortable table, a bar chart, a roofline and heat colours; Run (Inspector > Values)\n"
               "shows a node's min / max / mean / NaNs and histogram. Selecting a kernel outlines its nodes.\n"
               "Compile, Profile and Run are background jobs: the window stays interactive while they run.\n"
               "Tune (bottom panel): search schedules for the selected kernel or the whole graph in the background,\n"
               "each candidate's time plotted against trials, Cancel keeps what was found, the best schedule's loop\n"
               "IR beside the heuristic's; Apply replays the winners onto p and writes the records (`lathe help tune`).\n"
               "Timeline: step / back / run rewrites, breakpoints on rules (Run stops before one fires) and\n"
               "per-rule stats; Rules: edit the rules file, save and reload (a bad rule shows file:line).\n"
               "A --script drives the app through the `gui` Lua table (gui.compile, gui.profile, gui.level,\n"
               "gui.select_kernel, gui.expand, gui.collapse, gui.weights, gui.boxes, gui.tab, gui.state,\n"
               "gui.rewrite, gui.breakpoint, gui.timeline, gui.tune, gui.tune_result, gui.tune_cancel, gui.tune_apply,\n"
               "gui.edit_rules, gui.save_rules, gui.frames, gui.screenshot, …; see the README).",
               "lathe gui"};
  std::string file, script, screenshot, level, select, size;
  int frames = 5, demo_layers = -1;
  cli.add_option("FILE", file, "graph to open (.lathe, .lua or .onnx)");
  cli.add_option("--script", script, "Lua script to run after loading (drives the app)");
  cli.add_option("--screenshot", screenshot, "render offscreen, write this PNG and exit");
  cli.add_option("--frames", frames, "frames to render before the screenshot (default 5)")->check(CLI::Range(1, 100000));
  cli.add_option("--demo", demo_layers, "open the built-in demo MLP with this many hidden layers")
      ->expected(0, 1)->default_str("2")->group("");
  cli.add_option("--level", level, "tensor | primitive | kernel")
      ->check(CLI::IsMember({"tensor", "primitive", "kernel"}))->group("");
  cli.add_option("--select", select, "select the first node matching TEXT")->group("");
  cli.add_option("--size", size, "window size WxH (with --screenshot: the image's size; default 1280x800)");
  if (int rc = parse_cli(cli, args); rc >= 0) return rc;
#ifdef HAVE_LATHE_VIEWS
  views::GuiOptions o;
  o.file = file;
  o.script = script;
  o.screenshot = screenshot;
  o.frames = frames;
  o.level = level;
  o.select = select;
  if (cli.count("--demo")) {
    o.demo = true;
    o.demo_layers = demo_layers < 0 ? 2 : demo_layers;
  }
  if (!size.empty() && (std::sscanf(size.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width < 320 ||
                        o.height < 240 || o.width > 8192 || o.height > 8192)) {
    std::cerr << "lathe gui: --size wants WxH between 320x240 and 8192x8192, e.g. 1920x1080 (got '" << size << "')\n";
    return 1;
  }
#ifdef HAVE_LATHE_SCRIPTING
  auto wb = std::make_shared<script::Workbench>();
  wire_scripting(o, wb);
#endif
  return views::run_gui(o);
#else
  std::cerr << "lathe gui: the desktop app is not built into this binary (configure with -DLATHE_WITH_GUI=ON)\n";
  return 1;
#endif
}

LATHE_COMMAND("gui", "the desktop app: graph views, inspector, timeline (--screenshot for headless)", run_gui_command);

}  // namespace
}  // namespace lathe::app
