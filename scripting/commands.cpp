// commands.cpp — the Workbench: evaluating Lua input the way lua.c does (expression
// first, then statement, "<eof>" = incomplete), dispatching colon commands to lathe.cmd,
// pretty-printing results, completion candidates for the REPL, and the native helper of
// the program commands (lathe.cmd._dot). Programs themselves are bind_run.cpp's
// (program_box.h): :asm is p:asm, :profile / :trace go through check_program_exe.
#include "scripting/commands.h"

#include <lua.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "backends/backend.h"
#include "core/ir/diag.h"
#include "core/ir/dot.h"
#include "core/schedule/kernel_view.h"
#include "scripting/attention_on_load.h"
#include "scripting/binding.h"
#include "scripting/program_box.h"
#include "scripting/progress.h"
#include "scripting/rules_lua.h"
#include "scripting/session_file.h"

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

// lathe.cmd._dot(g, path, level [, p]): writes DOT text; level kernel groups by p's kernels.
int l_dot(lua_State* L) {
  Graph g = check_graph(L, 1);
  std::string path = luaL_checkstring(L, 2);
  std::string level = luaL_optstring(L, 3, "tensor");
  auto lv = dot_level_from_name(level);
  if (!lv) raise(L, "unknown level '" + level + "' (tensor, primitive or kernel)");
  DotOptions opt;
  opt.level = *lv;
  opt.title = std::filesystem::path(path).stem().string() + " (" + level + " level)";
  if (opt.level == DotLevel::Kernel) {  // p's kernels, drawn as `lathe dot` and the app do
    if (lua_isnoneornil(L, 4)) raise(L, "the kernel level draws a compiled program's kernels: :compile first");
    std::shared_ptr<Executable> exe = check_program_exe(L, 4);
    write_file_atomic(path, kernel_level_to_dot(exe->program().kg, opt.title));
    return 0;
  }
  write_file_atomic(path, graph_to_dot(g, opt));
  return 0;
}

}  // namespace

std::shared_ptr<Executable> check_program_exe(lua_State* L, int idx) {
  std::shared_ptr<ProgramState> st = check_program(L, idx);
  st->ready();  // recompiled when a kernel was rescheduled (p:kernel(i))
  return st->exe;
}

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
      {"help [topic]", "this list; `:help lua`: every Lua function; `:help matmul`: one"},
      {"load FILE", "load a graph (.lua, .lathe, .onnx) as g (an .onnx model's causal attention fused as `lathe run` fuses it: session s, :seek 0 undoes)"},
      {"graph", "summary of the current graph (the session's, else g)"},
      {"text", "the current graph as .lathe text"},
      {"save FILE", "FILE.lathe: the current graph; FILE.lathe-session: the whole session (graph, rules, step, compile, profile)"},
      {"open FILE", "open a .lathe-session (replays to the saved step and compiles p there; also `lathe repl FILE.lathe-session`)"},
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
      {"compile [backend]", "compile the current graph as p; list its kernels (after :step/:back/:seek, the commands on p note that it is another step's)"},
      {"kernels", "the kernels of p"},
      {"source k", "generated source of kernel k"},
      {"loop k", "loop IR of kernel k"},
      {"asm k", "assembly of kernel k (backends that can show it)"},
      {"profile [iters|last] [B=N]", "per-kernel timings of p (Ctrl-C stops early); symbolic dims default to 64"},
      {"tune [trials] [model] [k0,k2] [FILE.jsonl] [B=N]", "search schedules for p's kernels (progress; Ctrl-C keeps what was found); the faster ones replace p's, records go to FILE.jsonl or the cache dir's tuned.jsonl"},
      {"quantize [dynamic|weight-int8|weight-int4] [per-channel] [block=N] [error=B|none]", "one session step: quantize the constant-weight matmuls (lathe.quantize), then each output's error against the float graph on seeded inputs (error=interp|c|llvm, default the default backend)"},
      {"trace FILE.json [iters] [B=N]", "Chrome trace-event JSON of p's kernels (Perfetto opens it)"},
      {"dot FILE.dot [level]", "DOT text of the graph (tensor, primitive, or kernel: p's kernels)"},
      {"gui", "how to open the desktop app on this graph"},
      {"bt", "the traceback of the last error"},
      {"quit", "leave (also Ctrl-D)"},
  };
  return h;
}

