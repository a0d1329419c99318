// bind_graph.cpp — lathe.Graph: lathe.graph{…}, lathe.load, lathe.parse and the graph
// methods g:text(), g:save(path), g:nodes(), #g, g:verify(), g:summary(), g.inputs,
// g.outputs, g:output(name), g:node(id), plus the `.lua` graph loader (a .lua FILE is run
// in a fresh sandbox and must return a graph).
//
// Output order: lathe.graph{ y = y, z = z } sorts outputs by name (Lua tables have no
// order); the array form lathe.graph{ {"y", y}, {"z", z} } keeps the order written.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/loader.h"
#include "core/ir/text.h"
#include "core/ir/verify.h"
#include "scripting/binding.h"
#include "scripting/engine.h"
#include "scripting/pretty.h"

namespace lathe::script {
namespace {

int l_graph(lua_State* L) {
  std::vector<std::pair<std::string, NodeRef>> outs;
  if (NodeRef single = to_node_or_null(L, 1)) {
    outs.push_back({"out", single});
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    if (n > 0) {  // array form
      for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, 1, i);
        int e = lua_gettop(L);
        if (!lua_istable(L, e)) raise(L, "lathe.graph: entry " + std::to_string(i) + " must be {name, tensor}");
        lua_geti(L, e, 1);
        lua_geti(L, e, 2);
        if (lua_type(L, -2) != LUA_TSTRING)
          raise(L, "lathe.graph: entry " + std::to_string(i) + " must be {name, tensor} with a string name");
        outs.push_back({lua_tostring(L, -2), check_node(L, -1)});
        lua_pop(L, 3);
      }
    } else {
      lua_pushnil(L);
      while (lua_next(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING) raise(L, "lathe.graph: output names must be strings");
        std::string name = lua_tostring(L, -2);
        NodeRef node = to_node_or_null(L, -1);
        if (!node) raise(L, "lathe.graph: output '" + name + "' is a " + type_of(L, -1) + ", expected a tensor");
        outs.push_back({name, node});
        lua_pop(L, 1);
      }
      std::sort(outs.begin(), outs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    }
  }
  if (outs.empty()) raise(L, "lathe.graph: no outputs (write lathe.graph{ y = y })");
  for (size_t i = 1; i < outs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (outs[i].first == outs[j].first) raise(L, "lathe.graph: output name '" + outs[i].first + "' is used twice");
  push_graph(L, Graph::from_outputs(std::move(outs)));
  return 1;
}

// lathe.load(path [, {qdq_rules = false, qdq_sat16 = true|false}]): qdq_rules = false keeps
// an ONNX model's QuantizeLinear / DequantizeLinear as plain ops (the default applies the `qdq`
// rules at load), e.g. to step through lathe.rewrite(g, lathe.rules.builtin("qdq"));
// qdq_sat16 chooses the saturating u8 × i8 pair sums (`qdq-sat16`, ONNX Runtime's AVX2 form) or
// exact ones (default: on for x86 without VNNI, core/rewrite/qdq_rules.h). The importer reads
// LATHE_QDQ and LATHE_QDQ_SAT16; they are set for the call and restored.
int l_load(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  std::vector<std::pair<const char*, std::string>> env;  // variable, value for this call
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "qdq_rules");
    if (!lua_isnil(L, -1) && !lua_toboolean(L, -1)) env.push_back({"LATHE_QDQ", "unfused"});
    lua_pop(L, 1);
    lua_getfield(L, 2, "qdq_sat16");
    if (!lua_isnil(L, -1)) env.push_back({"LATHE_QDQ_SAT16", lua_toboolean(L, -1) ? "1" : "0"});
    lua_pop(L, 1);
  }
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (auto& [k, v] : env) {
    const char* old = std::getenv(k);
    saved.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
    setenv(k, v.c_str(), 1);
  }
  auto restore = [&] {
    for (auto& [k, v] : saved)
      if (v) setenv(k, v->c_str(), 1); else unsetenv(k);
  };
  Graph g;
  try {
    g = load_graph(path);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  push_graph(L, g);
  return 1;
}
int l_parse(lua_State* L) {
  push_graph(L, parse_graph(luaL_checkstring(L, 1), luaL_optstring(L, 2, "<text>")));
  return 1;
}

int g_text(lua_State* L) { lua_pushstring(L, print_graph(check_graph(L, 1)).c_str()); return 1; }
int g_save(lua_State* L) {
  save_graph(check_graph(L, 1), luaL_checkstring(L, 2));
  return 0;
}
int g_summary(lua_State* L) { lua_pushstring(L, graph_summary(check_graph(L, 1)).c_str()); return 1; }
int g_verify(lua_State* L) {
  verify_or_throw(check_graph(L, 1));
  lua_pushboolean(L, 1);
  return 1;
}
int g_len(lua_State* L) { lua_pushinteger(L, (lua_Integer)check_graph(L, 1).size()); return 1; }

int node_tostring(lua_State* L) {
  lua_getfield(L, 1, "id");
  NodeRef n = node_by_id((uint32_t)lua_tointeger(L, -1));
  lua_pushstring(L, n ? node_line(n).c_str() : "<node>");
  return 1;
}

// A node as a plain table: id, op, dtype, shape, inputs (ids), provenance, attributes,
// and `tensor` (the node as a lathe.Tensor, for building replacements).
void push_node_table(lua_State* L, NodeRef n) {
  lua_createtable(L, 0, 10);
  lua_pushinteger(L, n->id);
  lua_setfield(L, -2, "id");
  lua_pushstring(L, std::string(op_name(n->op)).c_str());
  lua_setfield(L, -2, "op");
  push_dtype(L, n->dtype);
  lua_setfield(L, -2, "dtype");
  push_shape(L, n->shape);
  lua_setfield(L, -2, "shape");
  lua_createtable(L, (int)n->inputs.size(), 0);
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    lua_pushinteger(L, n->inputs[i]->id);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "inputs");
  lua_pushstring(L, n->prov.path.c_str());
  lua_setfield(L, -2, "provenance");
  lua_pushinteger(L, n->prov.step);
  lua_setfield(L, -2, "step");
  if (n->op == Op::Input || n->op == Op::Extern) {
    lua_pushstring(L, n->attrs.name.c_str());
    lua_setfield(L, -2, "name");
  }
  if (n->is_scalar_const()) {
    lua_pushnumber(L, n->const_value());
    lua_setfield(L, -2, "value");
  }
  if (n->op == Op::Reduce) {
    lua_pushstring(L, std::string(reduce_op_name(n->attrs.reduce)).c_str());
    lua_setfield(L, -2, "reduce");
    std::vector<int64_t> axes(n->attrs.axes.begin(), n->attrs.axes.end());
    push_int_list(L, axes);
    lua_setfield(L, -2, "axes");
  }
  if (n->op == Op::Index || n->op == Op::Take) {
    lua_pushinteger(L, n->attrs.axis);
    lua_setfield(L, -2, "axis");
  }
  lua_pushstring(L, print_node(n).c_str());
  lua_setfield(L, -2, "text");
  push_node(L, n);
  lua_setfield(L, -2, "tensor");
  if (luaL_newmetatable(L, "lathe.Node")) {
    lua_pushcfunction(L, node_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_setmetatable(L, -2);
}

int g_nodes(lua_State* L) {
  auto nodes = check_graph(L, 1).toposort();
  lua_createtable(L, (int)nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    push_node_table(L, nodes[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}
int g_node(lua_State* L) {
  Graph& g = check_graph(L, 1);
  int64_t id = check_int(L, 2, "node id");
  for (NodeRef n : g.toposort())
    if ((int64_t)n->id == id) { push_node_table(L, n); return 1; }
  raise(L, "no node %" + std::to_string(id) + " in this graph");
}
int g_output(lua_State* L) {
  Graph& g = check_graph(L, 1);
  std::string name = luaL_checkstring(L, 2);
  NodeRef n = g.output(name);
  if (!n) raise(L, "the graph has no output '" + name + "'");
  push_node(L, n);
  return 1;
}
int g_input(lua_State* L) {
  Graph& g = check_graph(L, 1);
  std::string name = luaL_checkstring(L, 2);
  NodeRef n = g.input(name);
  if (!n) raise(L, "the graph has no input '" + name + "'");
  push_node(L, n);
  return 1;
}

int g_index(lua_State* L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  Graph& g = check_graph(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  std::string key = lua_tostring(L, 2);
  if (key == "inputs") {
    lua_createtable(L, (int)g.inputs.size(), 0);
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      push_node(L, g.inputs[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
  }
  if (key == "outputs") {  // name → tensor
    lua_createtable(L, 0, (int)g.outputs.size());
    for (auto& [name, n] : g.outputs) {
      push_node(L, n);
      lua_setfield(L, -2, name.c_str());
    }
    return 1;
  }
  if (key == "output_names") {
    lua_createtable(L, (int)g.outputs.size(), 0);
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      lua_pushstring(L, g.outputs[i].first.c_str());
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
  }
  return 0;
}

const Function kModule[] = {
    {"graph", l_graph, "lathe.graph{ name = tensor, … } | lathe.graph{ {name, tensor}, … }", "a graph with named outputs (map form: sorted by name; array form: in order)"},
    {"load", l_load, "lathe.load(path [, {qdq_rules=false, qdq_sat16=true|false}])", "load a graph: .lua (returns a graph), .lathe text IR, .onnx (qdq_rules=false: Q/DQ as plain ops; qdq_sat16: ORT's saturating u8 x i8 pair sums on/off, default on for x86 without VNNI)"},
    {"parse", l_parse, "lathe.parse(text [, filename])", "a graph from .lathe text"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kMethods[] = {
    {"text", g_text, "g:text()", "the .lathe text of the graph"},
    {"save", g_save, "g:save(path)", "write .lathe text (atomic)"},
    {"summary", g_summary, "g:summary()", "node count by op, inputs, outputs"},
    {"verify", g_verify, "g:verify()", "true, or an error naming the first problem"},
    {"nodes", g_nodes, "g:nodes()", "nodes in topological order: {id, op, dtype, shape, inputs, provenance, …}"},
    {"node", g_node, "g:node(id)", "one node table by id"},
    {"output", g_output, "g:output(name)", "an output as a tensor"},
    {"input", g_input, "g:input(name)", "an input as a tensor"},
    {nullptr, nullptr, nullptr, nullptr},
};

Graph load_lua_graph(const std::string& path) {
  Engine e;
  ScriptError err;
  if (!e.run_file(path, 1, &err)) throw UserError(err.full());
  lua_State* L = e.L();
  Graph* g = test_udata<Graph>(L, -1, kGraphMT);
  if (!g)
    throw UserError(path + ": the script must return a graph (end it with `return lathe.graph{ y = y }`), got a " +
                    type_of(L, -1));
  return *g;
}

}  // namespace

void bind_graph(lua_State* L, int module) {
  new_type<Graph>(L, kGraphMT);
  int mt = lua_gettop(L);
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kMethods, "Graph:");
  push_guarded(L, g_index, nullptr, 1);
  lua_setfield(L, mt, "__index");
  push_guarded(L, g_summary);
  lua_setfield(L, mt, "__tostring");
  push_guarded(L, g_len);
  lua_setfield(L, mt, "__len");
  lua_pop(L, 1);
  register_functions(L, module, kModule, "lathe.");
}

void register_lua_graph_loader() {
  static bool done = false;
  if (done) return;
  done = true;
  register_graph_loader(".lua", load_lua_graph);
}

// Registers at start-up in every binary that links this object (the engine pulls it in).
static const bool kLoaderRegistered = (register_lua_graph_loader(), true);

}  // namespace lathe::script
