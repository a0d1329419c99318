// commands.cpp — the Workbench: evaluating Lua input the way lua.c does (expression
// first, then statement, "<eof>" = incomplete), dispatching colon commands to lathe.cmd,
// pretty-printing results, and completion candidates for the REPL.
#include "scripting/commands.h"

#include <lua.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "scripting/binding.h"

namespace lathe::script {

extern const char* const kCommandsChunkName;
extern const char* const kCommandsLua;

namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Removes the "lathe-command:NN: " prefixes that errors raised inside commands carry.
std::string strip_command_positions(std::string msg) {
  const std::string tag = "lathe-command:";
  for (size_t p; (p = msg.find(tag)) != std::string::npos;) {
    size_t e = p + tag.size();
    while (e < msg.size() && std::isdigit((unsigned char)msg[e])) ++e;
    if (e < msg.size() && msg[e] == ':') ++e;
    if (e < msg.size() && msg[e] == ' ') ++e;
    msg.erase(p, e - p);
  }
  return msg;
}

const char* const kKeywords[] = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto",
                                  "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true",
                                  "until", "while"};

}  // namespace

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false, quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\\' && i + 1 < line.size()) { cur += line[++i]; in_word = true; continue; }
    if (c == '"') { quoted = !quoted; in_word = true; continue; }
    if (!quoted && std::isspace((unsigned char)c)) {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
      continue;
    }
    cur += c;
    in_word = true;
  }
  if (in_word) out.push_back(cur);
  return out;
}

const std::vector<std::pair<std::string, std::string>>& Workbench::command_help() {
  static const std::vector<std::pair<std::string, std::string>> h = {
      {"help [topic]", "this list; `:help lathe.input` or `:help matmul` for a Lua function"},
      {"load FILE", "load a graph (.lua, .lathe, .onnx) as g"},
      {"graph", "summary of the current graph (the session's, else g)"},
      {"text", "the current graph as .lathe text"},
      {"save FILE.lathe", "write the current graph"},
      {"rules FILE|NAME [check]", "load a rule file or built-in set; start a session s on the current graph"},
      {"step [n]", "one rewrite (or n)"},
      {"back [n]", "go back one step (or n)"},
      {"seek k", "go to step k (0 = the original graph)"},
      {"run", "rewrite to a fixpoint (stops at breakpoints)"},
      {"history", "the steps so far (> marks the current one)"},
      {"diff [a b]", "nodes added / removed / changed between steps a and b (default: the last step)"},
      {"break RULE", "stop :run before RULE fires"},
      {"why RULE NODE", "why RULE does not rewrite NODE"},
      {"stats", "per rule: tried, matched, fired, time"},
      {"check", "compare the current graph with step 0 (bisects to the first bad step)"},
      {"compile [backend]", "compile the current graph as p; list its kernels"},
      {"kernels", "the kernels of p"},
      {"source k", "generated source of kernel k"},
      {"loop k", "loop IR of kernel k"},
      {"profile [iters]", "per-kernel timings of p"},
      {"bt", "the traceback of the last error"},
      {"quit", "leave (also Ctrl-D)"},
  };
  return h;
}

Workbench::Workbench(Limits limits) : engine_(limits) {
  ScriptError err;
  if (!engine_.run_string(kCommandsLua, kCommandsChunkName, 0, &err))
    throw std::runtime_error("internal error: the REPL commands failed to load: " + err.message);
}

Workbench::Result Workbench::execute(const std::string& input) {
  size_t b = input.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  if (input[b] == ':') {
    auto words = split_words(input.substr(b + 1));
    if (words.empty()) return {true, false, false, "", ""};
    return command(words);
  }
  return eval_lua(input);
}