Workbench::Workbench(Limits limits) : engine_(limits) {
  ScriptError err;
  lua_State* L = engine_.L();
  lua_getglobal(L, "lathe");
  lua_newtable(L);  // lathe.cmd; the Lua commands below fill it
  int cmd = lua_gettop(L);
  register_long_commands(L, cmd);
  register_session_commands(L, cmd);
  const std::pair<const char*, lua_CFunction> natives[] = {{"_dot", l_dot}, {"_fuse_attention", l_fuse_attention}};
  for (auto [name, fn] : natives) {
    push_guarded(L, fn);
    lua_setfield(L, cmd, name);
  }
  lua_setfield(L, -2, "cmd");
  lua_pop(L, 1);
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
  if (name == "help" || name == "h" || name == "?") return help(words.size() > 1 ? words[1] : "");
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

std::vector<std::string> help_topic_names() {
  std::set<std::string> names = {"lua", "patterns"};
  for (const auto& [key, e] : help_entries()) {
    names.insert(key);
    std::string head = help_signature_head(e.signature);
    if (!head.empty()) names.insert(head);
  }
  for (auto& [c, d] : Workbench::command_help()) names.insert(":" + c.substr(0, c.find(' ')));
  return {names.begin(), names.end()};
}

Workbench::Result Workbench::help(const std::string& topic) {
  Result r;
  const auto& h = help_entries();
  if (topic.empty()) {
    std::string s = "commands:\n";
    size_t w = 0;
    for (auto& [c, d] : command_help()) w = std::max(w, c.size());
    for (auto& [c, d] : command_help()) s += "  :" + c + std::string(w - c.size() + 2, ' ') + d + "\n";
    s += "Anything else is Lua: the `lathe` module is loaded; g, s, p and rules hold the state.\n"
         "Axes are 0-based (negative from the end), as in PyTorch. `:help lua` lists every Lua function;\n"
         "`:help NAME` documents one (lathe.input, matmul, s:step …), `:help patterns` the rule patterns.\n"
         "Long work (:step n, :profile, :tune,\n"
         ":open) shows progress on a terminal and stops between steps on Ctrl-C.";
    r.output = s;
    return r;
  }
  if (topic == "lua") {
    std::string s = "The `lathe` Lua module (`:help NAME` or lathe.help(\"NAME\") for one):\n";
    for (const auto& [t, e] : h) s += "  " + e.signature + "\n      " + e.doc + "\n";
    s += "Colon commands are Lua functions too: `:step 3` is lathe.cmd.step(\"3\").";
    r.output = s;
    return r;
  }
  if (const char* guide = help_guide(topic)) {
    r.output = guide;
    return r;
  }
  // a Lua function and a colon command of the same name (p:asm, :asm) are both shown;
  // ":NAME" asks for the command only
  std::string bare = topic[0] == ':' ? topic.substr(1) : topic;
  if (topic[0] != ':') {
    if (const HelpEntry* e = find_help_entry(topic)) r.output = e->signature + "\n  " + e->doc;
  }
  for (auto& [c, d] : command_help()) {
    if (c == bare || c.rfind(bare + " ", 0) == 0) {
      r.output += (r.output.empty() ? "" : "\n") + (":" + c + "\n  " + d + "\n  (from Lua: lathe.cmd." + bare + "(…))");
      break;
    }
  }
  if (!r.output.empty()) return r;
  r.ok = false;
  r.error = "no help for '" + topic + "' (try :help for the commands, :help lua for every Lua function)";
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

namespace {

// Files and folders (with a trailing '/') whose path starts with `partial`.
std::vector<std::string> complete_path(const std::string& partial) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  size_t slash = partial.rfind('/');
  std::string dir = slash == std::string::npos ? "" : partial.substr(0, slash + 1);
  std::string stem = slash == std::string::npos ? partial : partial.substr(slash + 1);
  std::error_code ec;
  fs::directory_iterator it(dir.empty() ? fs::path(".") : fs::path(dir), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, stem.size(), stem) != 0) continue;
    if (name[0] == '.' && (stem.empty() || stem[0] != '.')) continue;
    std::error_code e2;
    out.push_back(dir + name + (it->is_directory(e2) ? "/" : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> Workbench::complete_line(const std::string& line, int word_start, const std::string& word) {
  size_t b = line.find_first_not_of(" \t");
  if (b == std::string::npos || line[b] != ':') return complete(word);
  std::vector<std::string> out;
  auto starts = [&](const std::string& s) { return s.compare(0, word.size(), word) == 0; };
  if (static_cast<size_t>(word_start) <= b) {  // the command name itself
    for (auto& [c, d] : command_help()) {
      std::string name = ":" + c.substr(0, c.find(' '));
      if (starts(name)) out.push_back(name);
    }
    return out;
  }
  size_t e = line.find_first_of(" \t", b);
  std::string cmd = line.substr(b + 1, e == std::string::npos ? std::string::npos : e - b - 1);
  if (cmd == "help" || cmd == "h" || cmd == "?") {
    for (auto& t : help_topic_names())
      if (starts(t)) out.push_back(t);
    return out;
  }
  if (cmd == "load" || cmd == "open" || cmd == "rules" || cmd == "save" || cmd == "trace" || cmd == "dot") {
    // readline breaks words at '/': complete the whole argument, return the part from word_start
    size_t arg = e == std::string::npos ? line.size() : line.find_first_not_of(" \t", e);
    size_t end = std::min(line.size(), static_cast<size_t>(word_start) + word.size());
    if (arg == std::string::npos || arg > static_cast<size_t>(word_start)) arg = word_start;
    size_t cut = word_start - arg;
    for (auto& path : complete_path(line.substr(arg, end - arg)))
      if (path.size() >= cut) out.push_back(path.substr(cut));
    if (cmd == "rules")
      for (auto& n : builtin_rule_names())
        if (starts(n)) out.push_back(n);
    return out;
  }
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
  for (auto& n : names) {
    if (n.compare(0, partial.size(), partial) != 0) continue;
    if (n[0] == '_' && (partial.empty() || partial[0] != '_')) continue;  // internal helpers
    out.push_back(prefix + n);
  }
  lua_settop(L, top);
  return out;
}

}  // namespace lathe::script
