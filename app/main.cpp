// main.cpp — `lathe`: dispatches to the subcommands registered in app/cmd_*.cpp.
//
//   lathe COMMAND [ARGS…]     a subcommand (see `lathe help`)
//   lathe SCRIPT.lua [ARGS…]  runs a Lua script (the "script" command)
//   lathe [FILE]              the desktop app on FILE, or the REPL without a display
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "core/ir/diag.h"

namespace lathe::app {

namespace {
std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}
bool has_display() {
  const char* d = std::getenv("DISPLAY");
  return d && *d;
}
bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
}  // namespace

void register_command(const Command& c) { table().push_back(c); }
const std::vector<Command>& commands() { return table(); }
const Command* find_command(const std::string& name) {
  for (auto& c : table()) if (name == c.name) return &c;
  return nullptr;
}

int dispatch(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string cmd;
  if (args.empty()) {
    cmd = has_display() && find_command("gui") ? "gui" : "repl";
  } else if (find_command(args[0])) {
    cmd = args[0];
    args.erase(args.begin());
  } else if (args[0] == "--help" || args[0] == "-h") {
    cmd = "help";
    args.erase(args.begin());
  } else if (ends_with(args[0], ".lua") && find_command("script")) {
    cmd = "script";
  } else if (args[0].size() && args[0][0] != '-') {
    // a FILE; a word that is neither a command nor an existing path nor has a graph
    // file's extension is a mistyped command
    std::error_code ec;
    bool graph_ext = ends_with(args[0], ".lathe") || ends_with(args[0], ".onnx") || ends_with(args[0], ".lathe-session");
    if (!graph_ext && !std::filesystem::exists(args[0], ec)) {
      std::cerr << "lathe: '" << args[0] << "' is neither a command nor a file; see `lathe help` for the commands\n";
      return 2;
    }
    cmd = has_display() && find_command("gui") ? "gui" : "repl";
  } else {
    std::cerr << "lathe: unknown option '" << args[0] << "'; see `lathe help`\n";
    return 2;
  }
  const Command* c = find_command(cmd);
  if (!c) {
    std::cerr << "lathe: the '" << cmd << "' command is not built into this binary\n";
    return 2;
  }
  if (cmd == "repl" && args.empty() && argc == 1 && !has_display())
    std::cerr << "lathe: no display; starting the REPL (use `lathe gui` under X or Xvfb)\n";
  return c->run(args);
}

}  // namespace lathe::app

int main(int argc, char** argv) {
  // The c backend's kernels use OpenMP. Spinning workers (libgomp's default) cost
  // milliseconds per parallel loop when other processes share the cores (softmax 64x1000:
  // 8 ms instead of 0.04 ms at load 4 on 2 cores); sleeping ones cost microseconds. Set
  // before any thread starts and before libgomp loads with the first kernel.
  setenv("OMP_WAIT_POLICY", "passive", 0);
  // A run's outputs and temporaries are allocated afresh each run. glibc serves blocks
  // over its mmap threshold (128 KiB at start, raised only when such a block is freed) by
  // mmap, so whether a 128 KiB - 32 MiB output page-faults on every run depended on the
  // heap's history: a 1001-wide softmax ran 0.19 or 0.06 ms per run by the size of a file
  // read before (10655 vs 3562 minor faults in 200 runs). Fixed thresholds keep such blocks
  // in the heap and reuse their pages; peak RSS measured equal or lower on bert, gpt2 and
  // resnet50. A user's GLIBC_TUNABLES naming malloc settings wins.
  const char* tun = std::getenv("GLIBC_TUNABLES");
  if (!(tun && std::strstr(tun, "glibc.malloc."))) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
  try {
    return lathe::app::dispatch(argc, argv);
  } catch (const lathe::UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const lathe::InternalError& e) {
    std::cerr << "lathe: " << e.what() << "\n  this is a bug in Lathe; please report it with the input that caused it\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lathe: error: " << e.what() << "\n";
    return 1;
  }
}
