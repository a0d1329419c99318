// api_graph.cpp — graphs (load, parse, save, build from tensors, text, DOT), rule sets
// and rewrite sessions for the C API. Rule sets keep Lua functions, so loading them and
// stepping a session hold the shared Lua state's lock.
#include "capi/internal.h"
#include "core/ir/dot.h"
#include "core/ir/loader.h"
#include "core/ir/text.h"
#include "core/ir/verify.h"
#include "scripting/pretty.h"
#include "scripting/rules_lua.h"
#include "scripting/session_lua.h"

using namespace lathe;
using namespace lathe::capi;

namespace {

lathe_graph new_graph(Graph g) {
  auto* h = new lathe_graph_s;
  h->g = std::move(g);
  for (auto& [name, n] : h->g.outputs) h->output_names.push_back(name);
  return h;
}

lathe_rules new_rules(Ruleset rs) {
  auto* h = new lathe_rules_s;
  h->rs = std::move(rs);
  return h;
}

RewriteSession& session(lathe_rewrite s) {
  auto& h = need(s, "session");
  return need(h.s.get(), "session");
}

int64_t opt_int(const lathe_value* opts, size_t n, const char* key, int64_t dflt) {
  const lathe_value* v = find_opt(opts, n, key);
  if (!v || v->kind == LATHE_NIL) return dflt;
  if (v->kind == LATHE_INT || v->kind == LATHE_BOOL) return v->u.i;
  if (v->kind == LATHE_FLOAT) return (int64_t)v->u.f;
  throw UserError(std::string("option '") + key + "' must be a number");
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- graphs
lathe_status lathe_graph_load(const char* path, lathe_graph* out) {
  return guard([&] {
    std::string p = need(path, "path");
    need(out, "out");
    {
      std::lock_guard lk(lua_mutex());
      engine();  // registers the .lua and .onnx loaders
    }
    // a .lua file runs in a fresh Lua state of its own; the lock keeps Lua single-threaded
    bool lua = p.size() >= 4 && p.compare(p.size() - 4, 4, ".lua") == 0;
    std::unique_lock lk(lua_mutex(), std::defer_lock);
    if (lua) lk.lock();
    *out = new_graph(load_graph(p));
  });
}

lathe_status lathe_graph_parse(const char* text, const char* filename, lathe_graph* out) {
  return guard([&] {
    std::string t = need(text, "text");
    need(out, "out");
    *out = new_graph(parse_graph(t, filename ? filename : "<text>"));
  });
}

lathe_status lathe_graph_save(lathe_graph g, const char* path) {
  return guard([&] { save_graph(need(g, "graph").g, need(path, "path")); });
}

lathe_status lathe_graph_create(const char* const* names, const lathe_tensor* outputs, size_t n, lathe_graph* out) {
  return guard([&] {
    need(out, "out");
    if (n == 0) throw UserError("a graph needs at least one output");
    if (!names || !outputs) throw BadArg("names or outputs is NULL");
    std::vector<std::pair<std::string, NodeRef>> outs;
    for (size_t i = 0; i < n; ++i) {
      std::string name = need(names[i], "output name");
      if (name.empty()) throw UserError("output " + std::to_string(i) + " has an empty name");
      for (auto& [m, _] : outs)
        if (m == name) throw UserError("output name '" + name + "' is used twice");
      outs.push_back({name, need(outputs[i], "output tensor").n});
    }
    Graph g = Graph::from_outputs(std::move(outs));
    verify_or_throw(g);
    *out = new_graph(std::move(g));
  });
}

void lathe_graph_destroy(lathe_graph g) { delete g; }

lathe_status lathe_graph_size(lathe_graph g, size_t* nodes) {
  return guard([&] { need(nodes, "nodes") = need(g, "graph").g.size(); });
}
lathe_status lathe_graph_text(lathe_graph g, char** out) {
  return guard([&] { put_string(out, print_graph(need(g, "graph").g)); });
}
lathe_status lathe_graph_summary(lathe_graph g, char** out) {
  return guard([&] { put_string(out, script::graph_summary(need(g, "graph").g)); });
}
lathe_status lathe_graph_dot(lathe_graph g, char** out) {
  return guard([&] { put_string(out, graph_to_dot(need(g, "graph").g)); });
}
lathe_status lathe_graph_num_inputs(lathe_graph g, size_t* n) {
  return guard([&] { need(n, "n") = need(g, "graph").g.inputs.size(); });
}
lathe_status lathe_graph_num_outputs(lathe_graph g, size_t* n) {
  return guard([&] { need(n, "n") = need(g, "graph").g.outputs.size(); });
}
lathe_status lathe_graph_input(lathe_graph g, size_t i, lathe_tensor* out) {
  return guard([&] {
    auto& h = need(g, "graph");
    need(out, "out");
    if (i >= h.g.inputs.size()) throw BadArg("input " + std::to_string(i) + " is out of range");
    *out = new_tensor(h.g.inputs[i]);
  });
}
lathe_status lathe_graph_output(lathe_graph g, size_t i, const char** name, lathe_tensor* out) {
  return guard([&] {
    auto& h = need(g, "graph");
    if (i >= h.g.outputs.size()) throw BadArg("output " + std::to_string(i) + " is out of range");
    if (name) *name = h.output_names[i].c_str();
    if (out) *out = new_tensor(h.g.outputs[i].second);
  });
}

// ---------------------------------------------------------------- rules
lathe_status lathe_rules_builtin(const char* name, lathe_rules* out) {
  return guard([&] {
    std::string n = need(name, "name");
    need(out, "out");
    std::lock_guard lk(lua_mutex());
    lua_State* L = engine().L();
    *out = new_rules(script::load_rules_file(L, script::builtin_rules_path(n)));
  });
}

lathe_status lathe_rules_load(const char* path, lathe_rules* out) {
  return guard([&] {
    std::string p = need(path, "path");
    need(out, "out");
    std::lock_guard lk(lua_mutex());
    *out = new_rules(script::load_rules_file(engine().L(), p));
  });
}

lathe_status lathe_rules_parse(const char* source, const char* chunkname, lathe_rules* out) {
  return guard([&] {
    std::string src = need(source, "source");
    need(out, "out");
    std::string chunk = chunkname ? chunkname : "rules";
    std::lock_guard lk(lua_mutex());
    script::Engine& e = engine();
    lua_State* L = e.L();
    int top = lua_gettop(L);
    script::ScriptError err;
    if (!e.run_string(src, "=" + chunk, 1, &err)) throw UserError(err.message);
    try {
      if (lua_isnil(L, -1)) throw UserError(chunk + ": the rules must end with `return lathe.ruleset{…}` (or a table of rules)");
      script::push_guarded(L, [](lua_State* L) -> int {
        script::push_ruleset(L, script::check_rules_arg(L, 1, lua_tostring(L, 2)));
        return 1;
      });
      lua_pushvalue(L, -2);
      lua_pushstring(L, chunk.c_str());
      if (!e.call(2, 1, &err)) throw UserError(chunk + ": " + err.message);
      *out = new_rules(*script::test_ruleset(L, -1));
    } catch (...) {
      lua_settop(L, top);
      throw;
    }
    lua_settop(L, top);
  });
}

lathe_status lathe_rules_builtin_names(char** out) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    engine();
    std::string s;
    for (auto& n : script::builtin_rule_names()) s += n + "\n";
    put_string(out, s);
  });
}

