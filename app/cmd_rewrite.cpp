// cmd_rewrite.cpp — `lathe rewrite FILE --rules R [--steps N] [--check] [--print-each]
// [-o OUT]`: applies a rule set one step at a time and prints one line per step,
//   #12 fold-add @%41: -3 +1
// then a summary line. R is a rule file (.lua returning a ruleset) or the name of a
// built-in set (assets/rules/NAME.lua). An .onnx FILE is taken as imported, before the
// `qdq` rules that loading applies elsewhere (`--rules qdq` steps through them). --check runs the interpreter before and after
// every step; without it a final check compares the result with the input graph and, if
// they differ, names the first bad step (bisection). A failing step stops with exit code 1
// and a message naming the step and the rule; -o is then not written.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/import/onnx_import.h"
#include "core/ir/diag.h"
#include "core/ir/loader.h"
#include "core/ir/text.h"

#ifdef HAVE_LATHE_SCRIPTING
#include "core/rewrite/runaway.h"
#include "core/rewrite/session.h"
#include "scripting/engine.h"
#include "scripting/rules_lua.h"
#include "scripting/session_lua.h"

namespace lathe::app {
namespace {

int run_rewrite(const std::vector<std::string>& args) {
  CLI::App app{"Apply a rule set step by step, one line per step (#INDEX RULE @%NODE: -REMOVED +ADDED).\n"
               "RULES is a .lua file returning lathe.ruleset(…) or a built-in set name.\n"
               "Without --steps it runs to a fixpoint, and stops with an error (exit 1) at a step that\n"
               "brings back an earlier graph (a cycle) or once the graph keeps growing (8x, +2000 nodes).",
               "lathe rewrite"};
  std::string file, rules_arg, out;
  int steps = -1;
  bool check = false, print_each = false, no_final_check = false;
  app.add_option("FILE", file, "graph: .lua, .lathe or .onnx")->required();
  app.add_option("--rules", rules_arg, "rule file (.lua) or built-in rule set name")->required();
  app.add_option("--steps", steps, "stop after N steps (default: to a fixpoint)");
  app.add_flag("--check", check, "numeric check (interpreter) before and after every step");
  app.add_flag("--no-final-check", no_final_check, "skip the final whole-graph check");
  app.add_flag("--print-each", print_each, "print the graph text after every step");
  app.add_option("-o,--output", out, "write the final graph (.lathe)");
  if (int rc = parse_cli(app, args); rc >= 0) return rc;
  if (steps < -1) {
    std::cerr << "lathe rewrite: --steps must be >= 0\n";
    return 2;
  }

  // an ONNX model as imported, before the default `qdq` rules, so they can be stepped through
  bool onnx = file.size() > 5 && file.compare(file.size() - 5, 5, ".onnx") == 0;
  OnnxOptions oo;
  oo.qdq_rules = false;
  Graph g = onnx ? load_onnx(file, oo) : load_graph(file);
  script::Engine engine;
  Ruleset rules;
  bool is_file = rules_arg.size() > 4 && rules_arg.compare(rules_arg.size() - 4, 4, ".lua") == 0;
  rules = script::load_rules_file(engine.L(), is_file ? rules_arg : script::builtin_rules_path(rules_arg));

  SessionOptions opts;
  opts.check = check;
  RewriteSession s(g, rules, opts);
  size_t before = g.size();
  int n = 0;
  bool fixpoint = false;
  // To a fixpoint, a run that cannot end stops early with one message: a step that brings
  // back an earlier graph (a cycle), or a graph that keeps growing (core/rewrite/runaway.h).
  RunawayGuard guard(s);
  std::map<std::string, int> fired;
  while (steps < 0 || n < steps) {
    if (steps < 0 && n >= opts.max_steps)
      throw UserError("no fixpoint after " + std::to_string(n) + " steps; the rules may cycle (use --steps N to look)");
    std::optional<StepInfo> st = s.step();  // UserError naming the step and rule on failure
    if (!st) { fixpoint = true; break; }
    ++n;
    std::printf("%s\n", script::step_line(*st).c_str());
    if (print_each) std::printf("%s\n", print_graph(s.graph()).c_str());
    std::fflush(stdout);
    fired[st->rule]++;
    if (steps < 0) guard.check(s, fired);
  }
  std::printf("%s after %d step%s: %zu -> %zu nodes\n", fixpoint ? "fixpoint" : "stopped", n, n == 1 ? "" : "s",
              before, s.graph().size());
  if (!check && !no_final_check && n > 0) {
    CheckReport r = s.final_check();
    if (!r.ok) {
      std::fflush(stdout);
      std::cerr << "lathe rewrite: check failed: step " << r.bad_step << " (rule " << r.rule
                << ") changes the result: " << r.message << "\n";
      return 1;
    }
  }
  if (!out.empty()) save_graph(s.graph(), out);
  return 0;
}

LATHE_COMMAND("rewrite", "apply rewrite rules step by step, one line per step", run_rewrite);

}  // namespace
}  // namespace lathe::app
#endif  // HAVE_LATHE_SCRIPTING
