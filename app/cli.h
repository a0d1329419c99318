// cli.h — the one way subcommands parse their arguments with CLI11.
//
//   CLI::App cli{"what it does", "lathe NAME"};
//   … add options …
//   if (int rc = parse_cli(cli, args); rc >= 0) return rc;   // --help, or a usage error
#pragma once
#include <CLI/CLI.hpp>

#include <cstdlib>
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

// `--qdq-sat16 auto|on|off`: whether a QDQ ONNX model loads with the `qdq-sat16` rule set
// (u8 × i8 pair sums saturating at i16 as ONNX Runtime's kernels on x86 without VNNI; auto:
// on such hosts, core/rewrite/qdq_rules.h). The loader reads LATHE_QDQ_SAT16, which on/off set
// for this process and the children it starts (bench --models).
inline void add_qdq_sat16_option(CLI::App& cli, std::string& v) {
  cli.add_option("--qdq-sat16", v,
                 "QDQ models: u8 x i8 pair sums saturating at i16 as ONNX Runtime's AVX2 kernels (on), exact (off); "
                 "auto (default): on for x86 without VNNI, or LATHE_QDQ_SAT16")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}
inline void apply_qdq_sat16_option(const std::string& v) {
  if (v == "on" || v == "off") setenv("LATHE_QDQ_SAT16", v == "on" ? "1" : "0", 1);
}

}  // namespace lathe::app
