// cmd_repl.cpp — `lathe repl [FILE]`: the Lua REPL with the `lathe` module, colon
// commands (:help) and FILE (if any) loaded as `g`, or a .lathe-session replayed to its
// saved step. Reads a pipe without prompts or colour, so `lathe repl FILE < script.txt`
// gives a stable transcript.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "app/commands.h"

#ifdef HAVE_LATHE_SCRIPTING
#include "scripting/repl.h"

namespace lathe::app {
namespace {

const char* kUsage =
    "usage: lathe repl [FILE] [--interactive] [--max-instructions N] [--max-memory MIB]\n\n"
    "A Lua REPL over the `lathe` module. FILE (.lua, .lathe, .onnx) is loaded as g (a FILE\n"
    "that does not load is an error: exit 1; an .onnx model's causal attention is fused as\n"
    "`lathe run` fuses it, as a session s that :seek 0 undoes);\n"
    "a FILE.lathe-session (written by :save) is replayed to its saved step (g, s, rules, p).\n"
    "Type :help for the commands (:load, :rules, :step, :back, :run, :history, :diff …).\n"
    "History is kept in $XDG_STATE_HOME/lathe/history (~/.local/state/lathe/history).\n"
    "Ctrl-C drops the line being typed, or interrupts a running command; Ctrl-D leaves.\n"
    "Without a terminal on stdin it reads commands from the pipe, without prompts.\n"
    "  --interactive        prompts and line editing even without a terminal\n"
    "  --exit-status        exit 1 if any command failed (non-interactive checks)\n";

int run_repl_cmd(const std::vector<std::string>& args) {
  script::Limits limits;
  script::ReplOptions opts;
  std::string file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") { std::cout << kUsage; return 0; }
    if (a == "--interactive" || a == "-i") { opts.force_interactive = true; continue; }
    if (a == "--exit-status") { opts.exit_status_on_error = true; continue; }
    if (a == "--max-instructions" || a == "--max-memory") {
      char* end = nullptr;
      if (i + 1 >= args.size() || args[i + 1].empty() || args[i + 1][0] == '-' ||
          (std::strtoull(args[i + 1].c_str(), &end, 10), *end)) {
        std::cerr << "lathe repl: " << a << " needs a non-negative integer\n";
        return 2;
      }
      unsigned long long v = std::strtoull(args[++i].c_str(), nullptr, 10);
      if (a == "--max-instructions") limits.instructions = v;
      else limits.memory = (size_t)v << 20;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      std::cerr << "lathe repl: unknown option '" << a << "'\n" << kUsage;
      return 2;
    }
    if (!file.empty()) {
      std::cerr << "lathe repl: only one FILE may be given\n";
      return 2;
    }
    file = a;
  }
  script::Workbench bench(limits);
  if (!file.empty()) {
    auto r = bench.command({"load", file});
    bool session = file.size() > 14 && file.compare(file.size() - 14, 14, ".lathe-session") == 0;
    if (!r.ok) {  // a FILE that does not load ends the command: a REPL without its g helps no one
      std::fflush(stdout);
      std::fprintf(stderr, "%s\n", r.error.c_str());
      return 1;
    }
    std::printf(session ? "%s\n" : "g = %s\n", r.output.c_str());
    std::fflush(stdout);
  }
  return script::run_repl(bench, opts);
}

LATHE_COMMAND("repl", "the Lua REPL (colon commands: :help); FILE is loaded as g", run_repl_cmd);

}  // namespace
}  // namespace lathe::app
#endif  // HAVE_LATHE_SCRIPTING
