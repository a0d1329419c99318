// binding.cpp — shared helpers of the Lua bindings: error conversion, the help registry,
// registration, and conversion of dtypes, shapes, axes, tensors, values and graphs.
#include "scripting/binding.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "scripting/engine.h"

namespace lathe::script {

// ---------------------------------------------------------------- errors
std::string type_of(lua_State* L, int idx) {
  if (luaL_getmetafield(L, idx, "__name") != LUA_TNIL) {
    std::string s = lua_tostring(L, -1) ? lua_tostring(L, -1) : "userdata";
    lua_pop(L, 1);
    return s;
  }
  return luaL_typename(L, idx);
}

std::string exception_text(const std::exception& e) {
  if (auto* u = dynamic_cast<const UserError*>(&e)) {
    const Diagnostic& d = u->diag();
    if (d.file.empty() && d.source_line.empty()) {
      std::string s;
      if (d.node >= 0) s += "node %" + std::to_string(d.node) + ": ";
      s += d.message;
      if (!d.note.empty()) s += " (note: " + d.note + ")";
      return s;
    }
    return d.format();
  }
  if (dynamic_cast<const InternalError*>(&e))
    return std::string("internal error (a bug in Lathe; please report it): ") + e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "out of memory";
  return e.what();
}

// "file:line: " of the Lua code that called the running C function, skipping the colon
// commands' own chunk (lathe.cmd.*, "=lathe-command"): their errors are about the command
// line, so a command called from the REPL, the app or a pcall gets no position, and one
// called from a script gets the script's. "" when the caller is C.
void push_caller_position(lua_State* L) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.source && std::strcmp(ar.source, "=lathe-command") == 0) continue;
    if (ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return;
    }
    break;
  }
  lua_pushliteral(L, "");
}

void raise(lua_State* L, const std::string& msg) {
  push_caller_position(L);
  lua_pushlstring(L, msg.data(), msg.size());
  lua_concat(L, 2);
  lua_error(L);
  std::abort();  // unreachable: lua_error does not return
}

// ---------------------------------------------------------------- help + registration
namespace {
std::map<std::string, HelpEntry>& help_table() {
  static std::map<std::string, HelpEntry> t;
  return t;
}
}  // namespace

const std::map<std::string, HelpEntry>& help_entries() { return help_table(); }
void add_help(const std::string& topic, const std::string& signature, const std::string& doc) {
  help_table()[topic] = HelpEntry{signature, doc};
}

namespace {
// The exception guard: upvalue 1 is the raw function; C++ exceptions other than Lua's own
// become a located Lua error (the message is built outside the catch block).
int guard(lua_State* L) {
  auto raw = reinterpret_cast<lua_CFunction>(lua_touserdata(L, lua_upvalueindex(1)));
  std::string msg;
  lua_State*& active = Engine::active_thread();
  lua_State* saved = active;
  active = L;
  try {
    int r = raw(L);
    active = saved;
    return r;
  } catch (const std::exception& e) {
    msg = exception_text(e);
  } catch (...) {  // a Lua error unwinding through: restore and rethrow
    active = saved;
    throw;
  }
  active = saved;
  raise(L, msg);
}
}  // namespace

void push_guarded(lua_State* L, lua_CFunction raw, const void* data, int extra_upvalues) {
  lua_pushlightuserdata(L, reinterpret_cast<void*>(raw));
  lua_pushlightuserdata(L, const_cast<void*>(data));
  if (extra_upvalues) {
    lua_rotate(L, -(extra_upvalues + 2), 2);  // raw, data below the extra upvalues
  }
  lua_pushcclosure(L, guard, 2 + extra_upvalues);
}

std::string help_signature_head(const std::string& sig) {
  std::string h = sig.substr(0, sig.find_first_of("({ "));  // p:profile{iters=20}, lathe.graph{ … }
  while (!h.empty() && h.back() == ' ') h.pop_back();
  return h;
}

