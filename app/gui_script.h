// gui_script.h — the desktop app's Lua side: the `gui` table that --script files and the
// in-app console use to drive the app (open, level, colour, select, compile, profile, run,
// tabs, state), frames and screenshots between actions (a --script runs as a coroutine
// that gui.frames / gui.screenshot pause), and the program hooks that let the views reach
// the backends (compile through `:compile`, read `p`, render source and assembly).
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

}  // namespace lathe::app
#endif
