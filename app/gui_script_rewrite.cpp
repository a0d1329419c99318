// gui_script_rewrite.cpp — the `gui` functions for the rewrite timeline and the rules
// editor (see gui_script.h). They go through the same commands the windows issue
// (`:rules`, `:step`, `:run`, …, then views/timeline.h's note_* to record what happened),
// so a script sees the timeline and the editor as a user would.
//
//   gui.timeline()              the session: step, last, breakpoint stop, per-rule stats
//   gui.rewrite(cmd [, arg])    step | back | run | seek, as the timeline's buttons do
//   gui.breakpoint(rule [, on]) toggle a breakpoint (run stops before the rule fires)
//   gui.load_rules(source)      :rules SOURCE; a failure goes to the error panel
//   gui.edit_rules([source])    open a rules file (or built-in) in the Rules tab
//   gui.rules_text([text])      the editor's buffer (setting it marks it modified)
//   gui.save_rules([path [, reload=true]])   save (and reload); returns ok, error
//   gui.quantize([{mode, per_channel, block}])   :quantize as one session step (Timeline > Quantize…)
//   gui.quant_info()            Inspector > Quantization for the selected node
//   gui.quant_error([backend])  measure the last quantize step's error (waits for the job)
#if defined(HAVE_LATHE_VIEWS) && defined(HAVE_LATHE_SCRIPTING)
#include <lua.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "app/gui_script.h"
#include "scripting/binding.h"
#include "scripting/session_lua.h"
#include "views/app_actions.h"
#include "views/inspector.h"
#include "views/rules_editor.h"
#include "views/timeline.h"