const char* help_guide(const std::string& topic) {
  if (topic == "patterns" || topic == "pattern" || topic == "rules-syntax")
    return "Rule patterns (lathe.rule(name, PATTERN, REPLACEMENT [, {where=fn, benefit=n}])):\n"
           "  Op(p, …)           a primitive op (ops.def names: Add, Mul, Exp2, Reduce, View, …) over sub-patterns\n"
           "  x                  a lower-case name binds any node; the same name twice must be the same node\n"
           "  2, 0.5, -1, inf    a constant of that value (also a broadcast View of one)\n"
           "  Const(a)           any scalar constant; binds its value to a (m.a in a Lua replacement)\n"
           "  _                  anything, unbound\n"
           "  Op{k=v, …}(p, …)   attribute constraints: Reduce{op=\"add\", axes=[1]}, Input{name=\"x\"},\n"
           "                     Index{axis=0}, Take{axis=1}, any op's dtype: Cast{dtype=\"f16\"}(x)\n"
           "  Input, Const, Index  arity-0 ops may leave out the parentheses\n"
           "Commutative ops (Add, Mul, Max, And, Or, Xor, CmpNE) match both operand orders.\n"
           "A replacement is a pattern over the bound names (numbers and ops with their attributes), or a\n"
           "Lua function(m) returning a tensor, a number (a constant shaped like the root) or nil (no rewrite);\n"
           "m.x is the node bound to x, m.a a bound constant's value, m.dtype / m.shape / m.root the root's.\n"
           "Example:  lathe.rule(\"double\", \"Mul(x, 2)\", \"Add(x, x)\")\n"
           "See also: lathe.rule, lathe.ruleset, lathe.rules.load, `:rules FILE`, `lathe rewrite --rules`.";
  return nullptr;
}

const HelpEntry* find_help_entry(const std::string& topic) {
  const auto& h = help_entries();
  for (const std::string& key : {topic, "lathe." + topic, "Tensor:" + topic, "Graph:" + topic, "Session:" + topic,
                                 "Program:" + topic, "Schedule:" + topic, "Value:" + topic, "Ruleset:" + topic,
                                 "lathe.rules." + topic}) {
    auto it = h.find(key);
    if (it != h.end()) return &it->second;
  }
  // The names the listings show: a signature's head ("k:split", "s:step", "rs:names").
  for (const auto& [key, e] : h)
    if (help_signature_head(e.signature) == topic) return &e;
  // Any receiver name before ':' ("sched:split", "prog:asm"): the method of that name.
  if (auto c = topic.find(':'); c != std::string::npos && c > 0 && c + 1 < topic.size()) {
    std::string method = topic.substr(c + 1);
    if (method.find_first_of(".:") == std::string::npos)
      for (const char* type : {"Tensor:", "Graph:", "Session:", "Program:", "Schedule:", "Value:", "Ruleset:"})
        if (auto it = h.find(type + method); it != h.end()) return &it->second;
  }
  return nullptr;
}

void register_functions(lua_State* L, int table, const Function* fns, const std::string& help_prefix) {
  for (const Function* f = fns; f->name; ++f) {
    push_guarded(L, f->fn);
    lua_setfield(L, table, f->name);
    add_help(help_prefix + f->name, f->signature ? f->signature : "", f->doc ? f->doc : "");
  }
}

// ---------------------------------------------------------------- dtypes, shapes, ints
DType check_dtype(lua_State* L, int idx, DType dflt) {
  if (lua_isnoneornil(L, idx)) return dflt;
  if (lua_type(L, idx) != LUA_TSTRING)
    raise(L, std::string("expected a dtype name such as \"f32\", got a ") + type_of(L, idx));
  std::string s = lua_tostring(L, idx);
  if (auto d = dtype_from_name(s)) return *d;
  std::string all;
  for (int i = 0; i < kNumDTypes; ++i) all += (i ? ", " : "") + std::string(dtype_name(DType(i)));
  raise(L, "unknown dtype '" + s + "' (known: " + all + ")");
}

void push_dtype(lua_State* L, DType t) {
  auto n = dtype_name(t);
  lua_pushlstring(L, n.data(), n.size());
}

int64_t check_int(lua_State* L, int idx, const char* what) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      raise(L, std::string(what) + " must be an integer, got " + std::to_string(lua_tonumber(L, idx)));
    raise(L, std::string(what) + " must be an integer, got a " + type_of(L, idx));
  }
  return v;
}

Shape check_shape(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) return Shape{SymInt(check_int(L, idx, "a dim"))};
  if (!lua_istable(L, idx))
    raise(L, std::string("expected dims as a table such as {\"B\", 784}, got a ") + type_of(L, idx));
  Shape s;
  lua_Integer n = luaL_len(L, idx);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, idx, i);
    if (lua_type(L, -1) == LUA_TSTRING) {
      std::string text = lua_tostring(L, -1);
      size_t pos = 0;
      auto sym = SymInt::parse(text, &pos);
      if (!sym) raise(L, "dim " + std::to_string(i) + ": cannot parse '" + text + "' as a symbolic dim");
      s.push_back(*sym);
    } else {
      int64_t v = check_int(L, -1, ("dim " + std::to_string(i)).c_str());
      if (v < 0) raise(L, "dim " + std::to_string(i) + " is negative (" + std::to_string(v) + ")");
      s.push_back(SymInt(v));
    }
    lua_pop(L, 1);
  }
  return s;
}

