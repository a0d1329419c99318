// gui_script_tune.cpp — the app's Tune job from Lua and the hooks it needs (see
// views/tune_job.h): gui.tune, gui.tune_result, gui.tune_cancel, gui.tune_apply, and the
// ProgramHooks that time candidates on a backend (BackendMeasurer) and compile a tuned
// program as `p` — views link no backend, so both come from here.
//
//   gui.tune{kernel = k | name, trials = 16, measure = "time" | "model", records = path,
//            budget = s, seed = 1, wait = true}   -> gui.tune_result()
//
// Without `kernel` the whole graph is tuned. Like gui.compile, it waits for the job (a
// --script yields while the app renders) unless wait = false.
#if defined(HAVE_LATHE_VIEWS) && defined(HAVE_LATHE_SCRIPTING)
#include <lua.hpp>

#include "app/gui_script.h"
#include "backends/tune_measure.h"
#include "core/runtime/random.h"
#include "scripting/binding.h"
#include "scripting/program_box.h"
#include "views/app_actions.h"
#include "views/tune_job.h"

namespace lathe::app {
namespace {

using gui_lua::app;
using gui_lua::set_bool;
using gui_lua::set_int;
using gui_lua::set_num;
using gui_lua::set_str;

// gui._start_tune(opts): true when the job runs now (gui._await waits for it).
int l_start_tune(lua_State* L) {
  views::AppState& s = app(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!s.compiled) script::raise(L, "gui.tune: nothing compiled yet (gui.compile())");
  views::TuneRequest r;
  lua_getfield(L, 1, "kernel");
  if (lua_isinteger(L, -1)) {
    r.kernel = static_cast<int>(lua_tointeger(L, -1)) - 1;
    if (r.kernel < 0 || r.kernel >= s.compiled->num_kernels())
      script::raise(L, "gui.tune: kernel " + std::to_string(r.kernel + 1) + " is out of range (1.." +
                           std::to_string(s.compiled->num_kernels()) + ")");
  } else if (lua_type(L, -1) == LUA_TSTRING) {
    std::string name = lua_tostring(L, -1);
    const auto& ks = s.compiled->program().kg.kernels;
    for (size_t i = 0; i < ks.size() && r.kernel < 0; ++i)
      if (ks[i].name == name) r.kernel = static_cast<int>(i);
    for (size_t i = 0; i < ks.size() && r.kernel < 0; ++i)
      if (ks[i].name.find(name) != std::string::npos) r.kernel = static_cast<int>(i);
    if (r.kernel < 0) script::raise(L, "gui.tune: no kernel '" + name + "'");
  } else if (!lua_isnil(L, -1)) {
    script::raise(L, "gui.tune: kernel is a number (1-based) or a name; leave it out to tune the graph");
  }
  lua_pop(L, 1);
  r.trials = static_cast<int>(script::opt_field_number(L, 1, "trials", 16));
  if (r.trials < 1) script::raise(L, "gui.tune: trials must be >= 1");
  r.measure = script::opt_field_string(L, 1, "measure", "time");
  if (r.measure != "time" && r.measure != "model") script::raise(L, "gui.tune: measure is 'time' or 'model', got '" + r.measure + "'");
  r.records = script::opt_field_string(L, 1, "records", "");
  r.budget_s = script::opt_field_number(L, 1, "budget", 0);
  r.seed = static_cast<uint64_t>(script::opt_field_number(L, 1, "seed", 1));
  r.cancel_after = static_cast<int>(script::opt_field_number(L, 1, "cancel_after", 0));
  uint64_t before = s.jobs.finished;
  if (!views::start_tune(s, r)) script::raise(L, "gui.tune: could not start (" + (s.log.empty() ? std::string("?") : s.log.back().text) + ")");
  lua_pushboolean(L, s.jobs.busy() && s.jobs.finished == before);
  return 1;
}

void push_strings(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushstring(L, v[i].c_str());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

// gui.tune_result(): the last Tune job, as the Tune tab shows it (nil before the first).
int l_tune_result(lua_State* L) {
  views::AppState& s = app(L);
  if (!s.tune) return 0;
  const views::TuneRun& run = *s.tune;
  views::TuneRun::Live live = run.snapshot();
  lua_createtable(L, 0, 12);
  set_str(L, "scope", run.scope);
  set_str(L, "backend", run.backend);
  set_str(L, "measure", run.req.measure);
  set_str(L, "records", run.records_path);
  set_bool(L, "finished", run.finished);
  set_bool(L, "interrupted", run.interrupted);
  set_bool(L, "applied", run.applied);
  set_int(L, "applied_kernels", run.applied_kernels);
  set_num(L, "seconds", run.seconds);
  push_strings(L, run.notes);
  lua_setfield(L, -2, "notes");
  lua_createtable(L, static_cast<int>(live.kernels.size()), 0);
  for (size_t i = 0; i < live.kernels.size(); ++i) {
    const views::TuneKernel& tk = live.kernels[i];
    lua_createtable(L, 0, 14);
    set_str(L, "name", tk.name);
    set_str(L, "kind", tk.kind);
    set_int(L, "kernel", tk.kernel + 1);
    set_int(L, "trials", static_cast<int64_t>(tk.trials.size()));
    lua_createtable(L, static_cast<int>(tk.trials.size()), 0);   // each candidate's ms (-1: failed)
    for (size_t j = 0; j < tk.trials.size(); ++j) {
      lua_pushnumber(L, tk.trials[j].ms);
      lua_rawseti(L, -2, static_cast<lua_Integer>(j + 1));
    }
    lua_setfield(L, -2, "points");
    set_bool(L, "done", tk.done);
    set_bool(L, "has_record", tk.has_record);
    set_num(L, "ms", tk.best_ms);
    set_num(L, "baseline_ms", tk.baseline_ms);
    set_bool(L, "faster", tk.faster);
    if (tk.has_record) {
      set_str(L, "hash", tk.record.hash);
      push_strings(L, tk.record.schedule);
      lua_setfield(L, -2, "schedule");
      set_str(L, "best_loop", tk.best_loop);
      set_str(L, "heuristic_loop", tk.heuristic_loop);
    }
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "kernels");
  return 1;
}

int l_tune_cancel(lua_State* L) {
  lua_pushboolean(L, views::cancel_tune(app(L)));
  return 1;
}

// gui._apply_tune(): true when a compile job runs now (gui._await waits for it).
int l_apply_tune(lua_State* L) {
  views::AppState& s = app(L);
  uint64_t before = s.jobs.finished;
  if (!views::apply_tune(s)) script::raise(L, "gui.tune_apply: " + (s.log.empty() ? std::string("?") : s.log.back().text));
  lua_pushboolean(L, s.jobs.busy() && s.jobs.finished == before);
  return 1;
}

const script::Function kTune[] = {
    {"_start_tune", l_start_tune, "gui._start_tune(opts)", "start a Tune job (gui.tune waits for it)"},
    {"tune_result", l_tune_result, "gui.tune_result()",
     "the last Tune job: {scope, backend, measure, finished, interrupted, applied, records, seconds, notes, kernels = "
     "{{name, kind, kernel, trials, points, ms, baseline_ms, faster, schedule, best_loop, heuristic_loop}, …}}"},
    {"tune_cancel", l_tune_cancel, "gui.tune_cancel()",
     "stop the running Tune job after the batch in flight (it keeps what it found); false when none runs"},
    {"_apply_tune", l_apply_tune, "gui._apply_tune()", "write the records and start compiling the tuned program"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

namespace gui_lua {

void register_tune_functions(lua_State* L, int gui_table) { script::register_functions(L, gui_table, kTune, "gui."); }

void add_tune_help() {
  for (const script::Function* f = kTune; f->name; ++f) script::add_help(std::string("gui.") + f->name, f->signature, f->doc);
  script::add_help("gui.tune", "gui.tune{kernel = k | name, trials = 16, measure = 'time' | 'model', records = path, budget = s, seed = 1, wait = true}",
                   "tune the compiled program's kernel k (1-based, or a name), or every kernel without `kernel`, as a "
                   "background job (the Tune tab plots each candidate); waits and returns gui.tune_result() unless wait = false");
  script::add_help("gui.tune_apply", "gui.tune_apply()",
                   "replay the last Tune job's schedules that beat the heuristic onto p (recompiles, waits) and write "
                   "its records; returns the number of kernels rescheduled");
}

const char* const kTuneLua = R"lua(
function gui.tune(opts)
  if opts ~= nil and type(opts) ~= "table" then error("gui.tune(opts): opts must be a table", 2) end
  opts = opts or {}
  gui._await()
  if gui._start_tune(opts) and opts.wait ~= false then
    local err = gui._await()
    if err then error(err, 2) end
  end
  if opts.wait ~= false then return gui.tune_result() end
end
function gui.tune_apply()
  gui._await()
  if gui._apply_tune() then
    local err = gui._await()
    if err then error(err, 2) end
  end
  return gui.tune_result().applied_kernels
end
)lua";

void wire_tune_hooks(views::ProgramHooks& h) {
  h.measurer = [](const Program& p, const std::string& backend, const Bindings& dims) -> std::unique_ptr<tune::Measurer> {
    return std::make_unique<BackendMeasurer>(p, backend, random_inputs(p.graph, 1, dims));
  };
  h.build_scheduled = [](Program p, const std::string& backend, std::vector<loop::LoopFunc> as_compiled) {
    Backend& b = get_backend(backend);
    auto st = std::make_shared<script::ProgramState>();
    st->compiled = b.compile(p);
    st->as_compiled = std::move(as_compiled);
    st->exe = std::make_shared<Executable>(std::move(p), st->compiled, backend);
    return views::BuiltProgram{st->exe, backend, st};
  };
}

}  // namespace gui_lua
}  // namespace lathe::app
#endif