namespace lathe::app::gui_lua {
namespace {

// gui.timeline(): nil without a session, else {source, step, last, break_rule,
// break_node, breakpoints = {…}, rules = {{name, set, fired, tried, matched, ms,
// breakpoint, enabled}, …} in the order the rules were written, stats = {[name] = same}}.
int l_timeline(lua_State* L) {
  views::AppState& s = app(L);
  lua_getglobal(L, "s");
  std::shared_ptr<RewriteSession> ss = script::test_session(L, -1);
  lua_pop(L, 1);
  if (!ss) return 0;
  lua_createtable(L, 0, 9);
  set_str(L, "source", s.rules_source);
  set_int(L, "step", ss->current());
  set_int(L, "last", ss->last());
  if (!s.break_rule.empty()) {
    set_str(L, "break_rule", s.break_rule);
    set_int(L, "break_node", s.break_node);
  }
  lua_newtable(L);
  int i = 0;
  for (const std::string& b : ss->breakpoints()) {
    lua_pushstring(L, b.c_str());
    lua_rawseti(L, -2, ++i);
  }
  lua_setfield(L, -2, "breakpoints");
  RuleStatsTable stats = ss->stats();
  lua_newtable(L);   // rules
  lua_newtable(L);   // stats
  int n = 0;
  for (const Ruleset& rs : ss->rulesets())
    for (const auto& rule : rs.rules()) {
      auto it = stats.find(rule->name);
      RuleStats st = it == stats.end() ? RuleStats{} : it->second;
      lua_createtable(L, 0, 8);
      set_str(L, "name", rule->name);
      set_str(L, "set", rs.name());
      set_int(L, "fired", static_cast<int64_t>(st.fired));
      set_int(L, "tried", static_cast<int64_t>(st.tried));
      set_int(L, "matched", static_cast<int64_t>(st.matched));
      set_num(L, "ms", st.seconds * 1000.0);
      set_bool(L, "breakpoint", ss->breakpoints().count(rule->name) > 0);
      set_bool(L, "enabled", rs.enabled(rule->name));
      lua_pushvalue(L, -1);
      lua_setfield(L, -3, rule->name.c_str());   // stats[name]
      lua_rawseti(L, -3, ++n);                   // rules[n]
    }
  lua_setfield(L, -3, "stats");
  lua_setfield(L, -2, "rules");
  return 1;
}

// gui._note_rewrite(line, ok, output) / gui._note_rules(source, ok, output): record what a
// command answered, as the timeline does after its buttons.
int l_note_rewrite(lua_State* L) {
  views::AppState& s = app(L);
  views::note_rewrite(s, luaL_checkstring(L, 1), lua_toboolean(L, 2), luaL_optstring(L, 3, ""));
  if (s.sync) s.sync();   // the graph view shows the step now
  return 0;
}

int l_note_rules(lua_State* L) {
  views::AppState& s = app(L);
  views::note_rules_load(s, luaL_checkstring(L, 1), lua_toboolean(L, 2), luaL_optstring(L, 3, ""));
  if (s.sync) s.sync();
  return 0;
}

void push_quant_errors(lua_State* L, const views::AppState& s) {
  lua_newtable(L);
  if (!s.quant_errors || s.quant_errors->version != s.version) return;
  int i = 0;
  for (const QuantError& e : s.quant_errors->errors) {
    lua_createtable(L, 0, 3);
    set_str(L, "output", e.output);
    set_num(L, "rel_max", e.rel_max);
    set_num(L, "cosine", e.cosine);
    lua_rawseti(L, -2, ++i);
  }
}

// gui.quant_info(): {step = "step 1: quantize …" (or nil), sites = {{kind, site, integer,
// dtype, contraction, zero_point, scales = {{node, constant, count, min, max}}, lines}},
// errors = {{output, rel_max, cosine}} (measured for the graph shown, else empty)}
int l_quant_info(lua_State* L) {
  views::AppState& s = app(L);
  const std::vector<QuantSite>& sites = views::quant_sites(s, s.selected_node());
  lua_createtable(L, 0, 3);
  if (s.quant_float) set_str(L, "step", s.quant_step);
  lua_newtable(L);
  int i = 0;
  for (const QuantSite& q : sites) {
    lua_newtable(L);
    set_str(L, "kind", q.kind == QuantSite::Kind::Dequantize ? "dequantize" : "quantize");
    set_int(L, "site", q.site->id);
    set_int(L, "integer", q.integer->id);
    set_str(L, "dtype", std::string(dtype_name(q.integer->dtype)));
    set_bool(L, "contraction", q.contraction);
    if (q.zero_point) set_int(L, "zero_point", q.zero_point->id);
    lua_newtable(L);
    int j = 0;
    for (const QuantScale& sc : q.scales) {
      lua_newtable(L);
      set_int(L, "node", sc.node->id);
      set_bool(L, "constant", sc.constant);
      set_int(L, "count", sc.count);
      set_num(L, "min", sc.min);
      set_num(L, "max", sc.max);
      lua_rawseti(L, -2, ++j);
    }
    lua_setfield(L, -2, "scales");
    lua_newtable(L);
    j = 0;
    for (const std::string& l : q.lines()) {
      lua_pushstring(L, l.c_str());
      lua_rawseti(L, -2, ++j);
    }
    lua_setfield(L, -2, "lines");
    lua_rawseti(L, -2, ++i);
  }
  lua_setfield(L, -2, "sites");
  push_quant_errors(L, s);
  lua_setfield(L, -2, "errors");
  return 1;
}

// gui.quant_error([backend]): the Inspector's "Measure the error", waited for.
int l_quant_error(lua_State* L) {
  views::AppState& s = app(L);
  std::string backend = luaL_optstring(L, 1, "");
  if (!s.quant_float) script::raise(L, "gui.quant_error: the graph shown does not come from a quantize step (gui.quantize first)");
  if (!views::measure_quant_error(s, backend))
    script::raise(L, "gui.quant_error: " + (s.jobs.last_error.empty() ? std::string("the measurement did not finish") : s.jobs.last_error));
  push_quant_errors(L, s);
  return 1;
}

int l_edit_rules(lua_State* L) {
  views::AppState& s = app(L);
  std::string source = luaL_optstring(L, 1, s.rules_source.c_str());
  if (source.empty()) script::raise(L, "gui.edit_rules: which rules? (a FILE.lua or a built-in name; none loaded yet)");
  if (!views::open_rules_file(s, source))
    script::raise(L, s.error ? s.error->what + ": " + s.error->diag.message : "gui.edit_rules: cannot open " + source);
  s.bottom_tab_request = "Rules";
  lua_pushstring(L, s.rules_doc.path.c_str());
  return 1;
}

int l_rules_text(lua_State* L) {
  views::AppState& s = app(L);
  if (!lua_isnoneornil(L, 1)) {
    std::string text = luaL_checkstring(L, 1);
    if (text != s.rules_doc.text) s.rules_doc.text = std::move(text), s.rules_doc.dirty = true;
  }
  lua_pushstring(L, s.rules_doc.text.c_str());
  return 1;
}

// gui._save_rules([path]): the file written, or nil and why.
int l_save_rules(lua_State* L) {
  views::AppState& s = app(L);
  std::string why;
  if (!views::save_rules_file(s, luaL_optstring(L, 1, ""), &why)) {
    s.warn("save rules: " + why);
    lua_pushnil(L);
    lua_pushstring(L, why.c_str());
    return 2;
  }
  lua_pushstring(L, s.rules_doc.path.c_str());
  return 1;
}

// gui._rules_file(text): rule text written to a file of its own (named by its hash, in the
// temp directory), which :rules loads and a saved session names.
int l_rules_file(lua_State* L) {
  std::string text = luaL_checkstring(L, 1);
  char name[64];
  std::snprintf(name, sizeof name, "lathe-rules-%016zx.lua", std::hash<std::string>{}(text));
  std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) script::raise(L, "gui.load_rules: cannot write the rule text to " + path.string());
  lua_pushstring(L, path.string().c_str());
  return 1;
}

const script::Function kRewrite[] = {
    {"timeline", l_timeline, "gui.timeline()",
     "the rewrite session as the timeline shows it: {step, last, break_rule, break_node, breakpoints, rules = {{name, fired, tried, matched, ms, breakpoint}, …}, stats = {[name] = …}}"},
    {"edit_rules", l_edit_rules, "gui.edit_rules([source])", "open a rules file (or a built-in set) in the Rules tab; returns the file"},
    {"rules_text", l_rules_text, "gui.rules_text([text])", "the rules editor's text; with text, replace it (unsaved)"},
    {"quant_info", l_quant_info, "gui.quant_info()",
     "Inspector > Quantization for the selected node: {step, sites = {{kind, site, integer, dtype, contraction, zero_point, "
     "scales = {{node, constant, count, min, max}}, lines}}, errors = {{output, rel_max, cosine}}}"},
    {"quant_error", l_quant_error, "gui.quant_error([backend])",
     "measure the last quantize step's error per output against the float graph on seeded inputs (waits); returns gui.quant_info().errors"},
    {"_note_rewrite", l_note_rewrite, "gui._note_rewrite(line, ok, output)", "record a rewrite command's answer"},
    {"_note_rules", l_note_rules, "gui._note_rules(source, ok, output)", "record a :rules answer"},
    {"_save_rules", l_save_rules, "gui._save_rules([path])", "write the rules editor's text"},
    {"_rules_file", l_rules_file, "gui._rules_file(text)", "write rule text to a file of its own; returns the path"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void register_rewrite_functions(lua_State* L, int gui_table) {
  script::register_functions(L, gui_table, kRewrite, "gui.");
  add_rewrite_help();
}

void add_rewrite_help() {
  for (const script::Function* f = kRewrite; f->name; ++f) script::add_help(std::string("gui.") + f->name, f->signature, f->doc);
  script::add_help("gui.rewrite", "gui.rewrite(cmd [, arg])",
                   "step | back | run | seek as the timeline's buttons do; a run stops before a breakpoint rule fires");
  script::add_help("gui.quantize", "gui.quantize([{mode=\"dynamic\", per_channel=true, block=32}])",
                   "quantize the constant-weight matmuls as one session step, as Timeline > Quantize… does (:quantize)");
  script::add_help("gui.breakpoint", "gui.breakpoint(rule [, on=true])", "run() stops before this rule fires (the timeline's checkbox)");
  script::add_help("gui.load_rules", "gui.load_rules(source)",
                   "load rules as the timeline does: a FILE.lua, a built-in name, or rule text (Lua returning a ruleset)");
  script::add_help("gui.save_rules", "gui.save_rules([path [, reload=true]])",
                   "save the rules editor's text (to path) and reload it; returns ok, error (the previous rules stay on error)");
}

extern const char* const kRewriteLua = R"lua(
local rewrite_cmds = { step = true, back = true, run = true, seek = true }
function gui.rewrite(what, arg)
  if not rewrite_cmds[what] then error("gui.rewrite: step, back, run or seek, got " .. tostring(what), 2) end
  local line = ":" .. what .. (arg ~= nil and " " .. tostring(arg) or "")
  local ok, out = pcall(lathe.cmd[what], arg ~= nil and tostring(arg) or nil)
  gui._note_rewrite(line, ok, tostring(out))
  if not ok then error(out, 2) end
  return out
end
function gui.quantize(o)
  o = o or {}
  if type(o) ~= "table" then error("gui.quantize: options must be a table {mode=, per_channel=, block=}", 2) end
  local mode = o.mode or "dynamic"
  local words = { mode, "error=none" }
  if mode ~= "weight-int4" then words[#words + 1] = o.per_channel == false and "per-tensor" or "per-channel" end
  if o.block ~= nil then words[#words + 1] = "block=" .. tostring(o.block) end
  local ok, out = pcall(lathe.cmd.quantize, table.unpack(words))
  gui._note_rewrite(":quantize " .. table.concat(words, " "), ok, tostring(out))
  if not ok then error(out, 2) end
  return out
end
function gui.breakpoint(rule, on)
  if s == nil then error("gui.breakpoint: no rewrite session (gui.load_rules first)", 2) end
  s:breakpoint(rule, on ~= false)
end
function gui.load_rules(source)
  if type(source) ~= "string" then error("gui.load_rules: a FILE.lua, a built-in name or rule text, got a " .. type(source), 2) end
  if source:find("\n") or source:find("lathe%.rule") then source = gui._rules_file(source) end  -- rule text
  local ok, out = pcall(lathe.cmd.rules, source)
  gui._note_rules(tostring(source), ok, tostring(out))
  if not ok then error(out, 2) end
  return out
end
function gui.save_rules(path, reload)
  local file, why = gui._save_rules(path)
  if not file then return false, why end
  if reload == false then return true end
  local ok, out = pcall(lathe.cmd.rules, file)
  gui._note_rules(file, ok, tostring(out))
  if not ok then return false, tostring(out) end
  return true
end
)lua";

}  // namespace lathe::app::gui_lua
#endif
