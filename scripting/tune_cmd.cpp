// tune_cmd.cpp — the REPL's :tune (lathe.cmd._tune): the tuner (core/tune/search.h) on the
// kernels of the session's program p, with a progress line on a terminal; Ctrl-C stops
// after the batch in flight and keeps what was found. The search starts from the
// heuristic's schedules (a fresh build of p's graph, so hand edits of p do not become the
// baseline); records are written as each kernel finishes, and those that beat the
// heuristic are replayed onto p's kernels (p recompiles before its next run), so :kernels,
// :loop k, :profile and p:run show the tuned program.
#include <lua.hpp>

#include <atomic>
#include <cstdio>
#include <sstream>

#include "backends/tune_measure.h"
#include "core/ir/diag.h"
#include "core/runtime/random.h"
#include "core/tune/records.h"
#include "core/tune/search.h"
#include "scripting/binding.h"
#include "scripting/program_box.h"
#include "scripting/progress.h"

namespace lathe::script {

namespace {

// lathe.cmd._tune(p, {trials=, measure=, records=, kernels=, binds=, budget=})
//   -> {text=, tuned=, applied=, interrupted=, records=}
int l_tune(lua_State* L) {
  std::shared_ptr<ProgramState> st = check_program(L, 1);
  int opts = lua_istable(L, 2) ? 2 : 0;
  int trials = opts ? (int)opt_field_number(L, opts, "trials", 16) : 16;
  std::string measure = opts ? opt_field_string(L, opts, "measure", "time") : "time";
  std::string records = opts ? opt_field_string(L, opts, "records", "") : "";
  std::string kernels = opts ? opt_field_string(L, opts, "kernels", "") : "";
  double budget = opts ? opt_field_number(L, opts, "budget", 0) : 0;
  if (trials < 1) raise(L, "trials must be >= 1");
  if (measure != "time" && measure != "model") raise(L, "measure is 'time' or 'model', got '" + measure + "'");
  const std::string backend = st->exe->backend();
  if (backend == "interp") raise(L, "the interp backend has no kernels to tune (:compile c or :compile llvm first)");
  Program& target = st->program();
  // symbolic dims: {B = 64}, else 64 each (as :profile)
  Bindings dims;
  std::string defaults;
  if (opts) {
    lua_getfield(L, opts, "binds");
    if (lua_istable(L, -1)) {
      int b = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, b)) {
        if (lua_type(L, -2) == LUA_TSTRING) dims[lua_tostring(L, -2)] = check_int(L, -1, "dim value");
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  for (const std::string& sym : target.graph.symbols())
    if (!dims.count(sym)) {
      dims[sym] = 64;
      defaults += (defaults.empty() ? "" : " ") + sym + "=64";
    }
  Program fresh = build_program(target.graph);  // the heuristic's schedules
  tune::TuneOptions o;
  o.trials = trials;
  o.budget_s = budget;
  o.graph = "";
  std::stringstream ks(kernels);
  for (std::string w; std::getline(ks, w, ',');) {
    if (w.empty()) continue;
    int found = -1;
    for (int i = 0; i < fresh.num_kernels(); ++i) {
      const std::string& n = fresh.kg.kernels[i].name;
      if (n == w || n.rfind(w + "_", 0) == 0 || w == std::to_string(i + 1)) found = i;
    }
    if (found < 0) raise(L, "no kernel '" + w + "' in p (:kernels lists them; give names, or numbers from 1)");
    o.only.push_back(found);
  }
  std::string path = records.empty() ? tune::default_records_path() : records;
  o.on_record = [&](const tune::Record& rec) { tune::merge_records(path, {rec}); };
  // Ctrl-C: the REPL's interrupt request, checked after each batch
  std::atomic<bool> stop{false};
  o.stop = &stop;
  bool shown = false;
  o.progress = [&](const tune::Progress& pr) {
    if (interrupted()) stop = true;
    if (!Progress::enabled()) return;
    std::string line = "tuning [" + std::to_string(pr.index) + "/" + std::to_string(pr.count) + " " + pr.kernel +
                       "] trials " + std::to_string(std::min(pr.trials, pr.max_trials)) + "/" +
                       std::to_string(pr.max_trials) + "  best " + tune::format_ms(pr.best_ms) + "  heuristic " +
                       tune::format_ms(pr.baseline_ms) + "  (Ctrl-C stops)";
    std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    std::fflush(stderr);
    shown = true;
  };
  std::unique_ptr<BackendMeasurer> m;
  TensorMap inputs;
  if (measure == "time") {
    inputs = random_inputs(fresh.graph, 1, dims);
    with_spinner("compiling with " + backend, [&] { m = std::make_unique<BackendMeasurer>(fresh, backend, inputs); });
  }
  tune::TuneResult r = tune::tune_program(fresh, dims, tune::target_of(backend), m.get(), o);
  if (shown) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
  if (interrupted()) r.interrupted = true;  // pressed during the last batch
  // the records that beat the heuristic, onto p's kernels
  tune::ApplyReport rep = tune::apply_records(target, r.records, tune::target_of(backend));
  if (rep.applied > 0) st->stale = true;
  std::string text = std::string(r.interrupted ? "interrupted: " : "") + std::to_string(r.records.size()) + " kernel" +
                     (r.records.size() == 1 ? "" : "s") + " tuned (" + (measure == "model" ? "cost model" : "measured") +
                     "), " + std::to_string(rep.applied) + " applied to p; records in " + path;
  for (auto& rec : r.records) {
    bool faster = rec.ms < rec.baseline_ms * tune::kApplyMargin;
    text += "\n  " + rec.kernel + " (" + rec.kind + "): " + tune::format_ms(rec.ms) + " vs heuristic " + tune::format_ms(rec.baseline_ms);
    if (rec.ms > 0 && rec.baseline_ms > 0) {
      char x[32];
      std::snprintf(x, sizeof x, "  %.2fx", rec.baseline_ms / rec.ms);
      text += x;
    }
    text += faster ? "" : "  (not faster: the heuristic stays)";
    if (faster)
      for (auto& l : rec.schedule) text += "\n      " + l;
  }
  for (auto& n : r.notes) text += "\nnote: " + n;
  if (!defaults.empty()) text += "\nsymbolic dims not given, used " + defaults;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, text.c_str());
  lua_setfield(L, -2, "text");
  lua_pushinteger(L, (lua_Integer)r.records.size());
  lua_setfield(L, -2, "tuned");
  lua_pushinteger(L, rep.applied);
  lua_setfield(L, -2, "applied");
  lua_pushboolean(L, r.interrupted);
  lua_setfield(L, -2, "interrupted");
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "records");
  return 1;
}

}  // namespace

void register_tune_command(lua_State* L, int table) {
  push_guarded(L, l_tune);
  lua_setfield(L, table, "_tune");
}

}  // namespace lathe::script
