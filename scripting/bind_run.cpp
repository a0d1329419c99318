// bind_run.cpp — running and compiling graphs from Lua: lathe.run(g, inputs, opts) and
// lathe.compile(g, opts) with the Program methods p:kernels(), p:source(i), p:loop(i),
// p:asm(i), p:run(inputs), p:profile{iters=}, p:trace(path) and p:kernel(i) (a schedule
// handle, bind_schedule.cpp). The state behind a program is a ProgramState (program_box.h).
//
// lathe.run defaults to the reference interpreter (backend "interp", exact and always
// available); pass { backend = "llvm" } (or "c", "cuda") to compile and run. Inputs not
// given are filled with seeded random data when opts.seed is set; otherwise they are an
// error naming the input. Kernel indices are 1-based, as Lua arrays are.
#include <cstdio>
#include <memory>

#include "backends/backend.h"
#include "core/interp/interp.h"
#include "core/loop/loop_print.h"
#include "core/runtime/random.h"
#include "core/tune/records.h"
#include "scripting/binding.h"
#include "scripting/program_box.h"

namespace lathe::script {
namespace {

constexpr const char* kProgramMT = "lathe.Program";
struct ProgramBox {
  std::shared_ptr<ProgramState> st;
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
      Graph given = g;  // the dims the given inputs bind (the others are made to fit them)
      given.inputs.clear();
      for (NodeRef in : g.inputs)
        if (m.count(in->attrs.name)) given.inputs.push_back(in);
      Bindings b = bind_symbols(given, m);
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

// lathe.compile(g [, {backend=, tuned=}]): compile_graph, keeping the backend's
// CompiledProgram (for p:asm) and the kernels as scheduled (for a schedule handle's
// :reset()). tuned = a records file of `lathe tune` (default: the cache dir's, "none": none).
int l_compile(lua_State* L) {
  Graph& g = check_graph(L, 1);
  std::string backend = opt_field_string(L, 2, "backend", default_backend());
  std::string tuned = opt_field_string(L, 2, "tuned", "");
  std::vector<std::string> notes;
  auto st = compile_program_state(g, backend, tuned, &notes);
  for (auto& n : notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  push_program(L, std::move(st));
  return 1;
}

ProgramState& state(lua_State* L, int idx) { return *check_program(L, idx); }

int p_kernels(lua_State* L) {
  ProgramState& st = state(L, 1);
  const Program& p = st.program();
  lua_createtable(L, p.num_kernels(), 0);
  for (int i = 0; i < p.num_kernels(); ++i) {
    const Kernel& k = p.kg.kernels[i];
    lua_createtable(L, 0, 5);
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
    bool changed = i < (int)st.as_compiled.size() && p.funcs[i].schedule_log != st.as_compiled[i].schedule_log;
    lua_pushboolean(L, changed);
    lua_setfield(L, -2, "rescheduled");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}
int p_source(lua_State* L) {
  ProgramState& st = state(L, 1);
  int k = check_kernel_index(L, 2, st.program());
  Backend& b = get_backend(st.exe->backend());
  std::string what = luaL_optstring(L, 3, "source");
  if (what != "source" && what != "optimized") raise(L, "p:source(k [, \"optimized\"]): got \"" + what + "\"");
  std::string text = what == "optimized" ? b.render_optimized(st.program(), k) : b.render(st.program(), k);
  if (text.empty()) text = "(backend '" + st.exe->backend() + "' has no optimizer stage: p:source(k) is what it compiles)\n";
  lua_pushstring(L, text.c_str());
  return 1;
}
int p_loop(lua_State* L) {
  ProgramState& st = state(L, 1);
  int k = check_kernel_index(L, 2, st.program());
  lua_pushstring(L, loop::print_loop(st.program().funcs[k]).c_str());
  return 1;
}
// p:asm(k): the backend's assembly of kernel k (llvm: the JIT's; c: the compiler's -S
// output; cuda: PTX), for the current schedule.
int p_asm(lua_State* L) {
  ProgramState& st = state(L, 1);
  int k = check_kernel_index(L, 2, st.program());
  st.ready();
  std::string text = st.compiled ? st.compiled->assembly(k) : "";
  if (text.empty())
    raise(L, "the " + st.exe->backend() + " backend cannot show assembly (p:source(" + std::to_string(k + 1) + ") shows its code)");
  lua_pushstring(L, text.c_str());
  return 1;
}
int p_run(lua_State* L) {
  ProgramState& st = state(L, 1);
  Executable& exe = st.ready();
  TensorMap in = read_inputs(L, 2, exe.program().graph, 3), updated;
  TensorMap out = exe.run(in, &updated);
  push_outputs(L, out, updated);
  return 1;
}

// Profiles with the options table at idx ({iters=, inputs=}); missing inputs are seeded
// random data. The report becomes the program's last profile.
const ProfileReport& run_profile(lua_State* L, ProgramState& st, int idx, int default_iters) {
  int iters = (int)opt_field_number(L, idx, "iters", default_iters);
  if (iters < 1) raise(L, "iters must be at least 1, got " + std::to_string(iters));
  Executable& exe = st.ready();
  const Graph& g = exe.program().graph;
  if (lua_istable(L, idx)) lua_getfield(L, idx, "inputs");
  else lua_pushnil(L);
  TensorMap in = read_inputs(L, lua_gettop(L), g, idx);
  lua_pop(L, 1);
  if (in.size() < g.inputs.size()) {
    Bindings bnd;  // symbolic dims from the inputs given (plain names like "B")
    for (NodeRef n : g.inputs)
      if (auto it = in.find(n->attrs.name); it != in.end() && it->second.shape().size() == n->shape.size())
        for (size_t d = 0; d < n->shape.size(); ++d)
          if (auto* e = n->shape[d].expr(); e && e->kind == SymKind::Var) bnd[e->name] = it->second.shape()[d];
    for (auto& [n, t] : random_inputs(g, 0, bnd))
      if (!in.count(n)) in[n] = t;
  }
  st.last_profile = std::make_shared<ProfileReport>(exe.profile(in, iters));
  return *st.last_profile;
}

void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushstring(L, v.c_str());
  lua_setfield(L, -2, key);
}

// p:profile{iters=20, inputs=, trace=}: {text=, total_ms=, backend=, [i] = per-kernel row}
int p_profile(lua_State* L) {
  ProgramState& st = state(L, 1);
  const ProfileReport& r = run_profile(L, st, 2, 20);
  std::string trace = opt_field_string(L, 2, "trace", "");
  if (!trace.empty()) r.write_trace(trace);
  lua_createtable(L, (int)r.kernels.size(), 4);
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelProfile& k = r.kernels[i];
    lua_createtable(L, 0, 12);
    set_string(L, "name", k.name);
    set_string(L, "kind", k.kind);
    set_number(L, "nodes", k.nodes);
    set_number(L, "calls", k.calls);
    set_number(L, "ms", k.median_ms);
    set_number(L, "time", k.median_ms);  // SPEC's name for it
    set_number(L, "min_ms", k.min_ms);
    set_number(L, "flops", k.flops);
    set_number(L, "bytes", k.bytes);
    set_number(L, "gflops", k.gflops);
    set_number(L, "gbps", k.gbps);
    set_number(L, "roof", k.roof);
    set_string(L, "bound", k.bound);
    if (!k.above_roof.empty()) set_string(L, "above_roof", k.above_roof);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  set_string(L, "text", r.table());
  set_number(L, "total_ms", r.total_ms);
  set_string(L, "backend", r.backend);
  return 1;
}

// p:trace(path [, {iters=5, inputs=}]): the Chrome trace of the last profile, or of a new
// one when there is none yet, a schedule changed since, or options are given.
int p_trace(lua_State* L) {
  ProgramState& st = state(L, 1);
  std::string path = luaL_checkstring(L, 2);
  if (!st.last_profile || st.stale || lua_istable(L, 3)) run_profile(L, st, 3, 5);
  st.last_profile->write_trace(path);
  lua_pushstring(L, path.c_str());
  return 1;
}

// p:kernel(i): a schedule handle for kernel i (bind_schedule.cpp)
int p_kernel(lua_State* L) {
  std::shared_ptr<ProgramState> st = check_program(L, 1);
  int k = check_kernel_index(L, 2, st->program());
  push_schedule(L, st, k);
  return 1;
}

const Function kModule[] = {
    {"run", l_run, "lathe.run(g, inputs [, {backend=\"interp\", seed=}])", "run a graph; returns {name = value}; backend defaults to the interpreter"},
    {"compile", l_compile, "lathe.compile(g [, {backend=}])", "compile to kernels (default backend: llvm when built)"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kMethods[] = {
    {"kernels", p_kernels, "p:kernels()", "the fused kernels: {name, kind, nodes, root, rescheduled}"},
    {"source", p_source, "p:source(k [, \"optimized\"])", "generated source of kernel k (1-based), with its current schedule; \"optimized\": after the backend's optimizer (llvm: O3 IR)"},
    {"loop", p_loop, "p:loop(k)", "loop IR of kernel k, with its current schedule"},
    {"asm", p_asm, "p:asm(k)", "assembly of kernel k: llvm (JIT), c (the compiler's -S output), cuda (PTX)"},
    {"run", p_run, "p:run(inputs [, {seed=}])", "run the compiled program (recompiled first if a schedule changed)"},
    {"profile", p_profile, "p:profile{iters=20, inputs=, trace=}",
     "per-kernel timings: p[i] = {name, kind, ms (= time), min_ms, flops, bytes, gflops, gbps, roof, bound, above_roof (why roof > 1)}; .text is the table"},
    {"trace", p_trace, "p:trace(path [, {iters=5, inputs=}])",
     "write a Chrome trace-event JSON (Perfetto) of the last profile, profiling first if there is none"},
    {"kernel", p_kernel, "p:kernel(k)", "schedule handle for kernel k: :split :reorder :tile :fuse :vectorize :unroll :parallel :cache :loops :reset"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

std::shared_ptr<ProgramState> check_program(lua_State* L, int idx) {
  if (auto* p = test_udata<ProgramBox>(L, idx, kProgramMT)) return p->st;
  raise(L, "expected a program (lathe.compile / :compile), got a " + type_of(L, idx));
}

int check_kernel_index(lua_State* L, int idx, const Program& p) {
  int64_t k = check_int(L, idx, "kernel");
  if (p.num_kernels() == 0) raise(L, "this program has no kernels (the interp backend runs the graph as a whole)");
  if (k < 1 || k > p.num_kernels())
    raise(L, "kernel " + std::to_string(k) + " is out of range (1.." + std::to_string(p.num_kernels()) + ")");
  return (int)k - 1;
}

std::shared_ptr<ProgramState> compile_program_state(const Graph& g, const std::string& backend, const std::string& tuned,
                                                    std::vector<std::string>* notes) {
  Backend& b = get_backend(backend);
  // can_compile, not available: cuda compiles (NVRTC) without a driver; running then says why not
  auto why = b.can_compile();
  if (!why.empty()) throw UserError("backend '" + backend + "' is not available here: " + why);
  if (std::string no = b.supports_graph(g); !no.empty()) throw UserError("backend '" + backend + "' cannot run " + no);
  auto st = std::make_shared<ProgramState>();
  Program prog = build_program(g);
  tune::ApplyReport rep = tune::apply_records(prog, tune::load_tuned(tuned), tune::target_of(backend));
  if (notes) notes->insert(notes->end(), rep.notes.begin(), rep.notes.end());
  st->compiled = b.compile(prog);
  st->as_compiled = prog.funcs;
  st->exe = std::make_shared<Executable>(std::move(prog), st->compiled, backend);
  return st;
}

void push_program(lua_State* L, std::shared_ptr<ProgramState> st) {
  new_udata<ProgramBox>(L, kProgramMT, ProgramBox{std::move(st)});
}

Executable& ProgramState::ready() {
  if (!stale) return *exe;
  Backend& b = get_backend(exe->backend());
  std::shared_ptr<CompiledProgram> cp = b.compile(exe->program());
  // a fresh Executable: its buffers and memory plan follow the new kernels
  exe = std::make_shared<Executable>(exe->program(), cp, exe->backend());
  compiled = std::move(cp);
  stale = false;
  return *exe;
}

void bind_run(lua_State* L, int module) {
  bind_schedule(L);
  new_type<ProgramBox>(L, kProgramMT);

  lua_newtable(L);
  register_functions(L, lua_gettop(L), kMethods, "Program:");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  register_functions(L, module, kModule, "lathe.");
}

}  // namespace lathe::script