Workbench::Result Workbench::command(const std::vector<std::string>& words) {
  Result r;
  const std::string& name = words[0];
  if (name == "quit" || name == "q" || name == "exit") { r.quit = true; return r; }
  if (name == "bt") {
    r.output = last_traceback_.empty() ? "no traceback (no error yet)" : last_traceback_;
    return r;
  }
  if (name == "help" || name == "h" || name == "?") {
    if (words.size() > 1) {
      const auto& h = help_entries();
      for (const std::string& key : {words[1], "lathe." + words[1], "Tensor:" + words[1], "Graph:" + words[1],
                                     "Session:" + words[1], "Value:" + words[1], "lathe.rules." + words[1]}) {
        auto it = h.find(key);
        if (it != h.end()) {
          r.output = it->second.signature + "\n  " + it->second.doc;
          return r;
        }
      }
      r.ok = false;
      r.error = "no help for '" + words[1] + "' (try :help, or lathe.help() for all Lua topics)";
      return r;
    }
    std::string s = "commands:\n";
    size_t w = 0;
    for (auto& [c, d] : command_help()) w = std::max(w, c.size());
    for (auto& [c, d] : command_help()) s += "  :" + c + std::string(w - c.size() + 2, ' ') + d + "\n";
    s += "Anything else is Lua: the `lathe` module is loaded; g, s, p and rules hold the state.\n"
         "Axes are 0-based (negative from the end), as in PyTorch. lathe.help(\"NAME\") documents a function.";
    r.output = s;
    return r;
  }
  lua_State* L = engine_.L();
  int top = lua_gettop(L);
  lua_getglobal(L, "lathe");
  if (lua_istable(L, -1)) lua_getfield(L, -1, "cmd");
  else lua_pushnil(L);
  if (lua_istable(L, -1)) lua_getfield(L, -1, name.c_str());
  else lua_pushnil(L);
  if (!lua_isfunction(L, -1)) {
    lua_settop(L, top);
    r.ok = false;
    r.error = "unknown command ':" + name + "' (see :help)";
    return r;
  }
  lua_replace(L, top + 1);
  lua_settop(L, top + 1);
  for (size_t i = 1; i < words.size(); ++i) lua_pushstring(L, words[i].c_str());
  ScriptError err;
  if (!engine_.call((int)words.size() - 1, 1, &err)) {
    lua_settop(L, top);
    r.ok = false;
    r.error = strip_command_positions(err.message);
    last_traceback_ = err.traceback;
    return r;
  }
  if (!lua_isnil(L, -1)) r.output = describe(-1);
  lua_settop(L, top);
  return r;
}

Workbench::Result Workbench::eval_lua(const std::string& code, const std::string& chunkname) {
  Result r;
  lua_State* L = engine_.L();
  int top = lua_gettop(L);
  ScriptError err;
  // An expression first (so `g` prints g), then a statement, as lua.c does.
  std::string ret = "return " + code + ";";
  if (luaL_loadbufferx(L, ret.data(), ret.size(), chunkname.c_str(), "t") != LUA_OK) {
    lua_pop(L, 1);
    if (!engine_.load(code, chunkname, &err)) {
      // Incomplete as a statement, or as an expression ("1 +"): read another line.
      bool incomplete = ends_with(err.message, "<eof>");
      if (!incomplete) {
        std::string expr = "return " + code;
        if (luaL_loadbufferx(L, expr.data(), expr.size(), chunkname.c_str(), "t") != LUA_OK) {
          const char* m = lua_tostring(L, -1);
          incomplete = m && ends_with(m, "<eof>");
        }
        lua_pop(L, 1);
      }
      if (incomplete) { r.incomplete = true; return r; }
      r.ok = false;
      r.error = err.message;
      return r;
    }
  }
  if (!engine_.call(0, LUA_MULTRET, &err)) {
    lua_settop(L, top);
    r.ok = false;
    r.error = err.message;
    last_traceback_ = err.traceback;
    return r;
  }
  int n = lua_gettop(L) - top;
  for (int i = 1; i <= n; ++i) {
    if (i > 1) r.output += "\t";
    r.output += describe(top + i);
  }
  lua_settop(L, top);
  return r;
}

