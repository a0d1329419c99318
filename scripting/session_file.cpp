// session_file.cpp — saving and replaying `.lathe-session` files (format in session_file.h
// and SPEC.md): the native halves of :save FILE.lathe-session and :open, installed as
// lathe.cmd._note_rules / _session_save / _session_open. The Lua halves (commands_lua.cpp)
// keep lathe.cmd.state up to date (breakpoints, last compile, last profile).
#include "scripting/session_file.h"

#include <lua.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/ir/diag.h"
#include "core/ir/node.h"
#include "core/ir/text.h"
#include "scripting/binding.h"
#include "scripting/engine.h"
#include "scripting/progress.h"
#include "scripting/rules_lua.h"
#include "scripting/session_lua.h"

namespace lathe::script {

using json = nlohmann::json;
namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& text) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(getpid()))).string();
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw UserError("cannot write " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  int saved_errno = errno;
  ok = std::fclose(f) == 0 && ok;
  if (ok && std::rename(tmp.c_str(), path.c_str()) == 0) return;
  if (!ok) errno = saved_errno;
  std::string why = std::strerror(errno);
  std::remove(tmp.c_str());
  throw UserError("cannot write " + path + ": " + why + " (the previous file, if any, is unchanged)");
}

namespace {

std::string read_text(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(std::string("cannot open ") + what + " " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Pushes lathe.cmd.state (creating it when missing); returns its absolute index.
int push_state(lua_State* L) {
  lua_getglobal(L, "lathe");
  if (!lua_istable(L, -1)) raise(L, "the global `lathe` was replaced; restart the REPL");
  lua_getfield(L, -1, "cmd");
  if (!lua_istable(L, -1)) raise(L, "lathe.cmd was replaced; restart the REPL");
  if (lua_getfield(L, -1, "state") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "state");
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
  return lua_gettop(L);
}

std::string field_string(lua_State* L, int t, const char* k) {
  lua_getfield(L, t, k);
  std::string s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  return s;
}

// lathe.cmd._note_rules(path_or_builtin, is_builtin, s)
int l_note_rules(lua_State* L) {
  std::string arg = luaL_checkstring(L, 1);
  bool builtin = lua_toboolean(L, 2);
  std::string path = builtin ? builtin_rules_path(arg) : fs::absolute(arg).lexically_normal().string();
  std::string text = read_text(path, "rule file");
  int st = push_state(L);
  lua_createtable(L, 0, 4);
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "path");
  lua_pushstring(L, text.c_str());
  lua_setfield(L, -2, "text");
  if (builtin) {
    lua_pushstring(L, arg.c_str());
    lua_setfield(L, -2, "builtin");
  }
  lua_setfield(L, st, "rules");
  lua_pushvalue(L, 3);
  lua_setfield(L, st, "rules_session");
  lua_newtable(L);
  lua_setfield(L, st, "breakpoints");
  return 0;
}

// lathe.cmd._session_save(path) -> a one-line summary
int l_session_save(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  int st = push_state(L);
  json j;
  j["format"] = "lathe-session";
  j["version"] = 1;
  lua_getglobal(L, "s");
  std::shared_ptr<RewriteSession> ss = test_session(L, -1);
  if (!ss && !lua_isnil(L, -1)) raise(L, "the global s is a " + type_of(L, -1) + ", not a rewrite session");
  lua_getfield(L, st, "rules_session");
  bool ours = ss && lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  std::string summary;
  if (ss) {
    if (!ours)
      raise(L, "the session s was not started with :rules, so the source of its rules is unknown; "
               "start it with :rules FILE (or write just the graph: :save FILE.lathe)");
    j["graph"] = print_graph(ss->graph_at(0));
    j["node_ids"] = json::array();
    for (NodeRef n : ss->graph_at(0).toposort()) j["node_ids"].push_back(n->id);
    j["current_graph"] = print_graph(ss->graph());
    lua_getfield(L, st, "rules");
    int rt = lua_gettop(L);
    json r;
    r["path"] = field_string(L, rt, "path");
    r["text"] = field_string(L, rt, "text");
    std::string b = field_string(L, rt, "builtin");
    r["builtin"] = b.empty() ? json(nullptr) : json(b);
    lua_pop(L, 1);
    r["name"] = ss->rulesets().empty() ? "" : ss->rulesets()[0].name();
    j["rules"] = r;
    const SessionOptions& o = ss->options();
    json steps = json::array();
    for (const StepInfo& info : ss->history())
      steps.push_back({{"index", info.index}, {"kind", std::string(step_kind_name(info.kind))}, {"rule", info.rule},
                       {"root", info.root}, {"line", step_line(info)}});
    json bps = json::array();
    for (const std::string& b2 : ss->breakpoints()) bps.push_back(b2);
    j["session"] = {{"step", ss->current()}, {"steps", steps},   {"check", o.check},   {"seed", o.seed},
                    {"max_steps", o.max_steps}, {"batch", o.batch}, {"breakpoints", bps}};
    j["seeds"] = {{"check", o.seed}, {"inputs", 0}};
    summary = "wrote " + path + " (graph, rules " + fs::path(r["path"].get<std::string>()).filename().string() + ", step " +
              std::to_string(ss->current()) + " of " + std::to_string(ss->last()) + ")";
  } else {
    lua_getglobal(L, "g");
    if (lua_isnil(L, -1)) raise(L, "nothing to save: no graph loaded (use :load FILE)");
    j["graph"] = print_graph(check_graph(L, -1));
    j["node_ids"] = json::array();
    for (NodeRef n : check_graph(L, -1).toposort()) j["node_ids"].push_back(n->id);
    lua_pop(L, 1);
    j["rules"] = nullptr;
    j["session"] = nullptr;
    j["seeds"] = {{"inputs", 0}};
    summary = "wrote " + path + " (graph only: no rewrite session)";
  }
  j["graph_source"] = field_string(L, st, "graph_path");
  std::string backend = field_string(L, st, "backend");
  j["backend"] = backend.empty() ? json(nullptr) : json(backend);
  lua_getfield(L, st, "compiled_step");
  j["compiled_step"] = lua_isinteger(L, -1) ? json(lua_tointeger(L, -1)) : json(nullptr);
  lua_pop(L, 1);
  j["options"] = {{"profile_iters", 20}};
  if (lua_getfield(L, st, "profile") == LUA_TTABLE) {
    int pt = lua_gettop(L);
    lua_getfield(L, pt, "iters");
    lua_getfield(L, pt, "total_ms");
    j["profile"] = {{"iters", lua_tointeger(L, -2)}, {"total_ms", lua_tonumber(L, -1)}, {"text", field_string(L, pt, "text")}};
    j["options"]["profile_iters"] = lua_tointeger(L, -2);
    lua_pop(L, 2);
  } else {
    j["profile"] = nullptr;
  }
  lua_pop(L, 1);
  write_file_atomic(path, j.dump(2) + "\n");
  lua_pushstring(L, summary.c_str());
  return 1;
}

// Node ids are creation counters of the process, and step lines and :why use them. To
// show the same ids after opening, the graph's lines are parsed in the order of their
// saved ids, with throwaway nodes (splat constants over a unique symbolic dim) created in
// the gaps. This works when the process has not yet used those ids (a fresh process);
// otherwise, or when anything does not line up, the text is parsed as it is.
Graph parse_keeping_ids(const std::string& text, const json& ids, const std::string& filename) {
  static int pad_counter = 0;
  auto pad_line = [&](int local) {
    return "  %" + std::to_string(local) + " = Const {value=0} : f32[lathepad" + std::to_string(getpid()) + "x" +
           std::to_string(pad_counter++) + "]";
  };
  if (!ids.is_array()) return parse_graph(text, filename);
  // statements: "in %K …" and "%K = …", in print order (the saved ids follow that order)
  std::vector<std::string> head, stmts, tail;
  std::istringstream in(text);
  bool in_body = false;
  for (std::string line; std::getline(in, line);) {
    size_t b = line.find_first_not_of(" \t");
    std::string t = b == std::string::npos ? "" : line.substr(b);
    if (!in_body) { head.push_back(line); in_body = t.rfind("graph", 0) == 0; continue; }
    if (t.rfind("in %", 0) == 0 || (!t.empty() && t[0] == '%')) stmts.push_back(line);
    else tail.push_back(line);
  }
  if (stmts.size() != ids.size()) return parse_graph(text, filename);
  std::vector<std::pair<int64_t, size_t>> order;  // (saved id, statement index)
  for (size_t i = 0; i < stmts.size(); ++i) {
    if (!ids[i].is_number_integer()) return parse_graph(text, filename);
    order.push_back({ids[i].get<int64_t>(), i});
  }
  std::sort(order.begin(), order.end());
  // Inputs must keep their relative order (it is the graph's input order).
  size_t last_input = 0;
  bool first = true;
  for (auto& [id, i] : order)
    if (stmts[i].find("in %") != std::string::npos && stmts[i].find("in %") < 4) {
      if (!first && i < last_input) return parse_graph(text, filename);
      last_input = i;
      first = false;
    }
  // Where is the id counter now? Ids are dense, so: the first unknown id.
  auto exists = [](int64_t k) { return node_by_id((uint32_t)k) != nullptr; };
  int64_t next = 0;
  if (exists(0)) {
    int64_t lo = 0, hi = 1;  // exists(lo), !exists(hi) after the gallop
    while (exists(hi)) { lo = hi; hi *= 2; }
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      (exists(mid) ? lo : hi) = mid;
    }
    next = hi;
  }
  if (order.empty() || next > order.front().first) return parse_graph(text, filename);
  std::string out;
  for (auto& h : head) out += h + "\n";
  int local = 1 << 30;  // pad ids that cannot clash with the file's
  for (auto& [id, i] : order) {
    for (; next < id; ++next) out += pad_line(local++) + "\n";
    out += stmts[i] + "\n";
    ++next;
  }
  for (auto& t : tail) out += t + "\n";
  try {
    return parse_graph(out, filename);
  } catch (const UserError&) {
    return parse_graph(text, filename);
  }
}

// Runs rule-file text as the file would run (chunk "@path") and returns its ruleset.
Ruleset rules_from_text(lua_State* L, const std::string& text, const std::string& path) {
  std::string code = text;
  if (code.rfind("#", 0) == 0) code.insert(0, "--");
  int top = lua_gettop(L);
  if (luaL_loadbufferx(L, code.data(), code.size(), ("@" + path).c_str(), "t") != LUA_OK) {
    std::string msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "syntax error";
    lua_settop(L, top);
    throw UserError("the session's rules: " + msg);
  }
  ScriptError err;
  if (!Engine::from(L)->call(0, 1, &err, L)) throw UserError("the session's rules: " + err.message);
  if (lua_isnil(L, -1)) {
    lua_settop(L, top);
    throw UserError("the session's rules (" + path + ") do not return a ruleset");
  }
  Ruleset rs = check_rules_arg(L, lua_gettop(L), fs::path(path).stem().string());
  lua_settop(L, top);
  return rs;
}

// Replays the saved steps on ss; returns a note when the replay stopped early ("" if not).
std::string replay(RewriteSession& ss, const json& steps) {
  int n = (int)steps.size();
  Progress bar("replaying", n);
  auto same = [&](int i, const json& rec) {
    const StepInfo& in = ss.info(i);
    return std::string(step_kind_name(in.kind)) == rec.value("kind", "") && in.rule == rec.value("rule", "");
  };
  for (int i = 1; i <= n; ++i) {
    const json& rec = steps[i - 1];
    std::string want = rec.value("line", rec.value("rule", "?"));
    if (ss.last() >= i && same(i, rec)) { bar.update(i); continue; }
    if (interrupted()) return "interrupted while replaying: stopped at step " + std::to_string(i - 1);
    if (ss.current() != i - 1) ss.seek(i - 1);
    std::string kind = rec.value("kind", "");
    std::string why;
    try {
      if (kind == "rule") ss.step();
      else if (kind == "sweep") ss.run();
      else why = "it was a " + kind + " step (s:apply), which a session file cannot replay";
    } catch (const UserError& e) {
      if (ss.last() < i) why = exception_text(e);
    }
    if (why.empty() && ss.last() < i) why = "no rule applies any more";
    if (why.empty() && !same(i, rec)) why = "replaying gave " + step_line(ss.info(i));
    if (!why.empty()) {
      if (ss.last() >= i) ss.seek(i - 1);
      return "replay stopped before step " + std::to_string(i) + " (saved: " + want + "): " + why;
    }
    bar.update(i);
  }
  return "";
}

// lathe.cmd._session_open(path) -> {summary=, backend=, compiled_step=}
int l_session_open(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  std::string text = read_text(path, "session file");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw UserError(path + ": not a session file (bad JSON: " + e.what() + ")");
  }
  if (!j.is_object() || j.value("format", "") != "lathe-session" || !j.contains("graph"))
    throw UserError(path + ": not a session file (expected a JSON object with \"format\": \"lathe-session\")");
  std::vector<std::string> lines;
  std::shared_ptr<RewriteSession> ss;
  std::optional<Ruleset> rs;
  json saved_rules;
  try {
    Graph g0 = parse_keeping_ids(j["graph"].get<std::string>(), j.value("node_ids", json()), path + " (graph)");
    lines.push_back("opened " + path + ": graph with " + std::to_string(g0.size()) + (g0.size() == 1 ? " node" : " nodes"));
    if (j.contains("rules") && j["rules"].is_object() && j.contains("session") && j["session"].is_object()) {
      saved_rules = j["rules"];
      const json& sj = j["session"];
      rs = rules_from_text(L, saved_rules.value("text", ""), saved_rules.value("path", "rules.lua"));
      SessionOptions o;
      o.check = sj.value("check", false);
      o.seed = sj.value("seed", uint64_t(0));
      o.max_steps = sj.value("max_steps", 100000);
      o.batch = sj.value("batch", true);
      ss = std::make_shared<RewriteSession>(g0, *rs, o);
      std::string note = replay(*ss, sj.value("steps", json::array()));
      int want = sj.value("step", 0);
      if (note.empty()) {
        if (want < 0 || want > ss->last())  // a hand-edited or damaged file: say so, never clamp silently
          note = "the file asks for step " + std::to_string(want) + " but records " + std::to_string(ss->last()) + " step" +
                 (ss->last() == 1 ? "" : "s") + "; opened at step " + std::to_string(std::clamp(want, 0, ss->last()));
        ss->seek(std::clamp(want, 0, ss->last()));
      }
      for (const auto& b : sj.value("breakpoints", json::array())) {
        try { ss->breakpoint(b.get<std::string>()); } catch (const UserError&) {}
      }
      lines.push_back("ruleset " + rs->name() + " (" + fs::path(saved_rules.value("path", "")).filename().string() + "): replayed " +
                      std::to_string(ss->last()) + " step" + (ss->last() == 1 ? "" : "s") + ", at step " +
                      std::to_string(ss->current()) + " of " + std::to_string(ss->last()));
      if (!note.empty()) lines.push_back("note: " + note);
      else if (j.contains("current_graph") && j["current_graph"].is_string() &&
               print_graph(ss->graph()) != j["current_graph"].get<std::string>())
        lines.push_back("note: the replayed graph differs from the saved one (the rules or Lathe changed?)");
    }
    // All parts built: now replace the state (nothing above touched it).
    push_graph(L, g0);
    lua_setglobal(L, "g");
  } catch (const json::exception& e) {
    throw UserError(path + ": malformed session file: " + e.what());
  }
  if (ss) push_session(L, ss);
  else lua_pushnil(L);
  lua_setglobal(L, "s");
  if (rs) push_ruleset(L, *rs);
  else lua_pushnil(L);
  lua_setglobal(L, "rules");
  lua_pushnil(L);
  lua_setglobal(L, "p");
  // a fresh lathe.cmd.state describing what was opened
  lua_getglobal(L, "lathe");
  lua_getfield(L, -1, "cmd");
  lua_newtable(L);
  int nst = lua_gettop(L);
  lua_pushstring(L, j.value("graph_source", "").c_str());
  lua_setfield(L, nst, "graph_path");
  if (ss) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, saved_rules.value("path", "").c_str());
    lua_setfield(L, -2, "path");
    lua_pushstring(L, saved_rules.value("text", "").c_str());
    lua_setfield(L, -2, "text");
    if (saved_rules.contains("builtin") && saved_rules["builtin"].is_string()) {
      lua_pushstring(L, saved_rules["builtin"].get<std::string>().c_str());
      lua_setfield(L, -2, "builtin");
    }
    lua_setfield(L, nst, "rules");
    lua_getglobal(L, "s");
    lua_setfield(L, nst, "rules_session");
  }
  // a profile measured the program compiled at compiled_step; cmd.open compiles the
  // current step's, so a profile of another step's program is not brought back
  int compiled_step = j.contains("compiled_step") && j["compiled_step"].is_number_integer() ? j["compiled_step"].get<int>() : -1;
  bool other_step = ss && compiled_step >= 0 && compiled_step != ss->current();
  if (other_step && j.contains("profile") && j["profile"].is_object())
    lines.push_back("note: the saved profile measured step " + std::to_string(compiled_step) + "'s program: not restored");
  if (!other_step && j.contains("profile") && j["profile"].is_object()) {
    const json& pj = j["profile"];
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, pj.value("iters", 0));
    lua_setfield(L, -2, "iters");
    lua_pushnumber(L, pj.value("total_ms", 0.0));
    lua_setfield(L, -2, "total_ms");
    lua_pushstring(L, pj.value("text", "").c_str());
    lua_setfield(L, -2, "text");
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "saved");
    lua_setfield(L, nst, "profile");
    lines.push_back("saved profile (" + std::to_string(pj.value("iters", 0)) + " iterations): :profile last shows it");
  }
  lua_setfield(L, -2, "state");
  lua_pop(L, 2);
  // result
  std::string summary;
  for (auto& l : lines) summary += (summary.empty() ? "" : "\n") + l;
  lua_createtable(L, 0, 3);
  lua_pushstring(L, summary.c_str());
  lua_setfield(L, -2, "summary");
  if (j.contains("backend") && j["backend"].is_string()) {
    lua_pushstring(L, j["backend"].get<std::string>().c_str());
    lua_setfield(L, -2, "backend");
    if (j.contains("compiled_step") && j["compiled_step"].is_number_integer()) {
      lua_pushinteger(L, j["compiled_step"].get<int>());
      lua_setfield(L, -2, "compiled_step");
    }
  }
  return 1;
}

}  // namespace

void register_session_commands(lua_State* L, int table) {
  const std::pair<const char*, lua_CFunction> fns[] = {
      {"_note_rules", l_note_rules}, {"_session_save", l_session_save}, {"_session_open", l_session_open}};
  for (auto& [name, fn] : fns) {  // internal: not listed in lathe.help()
    push_guarded(L, fn);
    lua_setfield(L, table, name);
  }
}

}  // namespace lathe::script
