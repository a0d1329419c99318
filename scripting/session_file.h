// session_file.h — `.lathe-session` files (SPEC.md): the REPL's state saved as JSON and
// replayed on open.
//
// What is saved: the starting graph as .lathe text (step 0 of the session, else g), the
// rules' source text with its path (or built-in name), the session's options (check,
// seed, max_steps, batch), its steps (kind, rule, root: enough to replay and to verify the
// replay) and current step, breakpoints set with :break, the backend and step of the last
// :compile, the last :profile table, and the current graph's text (to confirm the replay).
//
// Opening re-creates the session from graph + rules text, replays every step (s:step()
// for rule steps, s:run() for sweeps), seeks to the saved step, then restores the
// breakpoints. A replay that diverges (the rules file was a different version, a step was
// a custom pass) stops there with a note; nothing is left half-opened on an error.
//
// Node ids in step lines (`#2 double @%13`) are creation counters of the process: they
// match the saved ones when the session file is opened first thing in a process (as
// `lathe repl FILE.lathe-session` does) and the original graph was built in text order.
//
// Writes are atomic: a temp file in the same directory, fsync, rename.
#pragma once
#include <string>

struct lua_State;

namespace lathe::script {

// Writes `text` to `path` atomically (temp file + rename). UserError naming the path on failure.
void write_file_atomic(const std::string& path, const std::string& text);

// Installs into lathe.cmd (table at `table`) the native halves of the session commands:
//   _note_rules(path|name, is_builtin, s)   remember the rules' text for the session s
//   _session_save(path)                     write the state (globals g, s; lathe.cmd.state)
//   _session_open(path)                     replay; sets g, s, rules and lathe.cmd.state;
//                                           returns {summary=, backend=, compiled_step=}
void register_session_commands(lua_State* L, int table);

}  // namespace lathe::script
