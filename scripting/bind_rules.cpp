// bind_rules.cpp — the rule DSL (SPEC.md "Rules"): lathe.rule, lathe.ruleset,
// lathe.rules.load, lathe.rules.builtin, lathe.rules.list, and Lua functions as rule
// replacements and `where` predicates.
//
// A Lua replacement gets the match table `m`: m.x is the node bound to x (a lathe.Tensor),
// m.a the value bound by Const(a) (a number), m.dtype / m.shape the root's, m.root the
// matched node. It returns a tensor, a number (a constant shaped like the root) or nil
// (no rewrite). A rank-0 or broadcastable result is broadcast to the root's shape; a
// different dtype, or a shape that cannot broadcast, is an error naming the rule.
#include "scripting/rules_lua.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "core/frontend/tensor.h"
#include "core/ir/diag.h"
#include "core/rewrite/qdq_rules.h"
#include "scripting/engine.h"

namespace lathe::script {

namespace {

constexpr const char* kRuleMT = "lathe.Rule";

// A reference to a Lua function held by C++ (a rule callback).
struct LuaFn {
  lua_State* L;
  int ref;
  std::weak_ptr<void> alive;
  LuaFn(lua_State* L_, int idx) : L(L_) {
    lua_pushvalue(L, idx);
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
    alive = Engine::from(L)->alive_token();
  }
  ~LuaFn() {
    if (!alive.expired()) luaL_unref(L, LUA_REGISTRYINDEX, ref);
  }
  LuaFn(const LuaFn&) = delete;
  LuaFn& operator=(const LuaFn&) = delete;
};

void push_match(lua_State* T, const Match& m) {
  lua_createtable(T, 0, (int)m.names().size() + 3);
  for (size_t i = 0; i < m.names().size(); ++i) {
    if (i < m.has_value.size() && m.has_value[i]) {
      double v = m.values[i];
      DType dt = m.nodes[i] ? m.nodes[i]->dtype : DType::F32;
      if (!is_float(dt) && v == (double)(int64_t)v) lua_pushinteger(T, (lua_Integer)v);
      else lua_pushnumber(T, v);
    } else if (m.nodes[i]) {
      push_node(T, m.nodes[i]);
    } else {
      continue;
    }
    lua_setfield(T, -2, m.names()[i].c_str());
  }
  push_dtype(T, m.dtype());
  lua_setfield(T, -2, "dtype");
  push_shape(T, m.shape());
  lua_setfield(T, -2, "shape");
  push_node(T, m.root);
  lua_setfield(T, -2, "root");
}

// Calls fn(m) with one result left on the stack of the returned thread; throws UserError.
lua_State* call_with_match(const LuaFn& fn, const Match& m, const std::string& rule, const char* what) {
  if (fn.alive.expired()) throw UserError("rule '" + rule + "': its Lua state is gone");
  Engine* e = Engine::from(fn.L);
  lua_State* T = Engine::active_thread();
  if (!T || Engine::from(T) != e) T = fn.L;
  lua_rawgeti(T, LUA_REGISTRYINDEX, fn.ref);
  push_match(T, m);
  ScriptError err;
  if (!e->call(1, 1, &err, T)) throw UserError(std::string(what) + " of rule '" + rule + "' failed: " + err.message);
  return T;
}

NodeRef to_replacement(lua_State* T, const Match& m, const std::string& rule) {
  NodeRef root = m.root;
  NodeRef r = nullptr;
  if (lua_isnil(T, -1)) return nullptr;
  if (lua_type(T, -1) == LUA_TNUMBER) {
    Scalar s = lua_isinteger(T, -1) ? Scalar((int64_t)lua_tointeger(T, -1)) : Scalar((double)lua_tonumber(T, -1));
    return full(root->shape, s, root->dtype).node();
  }
  r = to_node_or_null(T, -1);
  if (!r)
    throw UserError("rule '" + rule + "' returned a " + type_of(T, -1) + "; a replacement function returns a tensor, a number or nil");
  if (r->dtype != root->dtype)
    throw UserError("rule '" + rule + "' returned " + std::string(dtype_name(r->dtype)) + shape_to_string(r->shape) +
                    " but the matched node " + describe_node(root) + " is " + std::string(dtype_name(root->dtype)) +
                    "; a rewrite must keep the dtype (cast with :to(m.dtype))");
  if (r->shape != root->shape) {
    try {
      r = broadcast_to(Tensor(r), root->shape).node();
    } catch (const UserError&) {
      throw UserError("rule '" + rule + "' returned shape " + shape_to_string(r->shape) + " but the matched node " +
                      describe_node(root) + " has shape " + shape_to_string(root->shape) + "; a rewrite must keep the shape");
    }
  }
  return r;
}

Rule& check_rule(lua_State* L, int idx) {
  if (auto* r = test_udata<Rule>(L, idx, kRuleMT)) return *r;
  raise(L, "expected a rule (lathe.rule), got a " + type_of(L, idx));
}

// lathe.rule(name, pattern, replacement [, {where=fn, benefit=n}])
int l_rule(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  std::string pattern = luaL_checkstring(L, 2);
  RuleOptions opts;
  if (!lua_isnoneornil(L, 4)) {
    if (!lua_istable(L, 4)) raise(L, "lathe.rule: the 4th argument is an options table { where = function(m) … end }");
    opts.benefit = (int)opt_field_number(L, 4, "benefit", 1);
    lua_getfield(L, 4, "where");
    if (lua_isfunction(L, -1)) {
      auto fn = std::make_shared<LuaFn>(L, -1);
      opts.where = [fn, name](const Match& m) {
        lua_State* T = call_with_match(*fn, m, name, "the where-condition");
        bool ok = lua_toboolean(T, -1);
        lua_pop(T, 1);
        return ok;
      };
    } else if (!lua_isnil(L, -1)) {
      raise(L, "lathe.rule: `where` must be a function(m) returning true or false");
    }
    lua_pop(L, 1);
  }
  if (lua_type(L, 3) == LUA_TSTRING) {
    new_udata<Rule>(L, kRuleMT, make_rule(name, pattern, std::string_view(lua_tostring(L, 3)), std::move(opts)));
  } else if (lua_isfunction(L, 3)) {
    auto fn = std::make_shared<LuaFn>(L, 3);
    ReplaceFn cb = [fn, name](const Match& m) -> NodeRef {
      lua_State* T = call_with_match(*fn, m, name, "the replacement");
      NodeRef r = nullptr;
      try {
        r = to_replacement(T, m, name);
      } catch (...) {
        lua_pop(T, 1);
        throw;
      }
      lua_pop(T, 1);
      return r;
    };
    new_udata<Rule>(L, kRuleMT, make_rule(name, pattern, std::move(cb), std::move(opts)));
  } else {
    raise(L, "lathe.rule(\"" + name + "\", …): the replacement must be a pattern string or a function(m), got a " +
                 type_of(L, 3));
  }
  return 1;
}

int rule_index(lua_State* L) {
  Rule& r = check_rule(L, 1);
  std::string key = luaL_checkstring(L, 2);
  if (key == "name") lua_pushstring(L, r.name.c_str());
  else if (key == "pattern") lua_pushstring(L, r.pattern.source.c_str());
  else if (key == "replacement") lua_pushstring(L, r.replacement_text().c_str());
  else if (key == "benefit") lua_pushinteger(L, r.benefit);
  else lua_pushnil(L);
  return 1;
}
int rule_tostring(lua_State* L) {
  Rule& r = check_rule(L, 1);
  lua_pushstring(L, ("rule " + r.name + ": " + r.pattern.source + " -> " + r.replacement_text()).c_str());
  return 1;
}

// Appends the rules of the value at idx (a rule, a ruleset or an array of them).
void collect_rules(lua_State* L, int idx, Ruleset& into, int depth = 0) {
  idx = lua_absindex(L, idx);
  if (depth > 8) raise(L, "rules nested too deeply");
  if (auto* r = test_udata<Rule>(L, idx, kRuleMT)) { into.add(*r); return; }
  if (auto* rs = test_udata<Ruleset>(L, idx, kRulesetMT)) {
    for (auto& r : rs->rules()) into.add(*r);
    return;
  }
  if (!lua_istable(L, idx)) raise(L, "expected a rule, a ruleset or a table of rules, got a " + type_of(L, idx));
  lua_Integer n = luaL_len(L, idx);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, idx, i);
    if (lua_isnil(L, -1)) raise(L, "rule list entry " + std::to_string(i) + " is nil (a typo in a variable name?)");
    if (!lua_istable(L, -1) && !test_udata<Rule>(L, -1, kRuleMT) && !test_udata<Ruleset>(L, -1, kRulesetMT))
      raise(L, "rule list entry " + std::to_string(i) + " is a " + type_of(L, -1) + ", not a rule (lathe.rule) or a ruleset");
    collect_rules(L, -1, into, depth + 1);
    lua_pop(L, 1);
  }
}

