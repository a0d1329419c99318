// gui_script.h — the desktop app's Lua side: the `gui` table that --script files and the
// in-app console use to drive the app (open, level, colour, select, compile, profile, run,
// tabs, state), frames and screenshots between actions (a --script runs as a coroutine
// that gui.frames / gui.screenshot pause), and the program hooks that let the views reach
// the backends (compile on the app's worker thread and publish the result as `p`, read
// `p`, render source and assembly).
#pragma once
#if defined(HAVE_LATHE_VIEWS) && defined(HAVE_LATHE_SCRIPTING)
#include <memory>

#include "scripting/commands.h"
#include "views/gui_app.h"

namespace lathe::app {

// Fills o.program, o.start_script and o.resume_script, and installs `gui` in wb's Lua state.
void wire_gui_script(views::GuiOptions& o, std::shared_ptr<script::Workbench> wb);
// Points the `gui` table at the app state (called by every hook that receives it).
void bind_gui_state(views::AppState* s);

// Shared by gui_script.cpp and gui_script_rewrite.cpp.
namespace gui_lua {
views::AppState& app(lua_State* L);   // the app's state; raises when the app is not running
void set_str(lua_State* L, const char* k, const std::string& v);
void set_num(lua_State* L, const char* k, double v);
void set_int(lua_State* L, const char* k, int64_t v);
void set_bool(lua_State* L, const char* k, bool v);
// gui.timeline, gui.breakpoint, gui.rewrite, gui.load_rules and the rules editor's
// gui.edit_rules, gui.rules_text, gui.save_rules (gui_script_rewrite.cpp).
void register_rewrite_functions(lua_State* L, int gui_table);
void add_rewrite_help();   // their help topics (also outside the app: `lathe help gui.rewrite`)
extern const char* const kRewriteLua;   // their Lua halves, run after the table exists
// gui.tune, gui.tune_result, gui.tune_cancel, gui.tune_apply (gui_script_tune.cpp), and the
// hooks the app's Tune job uses to time candidates and compile the tuned program.
void register_tune_functions(lua_State* L, int gui_table);
void add_tune_help();
extern const char* const kTuneLua;
void wire_tune_hooks(views::ProgramHooks& h);
}  // namespace gui_lua

}  // namespace lathe::app
#endif
