// cmd_test_backend.cpp — `lathe test-backend [--backend B] [--report OUT.md] [--json]`:
// every principal op × every dtype run on a backend against the interpreter, as a Markdown
// table (one row per op case) or JSON (backends/op_report.h). docs/ops-*.md are its output.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "backends/op_report.h"
#include "core/ir/diag.h"

namespace lathe::app {
namespace {

int run_test_backend(const std::vector<std::string>& args) {
  CLI::App cli{"Runs every principal op (core/ir/ops.def) on every dtype, with the key attribute cases\n"
               "(reduce kinds, view kinds), on a backend and compares each with the interpreter.\n"
               "Prints a Markdown table, one row per op case: ✅ every dtype passes, 🟡 some, ❌ none,\n"
               "with the failing dtypes named (docs/ops-c.md, ops-llvm.md, ops-cuda.md are its output).\n"
               "Exit code 0 when it ran, whatever it found; 1 when the backend cannot run here.",
               "lathe test-backend"};
  std::string backend = default_backend(), report;
  bool json = false;
  cli.add_option("--backend", backend, "c | llvm | cuda | interp (default: " + default_backend() + ")");
  cli.add_option("--report", report, "write the report to this file instead of stdout");
  cli.add_flag("--json", json, "JSON (per dtype: status, failing cases, first message) instead of Markdown");
  if (int rc = parse_cli(cli, args); rc >= 0) return rc;
  OpReport r = run_op_report(backend);
  std::string text = json ? r.json() + "\n" : r.markdown();
  if (report.empty()) {
    std::cout << text;
  } else {
    std::ofstream f(report, std::ios::binary | std::ios::trunc);
    if (!f) throw UserError("cannot write report file '" + report + "'");
    f << text;
    if (!f) throw UserError("error writing report file '" + report + "'");
  }
  int failing_rows = 0;
  for (auto& row : r.rows) failing_rows += row.status() == "❌" || row.status() == "🟡";
  std::cerr << "test-backend " << backend << ": " << r.rows.size() << " op cases, " << failing_rows
            << (failing_rows == 1 ? " with a failing dtype" : " with failing dtypes") << "\n";
  return 0;
}

LATHE_COMMAND("test-backend", "every op × dtype on a backend against the interpreter: a Markdown/JSON support table",
              run_test_backend);

}  // namespace
}  // namespace lathe::app
