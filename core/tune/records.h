// records.h — tuning records: one JSON object per line per tuned kernel (MetaSchedule's
// form), and applying them to a built Program.
//
//   {"hash":"…","target":"llvm | AMD … | threads=2","kernel":"k3_sum","kind":"reduce",
//    "schedule":["reduce_rows i0 by 512","parallel i0_o", …],"ms":0.21,"baseline_ms":2.9,
//    "trials":48,"measure":"time","graph":"colsum.lua"}
//
// `hash` is structural: the kernel's plain loop IR (lower_kernel(…, plain = true)) without
// its name, so it does not change with tensor names, node ids or buffer ids, and does
// change when the kernel computes something else. `target` names the backend and the
// machine (CPU model and flags, threads). A record applies to a kernel only when both
// match, and only when it was faster than the heuristic (ms < 0.95 × baseline_ms); a record for
// the same kernel made on another target, or for a kernel of the same name that has since
// changed, is ignored with a note.
//
// Records of `lathe tune --measure model` hold the cost model's predictions, not times
// (measure "model"): the model can be wrong by 2x on kernels it ranks as 10% faster, so
// they are applied only from a file the user names (--tuned FILE, {tuned = FILE}); found in
// the default records file they are skipped with a note, and only measured records apply.
#pragma once
#include <string>
#include <vector>

#include "core/schedule/program.h"

namespace lathe::tune {

struct Record {
  std::string hash, target, kernel, kind, measure = "time";
  std::string graph;  // the file tuned (its base name), "" when unknown
  std::vector<std::string> schedule;
  double ms = 0, baseline_ms = 0;
  int trials = 0;
  bool from_default = false;  // read from the default records file (load_tuned("")), not a --tuned FILE
};

std::string structural_hash(const KernelGraph& kg, int kernel);
// "BACKEND | CPU model | threads=N": what a record's times were measured on.
std::string target_of(const std::string& backend);
// The default records file: <cache dir>/tuned.jsonl.
std::string default_records_path();

// A time for tables and progress lines: "0.0123 ms" below 1 ms, "12.345 ms" above, "-" when negative (none).
std::string format_ms(double ms);

std::string to_json_line(const Record& r);
// Reads a records file; a line that is not a record is a UserError naming file:line.
// A missing file gives no records when `missing_ok`.
std::vector<Record> read_records(const std::string& path, bool missing_ok = false);
// Writes records (atomically), replacing older ones of the same hash and target.
void merge_records(const std::string& path, const std::vector<Record>& fresh);
// `all` with `fresh` merged in as merge_records writes them (a fresh record replaces the one
// of its hash and target, keeping that one's from_default; the others are appended).
std::vector<Record> merged_records(std::vector<Record> all, const std::vector<Record>& fresh);

// A record applies when ms < baseline_ms × this (5% faster: a tie within the noise keeps
// the heuristic).
inline constexpr double kApplyMargin = 0.95;

struct ApplyReport {
  int applied = 0;
  std::vector<std::string> notes;  // why records were not applied
};
// Replays matching records onto p's kernels (see above). `graph`: the base name of the file
// p was built from ("" when unknown): a record of that file for a kernel of the same name
// whose hash differs is noted as made before the kernel changed.
ApplyReport apply_records(Program& p, const std::vector<Record>& records, const std::string& target,
                          const std::string& graph = "");
// "dir/model.onnx" -> "model.onnx"
std::string graph_name(const std::string& path);
// The records a command uses: `path` ("" = the default file when it exists, "none" = none).
// Records from the default file are marked from_default (see above: model records skip).
std::vector<Record> load_tuned(const std::string& path);

}  // namespace lathe::tune
