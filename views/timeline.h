// timeline.h — the rewrite timeline window: load a rules file, step / back / run, a slider
// over the session's history and the history list; beside it every rule of the session
// with a breakpoint toggle and its stats (fired, tried, matched, time). The graph view
// shows the current step with the rewritten node and the nodes it added highlighted, and
// after a run that stopped at a breakpoint, the node the rule is about to rewrite.
//
// The timeline draws the C++ RewriteSession (core/rewrite/session.h) that the command
// layer holds (the Lua global `s`), and changes it only by issuing the same commands the
// REPL has (`:rules FILE`, `:step`, `:back`, `:run`, `:seek K`, `s:breakpoint(R, on)`), so
// console, REPL, buttons and the `gui` Lua table agree. Views do not link Lua: the app
// hands in `run` and `session`. Without them the window says what is missing.
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
  // Loads rules (a file or a built-in name) as `:rules` does; errors go to the error panel.
  bool load_rules(AppState& s, const std::string& source);

 private:
  void command(AppState& s, const std::string& line);
  void rules_table(AppState& s, const RewriteSession& ss);
  void quantize_button(AppState& s);
  int quant_mode_ = 0;              // dynamic, weight-int8, weight-int4
  bool quant_per_channel_ = true;
  int quant_block_ = 32;
  char rules_[512] = "simplify";
  std::string shown_source_;   // AppState::rules_source when rules_ last followed it
  const RewriteSession* shown_session_ = nullptr;
  int shown_step_ = -1;
};

// What a rewrite command (`:step`, `:back`, `:run`, `:seek`) answered: logs it and, when a
// run stopped at a breakpoint, records the rule and node in s.break_rule / s.break_node.
void note_rewrite(AppState& s, const std::string& line, bool ok, const std::string& output);
// What `:rules SOURCE` answered: logs it; a failure goes to the error panel with the
// file:line the message names (and to the rules editor when it shows that file). The
// session that was loaded before stays.
void note_rules_load(AppState& s, const std::string& source, bool ok, const std::string& output);
// A Lua error message "file:line: message" (or anything else) as a Diagnostic.
Diagnostic diagnostic_from_lua(const std::string& message);

}  // namespace lathe::views