std::string Workbench::describe(int idx, int depth) {
  lua_State* L = engine_.L();
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE && !luaL_getmetafield(L, idx, "__tostring")) {
    if (depth >= 2) return "{…}";
    std::string s = "{";
    int count = 0;
    lua_Integer n = luaL_len(L, idx);
    for (lua_Integer i = 1; i <= n; ++i) {
      if (count++ >= 20) { s += ", …"; break; }
      lua_rawgeti(L, idx, i);
      s += (i > 1 ? ", " : "") + describe(-1, depth + 1);
      lua_pop(L, 1);
    }
    // then the non-array keys, sorted for stable output
    std::vector<std::string> keys;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n) continue;
      if (lua_type(L, -1) == LUA_TSTRING) keys.push_back(lua_tostring(L, -1));
    }
    std::sort(keys.begin(), keys.end());
    for (auto& k : keys) {
      if (count++ >= 20) { s += ", …"; break; }
      lua_getfield(L, idx, k.c_str());
      s += (s.size() > 1 ? ", " : "") + k + " = " + describe(-1, depth + 1);
      lua_pop(L, 1);
    }
    return s + "}";
  }
  if (lua_type(L, idx) == LUA_TTABLE) lua_pop(L, 1);  // the __tostring we probed
  if (depth > 0 && lua_type(L, idx) == LUA_TSTRING) {
    std::string q = "\"";
    return q + lua_tostring(L, idx) + q;
  }
  size_t len = 0;
  const char* s = luaL_tolstring(L, idx, &len);
  std::string out(s, len);
  lua_pop(L, 1);
  return out;
}

std::vector<std::string> Workbench::complete(const std::string& text) {
  lua_State* L = engine_.L();
  int top = lua_gettop(L);
  std::vector<std::string> out;
  size_t sep = text.find_last_of(".:");
  std::string prefix = sep == std::string::npos ? "" : text.substr(0, sep + 1);
  std::string partial = sep == std::string::npos ? text : text.substr(sep + 1);
  bool methods_only = sep != std::string::npos && text[sep] == ':';
  std::set<std::string> names;
  if (sep == std::string::npos) {
    lua_pushglobaltable(L);
    for (const char* k : kKeywords) names.insert(k);
  } else {
    // Walk the path a.b.c without calling anything but plain table lookups.
    lua_pushglobaltable(L);
    std::string path = text.substr(0, sep);
    size_t start = 0;
    while (start <= path.size()) {
      size_t dot = path.find('.', start);
      std::string seg = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!lua_istable(L, -1) || seg.empty()) { lua_settop(L, top); return out; }
      lua_pushstring(L, seg.c_str());
      lua_rawget(L, -2);
      lua_remove(L, -2);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  int obj = lua_gettop(L);
  auto add_keys = [&](int t, bool functions_only) {
    lua_pushnil(L);
    while (lua_next(L, t)) {
      if (lua_type(L, -2) == LUA_TSTRING && (!functions_only || lua_isfunction(L, -1))) names.insert(lua_tostring(L, -2));
      lua_pop(L, 1);
    }
  };
  if (lua_istable(L, obj) && !methods_only) add_keys(obj, false);
  if (lua_getmetatable(L, obj)) {
    int mt = lua_gettop(L);
    lua_getfield(L, mt, "__index");
    if (lua_istable(L, -1)) add_keys(lua_gettop(L), methods_only);
    else if (lua_iscfunction(L, -1) && lua_getupvalue(L, -1, 3)) {
      if (lua_istable(L, -1)) add_keys(lua_gettop(L), methods_only);
    }
    lua_getfield(L, mt, "__name");
    std::string tname = lua_tostring(L, -1) ? lua_tostring(L, -1) : "";
    if (!methods_only) {
      if (tname == kTensorMT) for (auto* k : {"shape", "dtype", "rank", "id", "op", "inputs", "provenance", "name", "value"}) names.insert(k);
      if (tname == kValueMT) for (auto* k : {"shape", "dtype", "rank"}) names.insert(k);
      if (tname == kGraphMT) for (auto* k : {"inputs", "outputs", "output_names"}) names.insert(k);
    }
  }
  for (auto& n : names)
    if (n.compare(0, partial.size(), partial) == 0) out.push_back(prefix + n);
  lua_settop(L, top);
  return out;
}

}  // namespace lathe::script
