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

// Compiles the graph shown (through ProgramHooks::compile) and adopts the result.
bool compile_shown(AppState& s, const std::string& backend = "");
// Shows `exe` as the compiled program (kernel level, kernel colours, kernels panel).
// Re-adopting the same program is a no-op.
void adopt_program(AppState& s, std::shared_ptr<Executable> exe);
// Adopts the command layer's `p` when it changed since the last call (cheap; every frame).
void poll_program(AppState& s);
// Times every kernel `iters` times on seeded random inputs (symbolic dims = 64).
bool profile_compiled(AppState& s, int iters = 10);
// Runs the reference interpreter on seeded random inputs; node stats then come lazily.
bool run_values(AppState& s);
// The stats of node `id` after run_values (computed on first use, then cached).
const NodeStats* node_stats(AppState& s, uint32_t id);

// Random inputs for the graph: seed 0, every symbolic dim 64 (noted in *note).
TensorMap default_inputs(const Graph& g, std::string* note);

const char* level_name(Level l);
std::optional<Level> level_from_name(const std::string& name);
const char* color_mode_name(ColorMode m);
std::optional<ColorMode> color_mode_from_name(const std::string& name);

// The first node whose summary, output name or input name contains `text`; -1 if none.
int find_node(const AppState& s, const std::string& text);

}  // namespace lathe::views
