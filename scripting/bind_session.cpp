// bind_session.cpp — rewrite sessions from Lua (SPEC.md "Rewrite sessions"):
// lathe.rewrite(g, rules, {check=, max_steps=, seed=, batch=}) and the Session methods
// step, run, back, seek, #s, diff, breakpoint, graph, stats, history, why, apply (custom
// passes: a Lua function from graph to graph, recorded as a step), check (final check with
// bisection), current, disable/enable.
//
// A step is a table {index, rule, root, removed, added, kind} (removed/added: arrays of
// node ids) whose tostring is the one-liner "#12 fold-add @%41: -3 +1".
#include <memory>

#include "core/ir/diag.h"
#include "core/rewrite/session.h"
#include "scripting/engine.h"
#include "scripting/rules_lua.h"
#include "scripting/session_lua.h"

namespace lathe::script {

std::string step_line(const StepInfo& st) {
  std::string s = "#" + std::to_string(st.index) + " " + st.rule;
  if (st.root >= 0) s += " @%" + std::to_string(st.root);
  s += ": " + st.change_counts();
  if (st.kind == StepKind::Sweep) {
    s += " (";
    bool first = true;
    for (auto& [r, n] : st.fired) {
      s += (first ? "" : ", ") + r + "×" + std::to_string(n);
      first = false;
    }
    s += ")";
  }
  return s;
}

namespace {

constexpr const char* kSessionMT = "lathe.Session";
using SessionBox = std::shared_ptr<RewriteSession>;

int step_tostring(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "line");
  return 1;
}

void push_ids(lua_State* L, const std::vector<int>& ids) {
  lua_createtable(L, (int)ids.size(), 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    lua_pushinteger(L, ids[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

}  // namespace

// s:run()'s result: {steps, rewrites, stop = "fixpoint"|"breakpoint" [, rule, node]}.
void push_run_result(lua_State* L, const RunResult& r) {
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, r.steps);
  lua_setfield(L, -2, "steps");
  lua_pushinteger(L, r.rewrites);
  lua_setfield(L, -2, "rewrites");
  lua_pushstring(L, r.stop == RunResult::Stop::Fixpoint ? "fixpoint" : "breakpoint");
  lua_setfield(L, -2, "stop");
  if (r.stop == RunResult::Stop::Breakpoint) {
    lua_pushstring(L, r.breakpoint_rule.c_str());
    lua_setfield(L, -2, "rule");
    lua_pushinteger(L, r.breakpoint_node);
    lua_setfield(L, -2, "node");
  }
}

void push_step(lua_State* L, const StepInfo& st) {
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, st.index);
  lua_setfield(L, -2, "index");
  lua_pushstring(L, st.rule.c_str());
  lua_setfield(L, -2, "rule");
  lua_pushstring(L, std::string(step_kind_name(st.kind)).c_str());
  lua_setfield(L, -2, "kind");
  if (st.root >= 0) {
    lua_pushinteger(L, st.root);
    lua_setfield(L, -2, "root");
  }
  if (st.replacement >= 0) {
    lua_pushinteger(L, st.replacement);
    lua_setfield(L, -2, "replacement");
  }
  push_ids(L, st.removed);
  lua_setfield(L, -2, "removed");
  push_ids(L, st.added);
  lua_setfield(L, -2, "added");
  lua_pushinteger(L, st.rebuilt);
  lua_setfield(L, -2, "rebuilt");
  if (!st.fired.empty()) {
    lua_createtable(L, 0, (int)st.fired.size());
    for (auto& [r, n] : st.fired) {
      lua_pushinteger(L, n);
      lua_setfield(L, -2, r.c_str());
    }
    lua_setfield(L, -2, "fired");
  }
  lua_pushstring(L, step_line(st).c_str());
  lua_setfield(L, -2, "line");
  if (luaL_newmetatable(L, "lathe.Step")) {
    lua_pushcfunction(L, step_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_setmetatable(L, -2);
}

RewriteSession& check_session(lua_State* L, int idx) {
  if (auto* s = test_udata<SessionBox>(L, idx, kSessionMT)) return **s;
  raise(L, "expected a rewrite session (lathe.rewrite), got a " + type_of(L, idx));
}

void push_session(lua_State* L, std::shared_ptr<RewriteSession> s) {
  new_udata<SessionBox>(L, kSessionMT, std::move(s));
}
std::shared_ptr<RewriteSession> test_session(lua_State* L, int idx) {
  if (auto* s = test_udata<SessionBox>(L, idx, kSessionMT)) return *s;
  return nullptr;
}

namespace {

SessionOptions read_session_options(lua_State* L, int idx) {
  SessionOptions o;
  if (lua_isnoneornil(L, idx)) return o;
  if (!lua_istable(L, idx)) raise(L, "lathe.rewrite: options must be a table such as { check = true }");
  o.check = opt_field_bool(L, idx, "check", false);
  o.max_steps = (int)opt_field_number(L, idx, "max_steps", o.max_steps);
  o.seed = (uint64_t)opt_field_number(L, idx, "seed", 0);
  o.batch = opt_field_bool(L, idx, "batch", true);
  return o;
}

// lathe.rewrite(g, rules [, opts])
int l_rewrite(lua_State* L) {
  Graph& g = check_graph(L, 1);
  if (lua_isnoneornil(L, 2)) raise(L, "lathe.rewrite(g, rules [, opts]): the rules are missing");
  Ruleset rs = check_rules_arg(L, 2, "rules");
  SessionOptions o = read_session_options(L, 3);
  push_session(L, std::make_shared<RewriteSession>(g, rs, o));
  return 1;
}

int s_step(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  if (lua_isnoneornil(L, 2)) {
    auto st = s.step();
    if (!st) return 0;  // nil: nothing applies
    push_step(L, *st);
    return 1;
  }
  int64_t n = check_int(L, 2, "steps");
  if (n < 0) raise(L, "step(n): n must be >= 0");
  auto steps = s.step((int)n);
  lua_createtable(L, (int)steps.size(), 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    push_step(L, steps[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

int s_run(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  RunResult r = s.run();
  push_run_result(L, r);
  return 1;
}

int s_back(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  int64_t n = lua_isnoneornil(L, 2) ? 1 : check_int(L, 2, "steps");
  if (n < 0) raise(L, "back(n): n must be >= 0");
  if (n > s.current()) raise(L, "back(" + std::to_string(n) + "): the session is at step " + std::to_string(s.current()));
  for (int64_t i = 0; i < n; ++i) s.back();
  lua_pushinteger(L, s.current());
  return 1;
}
int s_seek(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  s.seek((int)check_int(L, 2, "step"));
  lua_pushinteger(L, s.current());
  return 1;
}
int s_current(lua_State* L) { lua_pushinteger(L, check_session(L, 1).current()); return 1; }
int s_len(lua_State* L) { lua_pushinteger(L, check_session(L, 1).last()); return 1; }
int s_graph(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  push_graph(L, lua_isnoneornil(L, 2) ? s.graph() : s.graph_at((int)check_int(L, 2, "step")));
  return 1;
}

int diff_tostring(lua_State* L) {
  lua_getfield(L, 1, "text");
  return 1;
}
int s_diff(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  int a = lua_isnoneornil(L, 2) ? std::max(0, s.current() - 1) : (int)check_int(L, 2, "step a");
  int b = lua_isnoneornil(L, 3) ? s.current() : (int)check_int(L, 3, "step b");
  for (int k : {a, b})
    if (k < 0 || k > s.last()) raise(L, "diff: step " + std::to_string(k) + " is out of range (0.." + std::to_string(s.last()) + ")");
  GraphDiff d = s.diff(a, b);
  lua_createtable(L, 0, 4);
  std::vector<int> added, removed;
  for (NodeRef n : d.added) added.push_back((int)n->id);
  for (NodeRef n : d.removed) removed.push_back((int)n->id);
  push_ids(L, added);
  lua_setfield(L, -2, "added");
  push_ids(L, removed);
  lua_setfield(L, -2, "removed");
  lua_createtable(L, (int)d.changed.size(), 0);
  for (size_t i = 0; i < d.changed.size(); ++i) {
    push_ids(L, {(int)d.changed[i].first->id, (int)d.changed[i].second->id});
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "changed");
  lua_pushstring(L, d.text().c_str());
  lua_setfield(L, -2, "text");
  if (luaL_newmetatable(L, "lathe.Diff")) {
    lua_pushcfunction(L, diff_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_setmetatable(L, -2);
  return 1;
}

int s_breakpoint(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  std::string rule = luaL_checkstring(L, 2);
  if (!lua_isnoneornil(L, 3) && !lua_toboolean(L, 3)) s.clear_breakpoint(rule);
  else s.breakpoint(rule);
  return 0;
}
int s_enable(lua_State* L) { check_session(L, 1).set_enabled(luaL_checkstring(L, 2), true); return 0; }
int s_disable(lua_State* L) { check_session(L, 1).set_enabled(luaL_checkstring(L, 2), false); return 0; }

int stats_tostring(lua_State* L) {
  lua_getfield(L, 1, "text");
  if (lua_isnil(L, -1)) lua_pushstring(L, "(no stats)");
  return 1;
}
int s_stats(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  auto table = s.stats();
  lua_createtable(L, 0, (int)table.size() + 1);
  for (auto& [name, st] : table) {
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)st.tried);
    lua_setfield(L, -2, "tried");
    lua_pushinteger(L, (lua_Integer)st.matched);
    lua_setfield(L, -2, "matched");
    lua_pushinteger(L, (lua_Integer)st.fired);
    lua_setfield(L, -2, "fired");
    lua_pushnumber(L, st.seconds);
    lua_setfield(L, -2, "time");
    lua_setfield(L, -2, name.c_str());
  }
  lua_pushstring(L, s.stats_text().c_str());
  lua_setfield(L, -2, "text");
  if (luaL_newmetatable(L, "lathe.Stats")) {
    lua_pushcfunction(L, stats_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_setmetatable(L, -2);
  return 1;
}

// Result tables that print as text (s:stats(), s:history(), s:check()): __tostring is
// their "text" field.
void set_text_tostring(lua_State* L, const std::string& text) {
  lua_pushstring(L, text.c_str());
  lua_setfield(L, -2, "text");
  if (luaL_newmetatable(L, "lathe.Stats")) {
    lua_pushcfunction(L, stats_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_setmetatable(L, -2);
}

// s:history(): the steps as an array; prints as the :history listing (> marks the current).
int s_history(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  auto h = s.history();
  lua_createtable(L, (int)h.size(), 1);
  std::string text;
  for (size_t i = 0; i < h.size(); ++i) {
    push_step(L, h[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
    text += (text.empty() ? "" : "\n") + std::string(h[i].index == s.current() ? "> " : "  ") + step_line(h[i]);
  }
  set_text_tostring(L, text.empty() ? "no steps yet" : text);
  return 1;
}

// A node argument: an id, a tensor, or a node table ({id = …}).
NodeRef node_arg(lua_State* L, int idx, const Graph& g) {
  int64_t id = -1;
  if (lua_isinteger(L, idx)) id = lua_tointeger(L, idx);
  else if (lua_type(L, idx) == LUA_TSTRING) {
    std::string s = lua_tostring(L, idx);
    if (!s.empty() && s[0] == '%') s = s.substr(1);
    char* end = nullptr;
    id = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) raise(L, "expected a node id such as 12 or \"%12\", got \"" + std::string(lua_tostring(L, idx)) + "\"");
  } else if (lua_istable(L, idx)) {
    lua_getfield(L, idx, "id");
    id = check_int(L, -1, "node id");
    lua_pop(L, 1);
  } else if (NodeRef n = to_node_or_null(L, idx)) {
    return n;
  } else {
    raise(L, "expected a node (an id, a tensor or a node table), got a " + type_of(L, idx));
  }
  for (NodeRef n : g.toposort())
    if ((int64_t)n->id == id) return n;
  raise(L, "no node %" + std::to_string(id) + " in the session's current graph");
}

int s_why(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  std::string rule = luaL_checkstring(L, 2);
  NodeRef n = node_arg(L, 3, s.graph());
  std::string why = s.why(rule, n);
  lua_pushstring(L, why.empty() ? ("rule '" + rule + "' matches " + describe_node(n)).c_str() : why.c_str());
  return 1;
}

// s:apply(name, fn): a custom pass, fn(graph) → graph, recorded as one step (nil: no change).
int s_apply(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  std::string name = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  Engine* e = Engine::from(L);
  PassFn pass = [L, e, name](const Graph& g) -> Graph {
    lua_pushvalue(L, 3);
    push_graph(L, g);
    ScriptError err;
    if (!e->call(1, 1, &err, L)) throw UserError("pass '" + name + "' failed: " + err.message);
    Graph out = g;
    if (Graph* r = test_udata<Graph>(L, -1, kGraphMT)) out = *r;
    else if (!lua_isnil(L, -1)) {
      std::string t = type_of(L, -1);
      lua_pop(L, 1);
      throw UserError("pass '" + name + "' returned a " + t + "; a pass returns a graph (or nil for no change)");
    }
    lua_pop(L, 1);
    return out;
  };
  auto st = s.apply_pass(name, pass);
  if (!st) return 0;
  push_step(L, *st);
  return 1;
}

int s_check(lua_State* L) {
  CheckReport r = check_session(L, 1).final_check();
  lua_createtable(L, 0, 4);
  lua_pushboolean(L, r.ok);
  lua_setfield(L, -2, "ok");
  if (!r.ok) {
    lua_pushinteger(L, r.bad_step);
    lua_setfield(L, -2, "step");
    lua_pushstring(L, r.rule.c_str());
    lua_setfield(L, -2, "rule");
    lua_pushstring(L, r.message.c_str());
    lua_setfield(L, -2, "message");
  }
  set_text_tostring(L, r.ok ? "check passed: the current graph computes what step 0 computes"
                            : "check FAILED at step " + std::to_string(r.bad_step) + " (rule " + r.rule + "): " + r.message);
  return 1;
}

int s_tostring(lua_State* L) {
  RewriteSession& s = check_session(L, 1);
  std::string t = "rewrite session at step " + std::to_string(s.current()) + " of " + std::to_string(s.last()) + ", " +
                  std::to_string(s.graph().size()) + (s.graph().size() == 1 ? " node" : " nodes");
  lua_pushstring(L, t.c_str());
  return 1;
}

const Function kModule[] = {
    {"rewrite", l_rewrite, "lathe.rewrite(g, rules [, {check=false, max_steps=100000, seed=0, batch=true}])", "a rewrite session over g"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kMethods[] = {
    {"step", s_step, "s:step([n])", "one rewrite (a step, or nil at a fixpoint); with n: up to n, as an array"},
    {"run", s_run, "s:run()", "rewrite to a fixpoint (stops at breakpoints; errors if it cycles)"},
    {"back", s_back, "s:back([n=1])", "go back n steps"},
    {"seek", s_seek, "s:seek(k)", "go to step k (0 = the original graph)"},
    {"current", s_current, "s:current()", "the step shown"},
    {"graph", s_graph, "s:graph([k])", "the graph at the current step (or step k)"},
    {"diff", s_diff, "s:diff([a [, b]])", "nodes added / removed / changed between steps a and b"},
    {"breakpoint", s_breakpoint, "s:breakpoint(rule [, on=true])", "run() stops before this rule fires"},
    {"enable", s_enable, "s:enable(rule)", "re-enable a rule"},
    {"disable", s_disable, "s:disable(rule)", "never fire this rule"},
    {"stats", s_stats, "s:stats()", "per rule: tried, matched, fired, time"},
    {"history", s_history, "s:history()", "the steps so far, an array of steps (prints as the :history listing)"},
    {"why", s_why, "s:why(rule, node)", "why a rule does not rewrite a node"},
    {"apply", s_apply, "s:apply(name, function(g) … return g2 end)", "a custom pass recorded as a step"},
    {"check", s_check, "s:check()", "compare step 0 with the current step; bisect to the first bad step"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_session(lua_State* L, int module) {
  new_type<SessionBox>(L, kSessionMT);
  int mt = lua_gettop(L);
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kMethods, "Session:");
  lua_setfield(L, mt, "__index");
  push_guarded(L, s_len);
  lua_setfield(L, mt, "__len");
  push_guarded(L, s_tostring);
  lua_setfield(L, mt, "__tostring");
  lua_pop(L, 1);
  register_functions(L, module, kModule, "lathe.");
}

}  // namespace lathe::script
