// app_actions.h — the app's program commands: compile the graph shown, adopt the command
// layer's program, profile it, run the graph for values, and the small name <-> enum
// helpers scripts use. Buttons, the console sync and the `gui` Lua table all call these,
// so every path changes AppState the same way.
//
// None of these throws: a failure is logged, shown in the error panel (compile, run) and
// reported by the return value.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "views/app_state.h"

namespace lathe::views {

// Background jobs (jobs.h). Each start_* takes what it needs from `s` (a snapshot of the
// graph shown, the program) and returns at once; false, with a log line, when it cannot
// start (nothing to work on, or another job is running). The result is applied when the
// job ends: a compile whose graph was replaced meanwhile is dropped; one whose graph was
// rewritten meanwhile is shown marked "from an earlier step".
//
// Compiles the graph shown (ProgramHooks::build on the worker, then publish: the console's
// `p` is the same program) and adopts the result.
bool start_compile(AppState& s, const std::string& backend = "");
// Times every kernel `iters` times on seeded random inputs (symbolic dims = 64).
bool start_profile(AppState& s, int iters = 10);
// Runs the reference interpreter on seeded random inputs; node stats then come lazily.
bool start_run(AppState& s);
// The same, waiting for the job and applying it; true when it succeeded. For callers that
// need the result now (the console, tests). A job already running is waited for first.
bool compile_shown(AppState& s, const std::string& backend = "");
bool profile_compiled(AppState& s, int iters = 10);
bool run_values(AppState& s);
// The error the last quantize step introduced (AppState::quant_float against the graph
// shown), per output on seeded inputs, run on `backend` ("" = the default, "interp" = the
// interpreter); the result goes to AppState::quant_errors. false (logged) when the graph
// shown does not come from a quantize step.
bool start_quant_error(AppState& s, const std::string& backend = "");
bool measure_quant_error(AppState& s, const std::string& backend = "");   // waits, as run_values
// Waits for the running job (if any) and applies it; true unless it failed.
bool finish_job(AppState& s);

// Shows `exe` as the compiled program (kernel level, kernel colours, kernels panel),
// compiled from graph version `version` (-1: the version shown). Re-adopting the same
// program is a no-op.
void adopt_program(AppState& s, std::shared_ptr<Executable> exe, int64_t version = -1);
// Adopts the command layer's `p` when it changed since the last call (cheap; every frame).
void poll_program(AppState& s);
// The stats of node `id` after run_values (computed on first use, then cached).
const NodeStats* node_stats(AppState& s, uint32_t id);

// Random inputs for the graph: seed 0, every symbolic dim 64 (noted in *note).
TensorMap default_inputs(const Graph& g, std::string* note);

const char* level_name(Level l);
std::optional<Level> level_from_name(const std::string& name);
const char* color_mode_name(ColorMode m);
std::optional<ColorMode> color_mode_from_name(const std::string& name);

// Nodes matching `text`, best first: exact matches of an input or output name, a node id
// ("%12" or "12") or a scope path (or its last component), in graph order; then nodes
// whose op summary, input or output name, dtype/shape or scope path contains it (case
// folded), or matches it as a regex (`regex`).
std::vector<uint32_t> find_nodes(const AppState& s, const std::string& text, bool regex = false);
// The first of find_nodes; -1 if none.
int find_node(const AppState& s, const std::string& text);

}  // namespace lathe::views
