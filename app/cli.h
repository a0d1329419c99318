// cli.h — the one way subcommands parse their arguments with CLI11.
//
//   CLI::App cli{"what it does", "lathe NAME"};
//   … add options …
//   if (int rc = parse_cli(cli, args); rc >= 0) return rc;   // --help, or a usage error
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lathe::app {

// Parses `args` (the words after the command name). Returns -1 when the command should go
// on; otherwise the exit code to return: 0 after --help (printed), 2 after a usage error
// (CLI11's message printed to stderr).
inline int parse_cli(CLI::App& cli, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    cli.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

}  // namespace lathe::app