std::vector<int64_t> check_int_list(lua_State* L, int idx, const char* what) {
  idx = lua_absindex(L, idx);
  std::vector<int64_t> out;
  if (lua_type(L, idx) == LUA_TNUMBER) return {check_int(L, idx, what)};
  if (!lua_istable(L, idx))
    raise(L, std::string(what) + ": expected a table of integers, got a " + type_of(L, idx));
  lua_Integer n = luaL_len(L, idx);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, idx, i);
    out.push_back(check_int(L, -1, what));
    lua_pop(L, 1);
  }
  return out;
}

void push_shape(lua_State* L, const Shape& s) {
  lua_createtable(L, (int)s.size(), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    if (auto v = s[i].try_value()) lua_pushinteger(L, *v);
    else lua_pushstring(L, s[i].to_string().c_str());
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

void push_int_list(lua_State* L, const std::vector<int64_t>& v) {
  lua_createtable(L, (int)v.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

int check_axis(lua_State* L, int idx, int rank) {
  int64_t a = check_int(L, idx, "axis");
  int64_t r = a < 0 ? a + rank : a;
  if (r < 0 || r >= std::max(rank, 1))
    raise(L, "axis " + std::to_string(a) + " is out of range for a tensor of rank " + std::to_string(rank) +
                 " (axes are 0-based; negative counts from the end)");
  return (int)r;
}

std::string opt_field_string(lua_State* L, int table, const char* key, const std::string& dflt) {
  if (!lua_istable(L, table)) return dflt;
  lua_getfield(L, table, key);
  std::string r = dflt;
  if (lua_type(L, -1) == LUA_TSTRING) r = lua_tostring(L, -1);
  else if (!lua_isnil(L, -1)) raise(L, std::string("option '") + key + "' must be a string");
  lua_pop(L, 1);
  return r;
}

double opt_field_number(lua_State* L, int table, const char* key, double dflt) {
  if (!lua_istable(L, table)) return dflt;
  lua_getfield(L, table, key);
  double r = dflt;
  if (lua_type(L, -1) == LUA_TNUMBER) r = lua_tonumber(L, -1);
  else if (!lua_isnil(L, -1)) raise(L, std::string("option '") + key + "' must be a number");
  lua_pop(L, 1);
  return r;
}

bool opt_field_bool(lua_State* L, int table, const char* key, bool dflt) {
  if (!lua_istable(L, table)) return dflt;
  lua_getfield(L, table, key);
  bool r = lua_isnil(L, -1) ? dflt : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

// ---------------------------------------------------------------- userdata
namespace {
struct NodeBox { NodeRef n; };
}  // namespace

void push_node(lua_State* L, NodeRef n) { new_udata<NodeBox>(L, kTensorMT, NodeBox{n}); }

NodeRef to_node_or_null(lua_State* L, int idx) {
  if (auto* b = test_udata<NodeBox>(L, idx, kTensorMT)) return b->n;
  if (auto* v = test_udata<HostTensor>(L, idx, kValueMT)) return prim::constant_tensor(*v);
  return nullptr;
}

NodeRef check_node(lua_State* L, int idx) {
  if (NodeRef n = to_node_or_null(L, idx)) return n;
  raise(L, std::string("expected a tensor (lathe.input, lathe.const or an expression), got a ") +
               type_of(L, idx));
}

void push_value(lua_State* L, HostTensor t) { new_udata<HostTensor>(L, kValueMT, std::move(t)); }

HostTensor& check_value(lua_State* L, int idx) {
  if (auto* v = test_udata<HostTensor>(L, idx, kValueMT)) return *v;
  raise(L, std::string("expected a value tensor (lathe.tensor, lathe.randn or a lathe.run output), got a ") +
               type_of(L, idx));
}

void push_graph(lua_State* L, Graph g) { new_udata<Graph>(L, kGraphMT, std::move(g)); }

Graph& check_graph(lua_State* L, int idx) {
  if (auto* g = test_udata<Graph>(L, idx, kGraphMT)) return *g;
  raise(L, std::string("expected a graph (lathe.graph or lathe.load), got a ") + type_of(L, idx));
}

}  // namespace lathe::script