lathe_status lathe_rules_count(lathe_rules r, size_t* n) {
  return guard([&] { need(n, "n") = need(r, "rules").rs.size(); });
}

void lathe_rules_destroy(lathe_rules r) {
  if (!r) return;
  std::lock_guard lk(lua_mutex());  // rules may release Lua references
  delete r;
}

// ---------------------------------------------------------------- rewrite sessions
lathe_status lathe_rewrite_create(lathe_graph g, const lathe_rules* rules, size_t nrules, const lathe_value* opts,
                                  size_t nopts, lathe_rewrite* out) {
  return guard([&] {
    auto& gh = need(g, "graph");
    if (nrules == 0) throw UserError("lathe.rewrite(g, rules): the rules are missing");
    if (!rules) throw BadArg("rules is NULL");
    std::vector<Ruleset> sets;
    for (size_t i = 0; i < nrules; ++i) sets.push_back(need(rules[i], "rules").rs);
    need(out, "out");
    if (nopts && !opts) throw BadArg("opts is NULL");
    for (size_t i = 0; i < nopts; ++i) {
      std::string k = opts[i].key ? opts[i].key : "";
      if (k != "check" && k != "max_steps" && k != "seed" && k != "batch")
        throw UserError("lathe.rewrite: unknown option '" + k + "' (check, max_steps, seed, batch)");
    }
    SessionOptions o;
    o.check = opt_int(opts, nopts, "check", 0) != 0;
    o.max_steps = (int)opt_int(opts, nopts, "max_steps", o.max_steps);
    o.seed = (uint64_t)opt_int(opts, nopts, "seed", 0);
    o.batch = opt_int(opts, nopts, "batch", 1) != 0;
    std::lock_guard lk(lua_mutex());
    auto* h = new lathe_rewrite_s;
    try {
      h->s = std::make_unique<RewriteSession>(gh.g, std::move(sets), o);
    } catch (...) {
      delete h;
      throw;
    }
    *out = h;
  });
}

