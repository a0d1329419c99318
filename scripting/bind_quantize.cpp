// bind_quantize.cpp — the Lua side of the quantize pass (core/rewrite/quantize.h):
//   lathe.quantize(g [, {mode="dynamic", per_channel=false, block=32}])
//       -> a new graph, and {quantized=, skipped=, weight_bytes_before=, weight_bytes_after=, notes={…}}
//   lathe.quantization_error(g_float, g_quant [, seed=0 [, backend]])
//       -> {{output=, rel_max=, cosine=}, …} on seeded inputs, run on backend (default: the
//          default backend; "interp": the interpreter)
#include "backends/backend.h"
#include "core/ir/diag.h"
#include "core/rewrite/quantize.h"
#include "scripting/binding.h"

namespace lathe::script {

namespace {

int l_quantize(lua_State* L) {
  Graph g = check_graph(L, 1);
  QuantizeOptions o;
  if (lua_istable(L, 2)) {
    o.mode = parse_quant_mode(opt_field_string(L, 2, "mode", "dynamic"));
    o.per_channel = opt_field_bool(L, 2, "per_channel", false);
    o.block = static_cast<int64_t>(opt_field_number(L, 2, "block", 32));
  } else if (!lua_isnoneornil(L, 2)) {
    raise(L, "lathe.quantize(g [, opts]): opts must be a table");
  }
  QuantizeResult r = quantize_graph(g, o);
  push_graph(L, r.graph);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, r.quantized);
  lua_setfield(L, -2, "quantized");
  lua_pushinteger(L, r.skipped);
  lua_setfield(L, -2, "skipped");
  lua_pushinteger(L, r.weight_bytes_before);
  lua_setfield(L, -2, "weight_bytes_before");
  lua_pushinteger(L, r.weight_bytes_after);
  lua_setfield(L, -2, "weight_bytes_after");
  lua_createtable(L, static_cast<int>(r.notes.size()), 0);
  for (size_t i = 0; i < r.notes.size(); ++i) {
    lua_pushstring(L, r.notes[i].c_str());
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "notes");
  return 2;
}

int l_quantization_error(lua_State* L) {
  Graph a = check_graph(L, 1), b = check_graph(L, 2);
  uint64_t seed = lua_isinteger(L, 3) ? static_cast<uint64_t>(lua_tointeger(L, 3)) : 0;
  std::string backend = luaL_optstring(L, 4, default_backend().c_str());
  Evaluator eval;   // the interpreter unless another backend is named
  if (backend != "interp") {
    get_backend(backend);   // UserError naming the known backends
    eval = [backend](const Graph& gg, const TensorMap& in) { return compile_graph(gg, backend).run(in); };
  }
  auto errs = quantization_error(a, b, seed, eval);
  lua_createtable(L, static_cast<int>(errs.size()), 0);
  for (size_t i = 0; i < errs.size(); ++i) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, errs[i].output.c_str());
    lua_setfield(L, -2, "output");
    lua_pushnumber(L, errs[i].rel_max);
    lua_setfield(L, -2, "rel_max");
    lua_pushnumber(L, errs[i].cosine);
    lua_setfield(L, -2, "cosine");
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

const Function kFns[] = {
    {"quantize", l_quantize, "lathe.quantize(g [, {mode=\"dynamic\", per_channel=false, block=32}])",
     "a new graph with the constant-weight matmuls quantized (dynamic | weight-int8 | weight-int4), and a table "
     "{quantized, skipped, weight_bytes_before, weight_bytes_after, notes}"},
    {"quantization_error", l_quantization_error, "lathe.quantization_error(g_float, g_quant [, seed=0 [, backend]])",
     "per output {output, rel_max = max|d|/max|ref|, cosine} on seeded inputs, run on backend (default: the default "
     "backend; \"interp\": the interpreter)"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_quantize(lua_State* L, int module) { register_functions(L, module, kFns, "lathe."); }

}  // namespace lathe::script
