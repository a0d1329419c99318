// op_report.h — `lathe test-backend`: every principal op of core/ir/ops.def × every dtype
// (and the key attribute cases: reduce kinds, view kinds, constant forms) run on one
// backend and compared with the interpreter, summarised one row per op case as a
// Markdown table (docs/ops-BACKEND.md) or JSON.
//
// A cell is n/a when the IR does not define the op for that dtype (check_node rejects it:
// Recip on i32) or the interpreter cannot run it; otherwise it passes when every case of
// that row and dtype matches the interpreter within default_tolerance. Failures carry a
// category (unsupported, compile error, run error, wrong values) for the table, which
// must not depend on the machine's timing or paths, and the full message for JSON.
#pragma once
#include <string>
#include <vector>

#include "core/ir/dtype.h"

namespace lathe {

struct OpCell {
  enum Status { NA, Pass, Fail } status = NA;
  std::string category;              // Fail: "unsupported", "compile error", "run error", "wrong values"
  std::vector<std::string> failing;  // Fail: the failing cases ("f16→i8"), "" for a one-case cell
  std::string message;               // Fail: the first failure's full message
};

struct OpRow {
  std::string op;       // "Reduce"
  std::string variant;  // "max", "" for ops with one case
  OpCell cells[kNumDTypes];
  // ✅ every applicable dtype passes, 🟡 some, ❌ none, "n/a" when no dtype applies
  std::string status() const;
};

struct OpReport {
  std::string backend;
  std::vector<OpRow> rows;
  int failures() const;                  // failing cells
  std::string markdown() const;
  std::string json() const;
};

// Runs every case on `backend` (compiled together where the backend allows, one by one
// when a batch fails to compile). UserError when the backend is unknown or unavailable.
OpReport run_op_report(const std::string& backend);

}  // namespace lathe
