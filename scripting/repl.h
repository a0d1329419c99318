// repl.h — the terminal REPL loop (repl.cpp) over a Workbench (commands.h).
#pragma once
#include "scripting/commands.h"

namespace lathe::script {

struct ReplOptions {
  bool force_interactive = false;    // prompts and line editing even when stdin is a pipe
  bool exit_status_on_error = false; // return 1 if any input failed (non-interactive runs)
};

// Reads and executes input until EOF or :quit. Returns the process exit code.
int run_repl(Workbench& bench, const ReplOptions& opts = {});

}  // namespace lathe::script
