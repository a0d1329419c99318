// bind_schedule.cpp — schedules from Lua: the handle p:kernel(i) returns and its methods,
// which apply the schedule primitives of core/loop/transform.h to kernel i's loop IR:
//
//   local k = p:kernel(1)
//   k:split("i1", 16):vectorize("i1_i"):parallel("i0")   -- methods return the handle
//   for _, l in ipairs(k:loops()) do print(l.name, l.extent) end
//   print(p:loop(1)); p:run(inputs)                       -- re-rendered, recompiled
//   k:reset()                                             -- back to lathe.compile's schedule
//
// An illegal request raises a Lua error naming the reason and leaves the kernel as it was.
// Any change marks the program stale: the next p:run / p:profile / p:asm recompiles it.
#include <algorithm>
#include <functional>

#include "core/loop/loop_print.h"
#include "core/loop/lower.h"
#include "core/loop/row_reduce.h"
#include "core/loop/split_k.h"
#include "core/loop/transform.h"
#include "core/loop/transform_jam.h"
#include "core/tune/space.h"
#include "scripting/binding.h"
#include "scripting/program_box.h"

namespace lathe::script {
namespace {

constexpr const char* kScheduleMT = "lathe.Schedule";
struct ScheduleBox {
  std::shared_ptr<ProgramState> st;
  int kernel;
};

ScheduleBox& check_schedule(lua_State* L, int idx) {
  if (auto* s = test_udata<ScheduleBox>(L, idx, kScheduleMT)) return *s;
  raise(L, "expected a schedule handle (p:kernel(i)), got a " + type_of(L, idx));
}

loop::LoopFunc& func(ScheduleBox& s) { return s.st->program().funcs.at(s.kernel); }

std::string loop_arg(lua_State* L, int idx, const char* what) {
  if (lua_type(L, idx) != LUA_TSTRING)
    raise(L, std::string(what) + ": expected a loop name (a string such as \"i0\"; see :loops()), got a " + type_of(L, idx));
  return lua_tostring(L, idx);
}

// Applies `edit` to the kernel; on a refusal restores it and raises the reason. Returns the
// handle (for chaining).
int apply(lua_State* L, const std::function<void(loop::LoopFunc&)>& edit) {
  ScheduleBox& s = check_schedule(L, 1);
  loop::LoopFunc& f = func(s);
  if (f.kind == "extern") raise(L, "kernel " + f.name + " is a library call: it has no loops to schedule");
  loop::LoopFunc backup = f;
  std::string why;
  try {
    edit(f);
  } catch (const std::exception& e) {
    why = exception_text(e);
  }
  if (!why.empty()) {
    f = std::move(backup);
    raise(L, why);
  }
  s.st->stale = true;
  lua_settop(L, 1);
  return 1;
}

int s_split(lua_State* L) {
  std::string l = loop_arg(L, 2, "split");
  int64_t factor = check_int(L, 3, "factor");
  return apply(L, [&](loop::LoopFunc& f) { loop::split(f, l, factor); });
}

// :reorder(a, b, …): the loops in the order wanted, outermost first. They must lie on one
// chain of perfectly nested loops; loops of the chain not named keep their places.
int s_reorder(lua_State* L) {
  int n = lua_gettop(L) - 1;
  if (n < 2) raise(L, "reorder: name at least two loops, outermost first (see :loops())");
  std::vector<std::string> want;
  for (int i = 0; i < n; ++i) want.push_back(loop_arg(L, i + 2, "reorder"));
  return apply(L, [&](loop::LoopFunc& f) {
    std::vector<std::string> order = loop::loop_names(f), chain;
    for (auto& w : want) {
      if (std::count(want.begin(), want.end(), w) > 1) throw UserError("reorder: loop " + w + " is named twice");
      if (!std::count(order.begin(), order.end(), w)) loop::split(f, w, 1);  // raises "no such loop" with the list
    }
    for (auto& o : order)  // the named loops in their current (pre-order) order
      if (std::count(want.begin(), want.end(), o)) chain.push_back(o);
    // the chain from the first to the last named loop, each loop the only statement of the previous
    const loop::Stmt* cur = nullptr;
    loop::walk(f.body, [&](const loop::Stmt& st) {
      if (!cur && st.kind == loop::StmtKind::For && st.var == chain[0]) cur = &st;
      return !cur;
    });
    std::vector<std::string> full{cur->var};
    while (cur->var != chain.back()) {
      if (cur->body.size() != 1 || cur->body[0].kind != loop::StmtKind::For) {
        bool inside = false;
        loop::walk(cur->body, [&](const loop::Stmt& c) { inside |= c.kind == loop::StmtKind::For && c.var == chain.back(); return !inside; });
        throw UserError("reorder: " + (inside ? "loops " + chain.front() + " … " + chain.back() + " are not perfectly nested (" + cur->var +
                                                    "'s body holds more than one loop)"
                                              : "loop " + chain.back() + " is not inside " + chain.front()));
      }
      cur = &cur->body[0];
      full.push_back(cur->var);
    }
    for (auto& c : chain)
      if (!std::count(full.begin(), full.end(), c))
        throw UserError("reorder: loop " + c + " is not on the nest " + chain.front() + " … " + chain.back());
    // target: named loops take the named slots in the wanted order
    std::vector<std::string> target = full;
    size_t w = 0;
    for (auto& t : target)
      if (std::count(want.begin(), want.end(), t)) t = want[w++];
    // bubble the current chain into the target with adjacent swaps
    std::vector<std::string> now = full;
    auto rank = [&](const std::string& v) { return std::find(target.begin(), target.end(), v) - target.begin(); };
    for (size_t i = 0; i < now.size(); ++i)
      for (size_t j = 0; j + 1 < now.size() - i; ++j)
        if (rank(now[j]) > rank(now[j + 1])) {
          loop::reorder(f, now[j], now[j + 1]);
          std::swap(now[j], now[j + 1]);
        }
  });
}

int s_tile(lua_State* L) {
  std::string a = loop_arg(L, 2, "tile"), b = loop_arg(L, 3, "tile");
  int64_t fa = check_int(L, 4, "factor"), fb = check_int(L, 5, "factor");
  return apply(L, [&](loop::LoopFunc& f) { loop::tile(f, a, b, fa, fb); });
}

int s_fuse(lua_State* L) {
  std::string a = loop_arg(L, 2, "fuse"), b = loop_arg(L, 3, "fuse");
  return apply(L, [&](loop::LoopFunc& f) { loop::fuse(f, a, b); });
}

// :vectorize(loop [, width]): with a width, split by it first and vectorize the inner loop
int s_vectorize(lua_State* L) {
  std::string l = loop_arg(L, 2, "vectorize");
  int64_t width = lua_isnoneornil(L, 3) ? 0 : check_int(L, 3, "width");
  if (!lua_isnoneornil(L, 3) && width < 2) raise(L, "vectorize " + l + ": width must be at least 2, got " + std::to_string(width));
  return apply(L, [&](loop::LoopFunc& f) {
    if (width == 0) return loop::vectorize(f, l);
    loop::split(f, l, width);  // logs "split l by w -> l_o, l_i"
    std::string inner = f.schedule_log.back().substr(f.schedule_log.back().rfind(", ") + 2);
    loop::vectorize(f, inner);
  });
}

// :peel(loop, width [, "masked"]): a vector body of whole `width`-lane vectors, then the tail
int s_peel(lua_State* L) {
  std::string l = loop_arg(L, 2, "peel");
  int64_t width = check_int(L, 3, "width");
  bool masked = false;
  if (!lua_isnoneornil(L, 4)) {
    std::string t = luaL_checkstring(L, 4);
    if (t != "masked" && t != "scalar") raise(L, "peel " + l + ": the tail is \"scalar\" or \"masked\", got '" + t + "'");
    masked = t == "masked";
  }
  return apply(L, [&](loop::LoopFunc& f) { loop::peel(f, l, width, masked); });
}

int s_unroll(lua_State* L) {
  std::string l = loop_arg(L, 2, "unroll");
  int64_t n = lua_isnoneornil(L, 3) ? 0 : check_int(L, 3, "factor");
  return apply(L, [&](loop::LoopFunc& f) { loop::unroll(f, l, (int)n); });
}

// :jam(loop, r): row blocking, r iterations of an output loop together (transform_jam.h)
int s_jam(lua_State* L) {
  std::string l = loop_arg(L, 2, "jam");
  int64_t n = check_int(L, 3, "factor");
  return apply(L, [&](loop::LoopFunc& f) { loop::jam(f, l, (int)n); });
}

int s_parallel(lua_State* L) {
  std::string l = loop_arg(L, 2, "parallel");
  return apply(L, [&](loop::LoopFunc& f) { loop::parallel(f, l); });
}

// :rows(loop [, block=256]): reduction rows (core/loop/row_reduce.h)
int s_rows(lua_State* L) {
  std::string l = loop_arg(L, 2, "rows");
  int64_t block = lua_isnoneornil(L, 3) ? 256 : check_int(L, 3, "block");
  return apply(L, [&](loop::LoopFunc& f) { loop::reduce_rows(f, l, block); });
}

// :split_k(loop [, parts=2]): the reduction split into per-thread parts plus a combine (core/loop/split_k.h)
int s_split_k(lua_State* L) {
  std::string l = loop_arg(L, 2, "split_k");
  int64_t parts = lua_isnoneornil(L, 3) ? 2 : check_int(L, 3, "parts");
  return apply(L, [&](loop::LoopFunc& f) { loop::split_k(f, l, parts); });
}

// :cache(buffer [, loop="root"])
int s_cache(lua_State* L) {
  if (lua_type(L, 2) != LUA_TSTRING)
    raise(L, "cache: expected a buffer name (\"in0\", \"out\": the kernel's parameters in p:loop(i)), got a " + type_of(L, 2));
  std::string buf = lua_tostring(L, 2);
  std::string at = lua_isnoneornil(L, 3) ? "root" : loop_arg(L, 3, "cache");
  return apply(L, [&](loop::LoopFunc& f) { loop::cache(f, at, buf); });
}

// :replay{lines…}: the kernel as a schedule log (a `lathe tune` record's "schedule", or
// :log()'s lines) makes it, from the plain loops (or the packed GEMM when the first line is
// "matmul mr=… nr=… lanes=… kc=… mc=… nc=…")
int s_replay(lua_State* L) {
  ScheduleBox& s = check_schedule(L, 1);
  if (!lua_istable(L, 2)) raise(L, "replay: expected a list of schedule lines (strings), got a " + type_of(L, 2));
  std::vector<std::string> lines;
  for (lua_Integer i = 1;; ++i) {
    int t = lua_rawgeti(L, 2, i);
    if (t == LUA_TNIL) { lua_pop(L, 1); break; }
    if (t != LUA_TSTRING) raise(L, "replay: line " + std::to_string(i) + " is a " + type_of(L, -1) + ", not a string");
    lines.push_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  const Program& p = s.st->program();
  int k = s.kernel;
  return apply(L, [&](loop::LoopFunc& f) {
    loop::LoopFunc r = tune::replay(p.kg, k, lines);
    r.name = f.name;
    f = std::move(r);
  });
}

// :loops() → { {name=, extent=, depth=, parallel=, vectorize=, unroll=, reduce=, note=}, … }
int s_loops(lua_State* L) {
  ScheduleBox& s = check_schedule(L, 1);
  const loop::LoopFunc& f = func(s);
  lua_newtable(L);
  int i = 0;
  std::function<void(const std::vector<loop::Stmt>&, int)> visit = [&](const std::vector<loop::Stmt>& body, int depth) {
    for (const loop::Stmt& st : body) {
      if (st.kind == loop::StmtKind::For) {
        lua_createtable(L, 0, 8);
        lua_pushstring(L, st.var.c_str());
        lua_setfield(L, -2, "name");
        if (loop::is_const(st.extent)) lua_pushinteger(L, st.extent->i);
        else lua_pushstring(L, loop::print_expr(st.extent, &f).c_str());
        lua_setfield(L, -2, "extent");
        lua_pushinteger(L, depth);
        lua_setfield(L, -2, "depth");
        lua_pushboolean(L, st.annot.parallel);
        lua_setfield(L, -2, "parallel");
        lua_pushboolean(L, st.annot.vectorize);
        lua_setfield(L, -2, "vectorize");
        lua_pushinteger(L, st.annot.unroll);
        lua_setfield(L, -2, "unroll");
        lua_pushboolean(L, !st.reduces.empty());
        lua_setfield(L, -2, "reduce");
        lua_pushstring(L, st.note.c_str());
        lua_setfield(L, -2, "note");
        lua_rawseti(L, -2, ++i);
      }
      visit(st.body, depth + (st.kind == loop::StmtKind::For));
      visit(st.else_body, depth + (st.kind == loop::StmtKind::For));
    }
  };
  visit(f.body, 0);
  return 1;
}

// :log() → the primitives applied, in order
int s_log(lua_State* L) {
  ScheduleBox& s = check_schedule(L, 1);
  const auto& log = func(s).schedule_log;
  lua_createtable(L, (int)log.size(), 0);
  for (size_t i = 0; i < log.size(); ++i) {
    lua_pushstring(L, log[i].c_str());
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

// :reset([plain]): back to the schedule lathe.compile gave; plain = true: the unscheduled
// loops straight from lowering (a blank slate for hand scheduling)
int s_reset(lua_State* L) {
  ScheduleBox& s = check_schedule(L, 1);
  bool plain = lua_toboolean(L, 2);
  Program& p = s.st->program();
  if (plain) reset_kernel(p, s.kernel);
  else p.funcs.at(s.kernel) = s.st->as_compiled.at(s.kernel);
  s.st->stale = true;
  lua_settop(L, 1);
  return 1;
}

int s_tostring(lua_State* L) {
  ScheduleBox& s = check_schedule(L, 1);
  const loop::LoopFunc& f = func(s);
  std::string t = "schedule of kernel " + std::to_string(s.kernel + 1) + " (" + f.name + ", " + f.kind + "): " +
                  std::to_string(loop::loop_names(f).size()) + " loops, " + std::to_string(f.schedule_log.size()) + " primitives";
  lua_pushstring(L, t.c_str());
  return 1;
}

const Function kMethods[] = {
    {"split", s_split, "k:split(loop, factor)", "loop → loop_o (outer) × loop_i (inner, `factor` iterations); a remainder gets a guard"},
    {"reorder", s_reorder, "k:reorder(loop, loop, …)", "put perfectly nested loops in this order, outermost first"},
    {"tile", s_tile, "k:tile(a, b, fa, fb)", "split a by fa and b by fb, then order a_o, b_o, a_i, b_i"},
    {"fuse", s_fuse, "k:fuse(outer, inner)", "merge two perfectly nested loops into one (outer_inner)"},
    {"vectorize", s_vectorize, "k:vectorize(loop [, width])", "SIMD across an innermost loop; with width: split by it, vectorize loop_i"},
    {"peel", s_peel, "k:peel(loop, width [, \"masked\"])",
     "vectorize loop as whole vectors of width lanes (no interleave), then the remainder: scalar, or one masked vector"},
    {"unroll", s_unroll, "k:unroll(loop [, n])", "unroll by n (0 or none: fully, constant extents up to 64)"},
    {"jam", s_jam, "k:jam(loop, r)", "row blocking: r iterations of an output loop together, its inner loops fused (2..8)"},
    {"parallel", s_parallel, "k:parallel(loop)", "spread the loop's iterations over threads (refused for reductions and racing stores)"},
    {"rows", s_rows, "k:rows(loop [, block=256])",
     "reduction rows: the reductions inside output loop `loop` run around it, over a row of `block` accumulators"},
    {"split_k", s_split_k, "k:split_k(loop [, parts=2])",
     "reduction loop `loop` split into `parts` per-thread partial results (a parallel loop) plus a combine"},
    {"cache", s_cache, "k:cache(buffer [, loop=\"root\"])",
     "stage the tile of buffer (\"in0\", \"out\") one iteration of loop touches in a local array; written buffers are written back"},
    {"replay", s_replay, "k:replay{line, …}",
     "rebuild the kernel from a schedule log (a `lathe tune` record's schedule; lines as :log() prints them)"},
    {"loops", s_loops, "k:loops()", "the loops, outermost first: {name, extent, depth, parallel, vectorize, unroll, reduce, note}"},
    {"log", s_log, "k:log()", "the schedule primitives applied to this kernel, in order"},
    {"reset", s_reset, "k:reset([plain])", "back to lathe.compile's schedule; plain = true: the unscheduled loops (a matmul: its plain reduction, not the packed GEMM nest)"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_schedule(lua_State* L) {
  new_type<ScheduleBox>(L, kScheduleMT);
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kMethods, "Schedule:");
  lua_setfield(L, -2, "__index");
  push_guarded(L, s_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

void push_schedule(lua_State* L, std::shared_ptr<ProgramState> st, int kernel) {
  new_udata<ScheduleBox>(L, kScheduleMT, ScheduleBox{std::move(st), kernel});
}

}  // namespace lathe::script
