// timeline.h — the rewrite timeline window: load a rules file, step / back / run, a slider
// over the session's history, and the history list; the graph view shows the current
// step with the rewritten node and the nodes it added highlighted.
//
// The timeline draws the C++ RewriteSession (core/rewrite/session.h) that the command
// layer holds (the Lua global `s`), and changes it only by issuing the same commands the
// REPL has (`:rules FILE`, `:step`, `:back`, `:run`, `:seek K`), so console, REPL and
// buttons agree. Views do not link Lua: the app hands in `run` and `session`. Without them
// the window says what is missing.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/rewrite/session.h"
#include "views/app_state.h"
#include "views/console.h"

namespace lathe::views {

using SessionSource = std::function<std::shared_ptr<RewriteSession>()>;

class Timeline {
 public:
  ConsoleEval run;          // runs one command line through the command layer
  SessionSource session;    // the command layer's current session, or nullptr

  void draw(AppState& s);
  // Shows the session's current graph when it changed (after any command, any window).
  void sync(AppState& s);

 private:
  void command(AppState& s, const std::string& line);
  char rules_[512] = "simplify";
  const RewriteSession* shown_session_ = nullptr;
  int shown_step_ = -1;
};

}  // namespace lathe::views