// (value, Ruleset*): collect_rules(value) into the ruleset (load_rules_file's protected call)
int collect_into(lua_State* L) {
  collect_rules(L, 1, *static_cast<Ruleset*>(lua_touserdata(L, 2)));
  return 0;
}

// lathe.ruleset(name, {rules…})
int l_ruleset(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  if (!lua_istable(L, 2)) raise(L, "lathe.ruleset(\"" + name + "\", { lathe.rule(…), … }): the rules table is missing");
  Ruleset rs(name);
  collect_rules(L, 2, rs);
  new_udata<Ruleset>(L, kRulesetMT, std::move(rs));
  return 1;
}

Ruleset& check_ruleset_ud(lua_State* L, int idx) {
  if (auto* r = test_udata<Ruleset>(L, idx, kRulesetMT)) return *r;
  raise(L, "expected a ruleset (lathe.ruleset), got a " + type_of(L, idx));
}
int rs_len(lua_State* L) { lua_pushinteger(L, (lua_Integer)check_ruleset_ud(L, 1).size()); return 1; }
int rs_tostring(lua_State* L) {
  Ruleset& rs = check_ruleset_ud(L, 1);
  std::string s = "ruleset " + rs.name() + " (" + std::to_string(rs.size()) + " rules)";
  for (auto& r : rs.rules())
    s += "\n  " + r->name + ": " + r->pattern.source + " -> " + r->replacement_text() + (rs.enabled(r->name) ? "" : "  [disabled]");
  lua_pushstring(L, s.c_str());
  return 1;
}
int rs_names(lua_State* L) {
  Ruleset& rs = check_ruleset_ud(L, 1);
  lua_createtable(L, (int)rs.size(), 0);
  int i = 0;
  for (auto& r : rs.rules()) {
    lua_pushstring(L, r->name.c_str());
    lua_rawseti(L, -2, ++i);
  }
  return 1;
}
int rs_enable(lua_State* L) { check_ruleset_ud(L, 1).set_enabled(luaL_checkstring(L, 2), opt_field_bool(L, 3, "on", true)); return 0; }
int rs_disable(lua_State* L) { check_ruleset_ud(L, 1).set_enabled(luaL_checkstring(L, 2), false); return 0; }
int rs_index(lua_State* L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  Ruleset& rs = check_ruleset_ud(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && std::string(lua_tostring(L, 2)) == "name") {
    lua_pushstring(L, rs.name().c_str());
    return 1;
  }
  if (lua_isinteger(L, 2)) {
    lua_Integer i = lua_tointeger(L, 2);
    if (i >= 1 && i <= (lua_Integer)rs.size()) {
      new_udata<Rule>(L, kRuleMT, *rs.rules()[i - 1]);
      return 1;
    }
  }
  return 0;
}

