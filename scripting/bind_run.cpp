// bind_run.cpp — running and compiling graphs from Lua: lathe.run(g, inputs, opts) and
// lathe.compile(g, opts) with the Program methods p:kernels(), p:source(i), p:loop(i),
// p:asm(i), p:run(inputs), p:profile{iters=}, p:trace(path).
//
// lathe.run defaults to the reference interpreter (backend "interp", exact and always
// available); pass { backend = "llvm" } (or "c", "cuda") to compile and run. Inputs not
// given are filled with seeded random data when opts.seed is set; otherwise they are an
// error naming the input. Kernel indices are 1-based, as Lua arrays are.
#include <memory>

#include "backends/backend.h"
#include "core/interp/interp.h"
#include "core/loop/loop_print.h"
#include "core/runtime/random.h"
#include "scripting/binding.h"

namespace lathe::script {
namespace {

constexpr const char* kProgramMT = "lathe.Program";
struct ProgramBox {
  std::shared_ptr<Executable> exe;
  std::shared_ptr<CompiledProgram> compiled;
};

// { x = value, … } → TensorMap; Values only (lathe.tensor / lathe.randn / outputs).
TensorMap read_inputs(lua_State* L, int idx, const Graph& g, int opts) {
  TensorMap m;
  if (!lua_isnoneornil(L, idx)) {
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      if (lua_type(L, -2) != LUA_TSTRING) raise(L, "inputs: keys must be input names");
      std::string name = lua_tostring(L, -2);
      if (!g.input(name)) {
        std::string known;
        for (NodeRef in : g.inputs) known += (known.empty() ? "" : ", ") + in->attrs.name;
        raise(L, "inputs: the graph has no input '" + name + "' (inputs: " + (known.empty() ? "none" : known) + ")");
      }
      m[name] = check_value(L, lua_gettop(L));
      lua_pop(L, 1);
    }
  }
  if (lua_istable(L, opts)) {
    lua_getfield(L, opts, "seed");
    bool has_seed = !lua_isnil(L, -1);
    uint64_t seed = has_seed ? (uint64_t)check_int(L, -1, "seed") : 0;
    lua_pop(L, 1);
    if (has_seed) {
      Bindings b = bind_symbols(g, m);
      for (auto& [name, t] : random_inputs(g, seed, b))
        if (!m.count(name)) m[name] = t;
    }
  }
  return m;
}

void push_outputs(lua_State* L, const TensorMap& out, const TensorMap& updated) {
  lua_createtable(L, 0, (int)out.size());
  for (auto& [name, t] : out) {
    push_value(L, t);
    lua_setfield(L, -2, name.c_str());
  }
  if (!updated.empty()) {
    lua_createtable(L, 0, (int)updated.size());
    for (auto& [name, t] : updated) {
      push_value(L, t);
      lua_setfield(L, -2, name.c_str());
    }
    lua_setfield(L, -2, "updated");  // Assign targets; not an output name users can pick? documented
  }
}

// lathe.run(g, inputs [, {backend=, seed=}])
int l_run(lua_State* L) {
  Graph& g = check_graph(L, 1);
  std::string backend = opt_field_string(L, 3, "backend", "interp");
  TensorMap in = read_inputs(L, 2, g, 3);
  TensorMap updated, out;
  if (backend == "interp") {
    out = interpret(g, in, &updated);
  } else {
    Executable exe = compile_graph(g, backend);
    out = exe.run(in, &updated);
  }
  push_outputs(L, out, updated);
  return 1;
}

// lathe.compile(g [, {backend=}])
int l_compile(lua_State* L) {
  Graph& g = check_graph(L, 1);
  std::string backend = opt_field_string(L, 2, "backend", default_backend());
  Backend& b = get_backend(backend);
  auto why = b.available();
  if (!why.empty()) raise(L, "backend '" + backend + "' is not available here: " + why);
  auto exe = std::make_shared<Executable>(compile_graph(g, backend));
  ProgramBox box{exe, nullptr};
  // keep the compiled program around for source / asm
  new_udata<ProgramBox>(L, kProgramMT, box);
  return 1;
}

ProgramBox& check_program(lua_State* L, int idx) {
  if (auto* p = test_udata<ProgramBox>(L, idx, kProgramMT)) return *p;
  raise(L, "expected a program (lathe.compile), got a " + type_of(L, idx));
}
int kernel_index(lua_State* L, int idx, const Program& p) {
  int64_t k = check_int(L, idx, "kernel");
  if (k < 1 || k > p.num_kernels())
    raise(L, "kernel " + std::to_string(k) + " is out of range (1.." + std::to_string(p.num_kernels()) + ")");
  return (int)k - 1;
}

int p_kernels(lua_State* L) {
  const Program& p = check_program(L, 1).exe->program();
  lua_createtable(L, p.num_kernels(), 0);
  for (int i = 0; i < p.num_kernels(); ++i) {
    const Kernel& k = p.kg.kernels[i];
    lua_createtable(L, 0, 4);
    lua_pushstring(L, k.name.c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, k.kind.c_str());
    lua_setfield(L, -2, "kind");
    lua_pushinteger(L, (lua_Integer)k.nodes.size());
    lua_setfield(L, -2, "nodes");
    if (k.root) {
      lua_pushinteger(L, k.root->id);
      lua_setfield(L, -2, "root");
    }
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}
int p_source(lua_State* L) {
  ProgramBox& box = check_program(L, 1);
  int k = kernel_index(L, 2, box.exe->program());
  Backend& b = get_backend(box.exe->backend());
  lua_pushstring(L, b.render(box.exe->program(), k).c_str());
  return 1;
}
int p_loop(lua_State* L) {
  ProgramBox& box = check_program(L, 1);
  int k = kernel_index(L, 2, box.exe->program());
  lua_pushstring(L, loop::print_loop(box.exe->program().funcs[k]).c_str());
  return 1;
}
int p_run(lua_State* L) {
  ProgramBox& box = check_program(L, 1);
  TensorMap in = read_inputs(L, 2, box.exe->program().graph, 3), updated;
  TensorMap out = box.exe->run(in, &updated);
  push_outputs(L, out, updated);
  return 1;
}
int p_profile(lua_State* L) {
  ProgramBox& box = check_program(L, 1);
  int iters = (int)opt_field_number(L, 2, "iters", 20);
  if (lua_istable(L, 2)) lua_getfield(L, 2, "inputs");
  else lua_pushnil(L);
  TensorMap in = read_inputs(L, lua_gettop(L), box.exe->program().graph, 2);
  if (in.empty() || in.size() < box.exe->program().graph.inputs.size()) {
    Bindings bnd = bind_symbols(box.exe->program().graph, in);
    for (auto& [n, t] : random_inputs(box.exe->program().graph, 0, bnd))
      if (!in.count(n)) in[n] = t;
  }
  ProfileReport r = box.exe->profile(in, iters);
  lua_createtable(L, (int)r.kernels.size(), 2);
  lua_pushstring(L, r.table().c_str());
  lua_setfield(L, -2, "text");
  lua_pushnumber(L, r.total_ms);
  lua_setfield(L, -2, "total_ms");
  return 1;
}

const Function kModule[] = {
    {"run", l_run, "lathe.run(g, inputs [, {backend=\"interp\", seed=}])", "run a graph; returns {name = value}; backend defaults to the interpreter"},
    {"compile", l_compile, "lathe.compile(g [, {backend=}])", "compile to kernels (default backend: llvm when built)"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kMethods[] = {
    {"kernels", p_kernels, "p:kernels()", "the fused kernels: {name, kind, nodes, root}"},
    {"source", p_source, "p:source(k)", "generated source of kernel k (1-based)"},
    {"loop", p_loop, "p:loop(k)", "loop IR of kernel k"},
    {"run", p_run, "p:run(inputs)", "run the compiled program"},
    {"profile", p_profile, "p:profile{iters=20, inputs=}", "per-kernel timings; .text is the table"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_run(lua_State* L, int module) {
  new_type<ProgramBox>(L, kProgramMT);
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kMethods, "Program:");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  register_functions(L, module, kModule, "lathe.");
}

}  // namespace lathe::script
