// cmd_help.cpp — `lathe help [TOPIC]`: the command list and per-command help.
#include <iostream>

#include "app/commands.h"

namespace lathe::app {
namespace {

int run_help(const std::vector<std::string>& args) {
  if (!args.empty()) {
    if (const Command* c = find_command(args[0])) {
      std::vector<std::string> h{"--help"};
      return c->run(h);
    }
    std::cerr << "lathe help: no topic '" << args[0] << "'\n";
    return 1;
  }
  std::cout << "lathe — a deep-learning compiler you can watch and steer\n\n"
               "usage: lathe COMMAND [ARGS…]   |   lathe SCRIPT.lua [ARGS…]   |   lathe [FILE]\n\n"
               "FILE is a .lua script returning a graph, a .lathe text IR file or an .onnx model.\n\n"
               "commands:\n";
  size_t w = 0;
  for (auto& c : commands()) w = std::max(w, std::string(c.name).size());
  for (auto& c : commands()) {
    std::string n = c.name;
    std::cout << "  " << n << std::string(w - n.size() + 2, ' ') << c.summary << "\n";
  }
  std::cout << "\n`lathe help COMMAND` or `lathe COMMAND --help` for details.\n";
  return 0;
}

LATHE_COMMAND("help", "this help; `lathe help COMMAND` for one command", run_help);

}  // namespace
}  // namespace lathe::app