int l_rules_load(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  push_ruleset(L, load_rules_file(L, path));
  return 1;
}
int l_rules_builtin(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  std::string path = builtin_rules_path(name);
  push_ruleset(L, load_rules_file(L, path));
  return 1;
}
// Rule sets whose callbacks are C++ (assets/rules/NAME.lua returns lathe.rules.native(NAME)).
int l_rules_native(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  if (name != "qdq" && name != "qdq-sat16")
    return luaL_error(L, "lathe.rules.native: no C++ rule set '%s' (known: qdq, qdq-sat16)", name.c_str());
  push_ruleset(L, name == "qdq" ? qdq_rules() : qdq_sat16_rules());
  return 1;
}
int l_rules_list(lua_State* L) {
  auto names = builtin_rule_names();
  lua_createtable(L, (int)names.size(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushstring(L, names[i].c_str());
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

const Function kModule[] = {
    {"rule", l_rule, "lathe.rule(name, pattern, replacement [, {where=fn, benefit=1}])", "a rewrite rule; replacement is a pattern string or function(m) returning a tensor or nil"},
    {"ruleset", l_ruleset, "lathe.ruleset(name, {rules…})", "a named, ordered rule set (entries may be rules or rulesets)"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kRulesFns[] = {
    {"load", l_rules_load, "lathe.rules.load(path)", "run a rule file (it returns a ruleset or a table of rules)"},
    {"builtin", l_rules_builtin, "lathe.rules.builtin(name)", "a built-in rule set from assets/rules/NAME.lua"},
    {"native", l_rules_native, "lathe.rules.native(name)", "a rule set written in C++: \"qdq\", \"qdq-sat16\" (core/rewrite/qdq_rules.h)"},
    {"list", l_rules_list, "lathe.rules.list()", "names of the built-in rule sets"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kRulesetMethods[] = {
    {"names", rs_names, "rs:names()", "rule names in order"},
    {"enable", rs_enable, "rs:enable(name)", "re-enable a rule"},
    {"disable", rs_disable, "rs:disable(name)", "keep a rule listed but never fire it"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void push_ruleset(lua_State* L, Ruleset rs) { new_udata<Ruleset>(L, kRulesetMT, std::move(rs)); }

Ruleset* test_ruleset(lua_State* L, int idx) { return test_udata<Ruleset>(L, idx, kRulesetMT); }

Ruleset check_rules_arg(lua_State* L, int idx, const std::string& name) {
  if (auto* rs = test_ruleset(L, idx)) return *rs;
  Ruleset out(name);
  collect_rules(L, idx, out);
  return out;
}

std::string assets_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("LATHE_ASSETS"); env && *env) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path cand : {exe.parent_path() / "assets", exe.parent_path().parent_path() / "assets",
                          exe.parent_path().parent_path() / "share" / "lathe" / "assets"})
      if (fs::is_directory(cand / "rules", ec)) return cand.string();
  }
#ifdef LATHE_SOURCE_ASSETS
  return LATHE_SOURCE_ASSETS;
#else
  return "assets";
#endif
}

std::vector<std::string> builtin_rule_names() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(fs::path(assets_dir()) / "rules", ec))
    if (e.path().extension() == ".lua") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string builtin_rules_path(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(assets_dir()) / "rules" / (name + ".lua");
  std::error_code ec;
  if (name.find('/') != std::string::npos || !fs::exists(p, ec)) {
    std::string known;
    for (auto& n : builtin_rule_names()) known += (known.empty() ? "" : ", ") + n;
    throw UserError("no built-in rule set '" + name + "' (known: " + (known.empty() ? "none found in " + assets_dir() + "/rules" : known) + ")");
  }
  return p.string();
}

Ruleset load_rules_file(lua_State* L, const std::string& path) {
  Engine* e = Engine::from(L);
  ScriptError err;
  lua_State* T = Engine::active_thread();
  if (!T || Engine::from(T) != e) T = L;
  int top = lua_gettop(T);
  std::string code;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw UserError("cannot open rule file " + path + ": " + std::strerror(errno));
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) code.append(buf, n);
    std::fclose(f);
  }
  if (code.rfind("#", 0) == 0) code.insert(0, "--");
  int st = luaL_loadbufferx(T, code.data(), code.size(), ("@" + path).c_str(), "t");
  if (st != LUA_OK) {
    std::string msg = lua_tostring(T, -1) ? lua_tostring(T, -1) : "syntax error";
    lua_settop(T, top);
    throw UserError(msg);
  }
  if (!e->call(0, 1, &err, T)) throw UserError(err.message);
  std::string stem = std::filesystem::path(path).stem().string();
  if (lua_isnil(T, -1)) {
    lua_settop(T, top);
    throw UserError(path + ": a rule file must return a ruleset (end it with `return lathe.ruleset(\"" + stem + "\", { … })`)");
  }
  Ruleset rs;
  if (Ruleset* r = test_ruleset(T, -1)) {
    rs = *r;
  } else {
    // Anything but a ruleset, a rule or a table of them is the file's mistake: say so
    // without raising (this may run outside any protected Lua call, as in `lathe rewrite`).
    bool rule_like = lua_istable(T, -1) || test_udata<Rule>(T, -1, kRuleMT);
    if (!rule_like) {
      std::string got = type_of(T, -1);
      if (lua_type(T, -1) == LUA_TNUMBER) got += " (" + std::string(lua_tostring(T, -1)) + ")";
      else if (lua_type(T, -1) == LUA_TSTRING)
        got += " (\"" + std::string(lua_tostring(T, -1)) + "\"; a built-in set is `return lathe.rules.builtin(\"" +
               std::string(lua_tostring(T, -1)) + "\")`)";
      lua_settop(T, top);
      throw UserError(path + ": a rule file must return a ruleset, a rule or a table of rules (`return lathe.ruleset(\"" +
                      stem + "\", { … })`), got a " + got);
    }
    rs = Ruleset(stem);
    // a table's entries are checked by collect_rules, under a protected call
    push_guarded(T, collect_into);
    lua_pushvalue(T, -2);
    lua_pushlightuserdata(T, &rs);
    if (lua_pcall(T, 2, 0, 0) != LUA_OK) {
      std::string msg = lua_tostring(T, -1) ? lua_tostring(T, -1) : "bad rule list";
      lua_settop(T, top);
      throw UserError(path + ": the returned table is not a list of rules: " + msg);
    }
  }
  lua_settop(T, top);
  return rs;
}

void bind_rules(lua_State* L, int module) {
  new_type<Rule>(L, kRuleMT);
  push_guarded(L, rule_index);
  lua_setfield(L, -2, "__index");
  push_guarded(L, rule_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);

  new_type<Ruleset>(L, kRulesetMT);
  int mt = lua_gettop(L);
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kRulesetMethods, "Ruleset:");
  push_guarded(L, rs_index, nullptr, 1);
  lua_setfield(L, mt, "__index");
  push_guarded(L, rs_len);
  lua_setfield(L, mt, "__len");
  push_guarded(L, rs_tostring);
  lua_setfield(L, mt, "__tostring");
  lua_pop(L, 1);

  register_functions(L, module, kModule, "lathe.");
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kRulesFns, "lathe.rules.");
  lua_setfield(L, module, "rules");
}

}  // namespace lathe::script