void lathe_rewrite_destroy(lathe_rewrite s) {
  if (!s) return;
  std::lock_guard lk(lua_mutex());
  delete s;
}

lathe_status lathe_rewrite_step(lathe_rewrite s, int32_t n, int32_t* applied) {
  return guard([&] {
    if (n < 0) throw BadArg("step: n must be >= 0");
    std::lock_guard lk(lua_mutex());
    auto steps = session(s).step(n);
    if (applied) *applied = (int32_t)steps.size();
  });
}

lathe_status lathe_rewrite_back(lathe_rewrite s, int32_t n) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    RewriteSession& r = session(s);
    if (n < 0) throw BadArg("back: n must be >= 0");
    if (n > r.current()) throw UserError("back(" + std::to_string(n) + "): the session is at step " + std::to_string(r.current()));
    for (int i = 0; i < n; ++i) r.back();
  });
}

lathe_status lathe_rewrite_seek(lathe_rewrite s, int32_t k) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    session(s).seek(k);
  });
}

lathe_status lathe_rewrite_run(lathe_rewrite s, int32_t* steps) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    RunResult r = session(s).run();
    if (steps) *steps = r.steps;
  });
}

lathe_status lathe_rewrite_position(lathe_rewrite s, int32_t* current, int32_t* last) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    RewriteSession& r = session(s);
    if (current) *current = r.current();
    if (last) *last = r.last();
  });
}

lathe_status lathe_rewrite_graph(lathe_rewrite s, int32_t k, lathe_graph* out) {
  return guard([&] {
    need(out, "out");
    std::lock_guard lk(lua_mutex());
    RewriteSession& r = session(s);
    if (k < -1 || k > r.last()) throw UserError("step " + std::to_string(k) + " is out of range (0.." + std::to_string(r.last()) + ")");
    *out = new_graph(k < 0 ? r.graph() : r.graph_at(k));
  });
}

lathe_status lathe_rewrite_diff(lathe_rewrite s, int32_t a, int32_t b, char** out) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    RewriteSession& r = session(s);
    for (int k : {a, b})
      if (k < 0 || k > r.last()) throw UserError("step " + std::to_string(k) + " is out of range (0.." + std::to_string(r.last()) + ")");
    put_string(out, r.diff(a, b).text());
  });
}

lathe_status lathe_rewrite_check(lathe_rewrite s, int32_t* ok, char** message) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    CheckReport c = session(s).final_check();
    if (ok) *ok = c.ok;
    if (message) {
      std::string m = c.ok ? "" : "step " + std::to_string(c.bad_step) + " (rule " + c.rule + "): " + c.message;
      *message = dup_string(m);
    }
  });
}

lathe_status lathe_rewrite_history(lathe_rewrite s, char** out) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    std::string text;
    for (auto& st : session(s).history()) text += script::step_line(st) + "\n";
    put_string(out, text);
  });
}

lathe_status lathe_rewrite_stats(lathe_rewrite s, char** out) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    put_string(out, session(s).stats_text());
  });
}

lathe_status lathe_rewrite_breakpoint(lathe_rewrite s, const char* rule, int32_t on) {
  return guard([&] {
    std::string r = need(rule, "rule");
    std::lock_guard lk(lua_mutex());
    if (on) session(s).breakpoint(r);
    else session(s).clear_breakpoint(r);
  });
}

}  // extern "C"
