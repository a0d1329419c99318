// commands.h — the CLI subcommand table. Each subcommand lives in its own app/cmd_*.cpp
// and registers itself with LATHE_COMMAND; main() dispatches on argv[1].
//
// A command returns the process exit code: 0 success, 1 user error, 2 usage error.
// UserError escaping a command is printed by main() and becomes exit code 1.
#pragma once
#include <string>
#include <vector>

namespace lathe::app {

struct Command {
  const char* name;
  const char* summary;   // one line for `lathe help`
  int (*run)(const std::vector<std::string>& args);  // args after the command name
};

void register_command(const Command& c);
const std::vector<Command>& commands();
const Command* find_command(const std::string& name);

struct CommandRegistrar {
  explicit CommandRegistrar(const Command& c) { register_command(c); }
};

}  // namespace lathe::app

#define LATHE_CONCAT_(a, b) a##b
#define LATHE_CONCAT(a, b) LATHE_CONCAT_(a, b)
#define LATHE_COMMAND(name, summary, fn) \
  static ::lathe::app::CommandRegistrar LATHE_CONCAT(lathe_cmd_, __LINE__)({name, summary, fn})
