// engine.cpp — the sandboxed Lua state: allocator with a cap, count hook with an
// instruction budget and an interrupt flag, the restricted standard library, and
// error capture with tracebacks. See engine.h for the contract.
#include "scripting/engine.h"

#include <lua.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "scripting/binding.h"

namespace lathe::script {

namespace {

volatile std::sig_atomic_t g_interrupt = 0;
constexpr int kHookEvery = 1000;       // instructions between hook calls
const char* kEngineKey = "lathe.engine";

// Text-only load(chunk [, chunkname [, mode [, env]]]): mode is forced to "t".
int sandbox_load(lua_State* L) {
  size_t len = 0;
  const char* chunkname = luaL_optstring(L, 2, "=(load)");
  int env = !lua_isnone(L, 4) ? 4 : 0;
  int status;
  if (lua_type(L, 1) == LUA_TSTRING) {
    const char* s = lua_tolstring(L, 1, &len);
    status = luaL_loadbufferx(L, s, len, chunkname, "t");
  } else {
    // A reader function: concatenate its pieces first (simple and still text-only).
    luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (;;) {
      lua_pushvalue(L, 1);
      lua_call(L, 0, 1);
      if (lua_isnil(L, -1)) { lua_pop(L, 1); break; }
      if (!lua_isstring(L, -1)) return luaL_error(L, "reader function must return a string");
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    const char* s = lua_tolstring(L, -1, &len);
    status = luaL_loadbufferx(L, s, len, chunkname, "t");
  }
  if (status != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;  // nil, message
  }
  if (env) {
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

// collectgarbage restricted to options that cannot hurt the host.
int sandbox_collectgarbage(lua_State* L) {
  const char* opt = luaL_optstring(L, 1, "collect");
  if (!strcmp(opt, "collect")) { lua_gc(L, LUA_GCCOLLECT); lua_pushinteger(L, 0); return 1; }
  if (!strcmp(opt, "count")) {
    int kb = lua_gc(L, LUA_GCCOUNT), b = lua_gc(L, LUA_GCCOUNTB);
    lua_pushnumber(L, kb + b / 1024.0);
    return 1;
  }
  if (!strcmp(opt, "step")) { lua_pushboolean(L, lua_gc(L, LUA_GCSTEP, 0)); return 1; }
  if (!strcmp(opt, "isrunning")) { lua_pushboolean(L, lua_gc(L, LUA_GCISRUNNING)); return 1; }
  return luaL_error(L, "collectgarbage(\"%s\") is not available in the Lathe sandbox "
                       "(allowed: collect, count, step, isrunning)", opt);
}

// print() through Engine::out, so the REPL and the GUI console can capture it.
int sandbox_print(lua_State* L) {
  int n = lua_gettop(L);
  std::string line;
  for (int i = 1; i <= n; ++i) {
    size_t len;
    const char* s = luaL_tolstring(L, i, &len);
    if (i > 1) line += '\t';
    line.append(s, len);
    lua_pop(L, 1);
  }
  line += '\n';
  Engine* e = Engine::from(L);
  if (e && e->out) e->out(line);
  else std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

// Message handler: keeps the message, appends the traceback after a marker.
int message_handler(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

ScriptError split_error(const std::string& s) {
  ScriptError e;
  size_t p = s.find("\nstack traceback:");
  if (p == std::string::npos) {
    e.message = s;
  } else {
    e.message = s.substr(0, p);
    e.traceback = s.substr(p + 1);
  }
  return e;
}

void on_sigint(int) { g_interrupt = 1; }

}  // namespace

Engine::Engine(Limits limits) : limits_(limits) {
  L_ = lua_newstate(&Engine::alloc, this);
  if (!L_) throw std::runtime_error("cannot create a Lua state (out of memory)");
  lua_pushlightuserdata(L_, this);
  lua_setfield(L_, LUA_REGISTRYINDEX, kEngineKey);
  out = [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  open_sandbox();
  open_lathe(L_);
  lua_sethook(L_, &Engine::hook, LUA_MASKCOUNT, kHookEvery);
}

Engine::~Engine() {
  if (L_) lua_close(L_);
  alive_.reset();
}

lua_State*& Engine::active_thread() {
  static thread_local lua_State* active = nullptr;
  return active;
}

Engine* Engine::from(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, kEngineKey);
  auto* e = static_cast<Engine*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return e;
}

void* Engine::alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* e = static_cast<Engine*>(ud);
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    e->mem_used_ -= old;
    std::free(ptr);
    return nullptr;
  }
  // Hard cap: a little above the limit, so the hook can report the soft limit with a
  // location before allocation starts failing.
  size_t cap = e->limits_.memory;
  if (cap && nsize > old && e->mem_used_ - old + nsize > cap + cap / 8) return nullptr;
  void* p = std::realloc(ptr, nsize);
  if (!p) return nullptr;
  e->mem_used_ = e->mem_used_ - old + nsize;
  return p;
}

// Raises msg located at the running Lua function (level 0: inside a hook there is no
// C frame of our own, so luaL_where(L, 1) would name the caller instead).
[[noreturn]] static void hook_error(lua_State* L, const std::string& msg) {
  lua_Debug ar;
  std::string where;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    where = std::string(ar.short_src) + ":" + std::to_string(ar.currentline) + ": ";
  lua_pushstring(L, (where + msg).c_str());
  lua_error(L);
  std::abort();
}

void Engine::hook(lua_State* L, lua_Debug*) {
  Engine* e = from(L);
  if (!e) return;
  if (g_interrupt) {
    g_interrupt = 0;
    hook_error(L, "interrupted");
  }
  if (e->limits_.instructions) {
    e->budget_left_ -= kHookEvery;
    if (e->budget_left_ < 0) {
      // a handler (pcall's caller) gets a little room to run before the next trip
      e->budget_left_ = e->budget_tripped_ ? -1 : 100 * kHookEvery;
      e->budget_tripped_ = true;
      hook_error(L, "instruction budget exceeded (" + std::to_string(e->limits_.instructions) +
                        " instructions; raise it with --max-instructions)");
    }
  }
  if (e->limits_.memory && e->mem_used_ > e->limits_.memory) {
    lua_gc(L, LUA_GCCOLLECT);
    if (e->mem_used_ > e->limits_.memory)
      hook_error(L, "memory limit exceeded (" + std::to_string(e->limits_.memory >> 20) +
                        " MiB; raise it with --max-memory)");
  }
}

void Engine::open_sandbox() {
  static const luaL_Reg libs[] = {
      {LUA_GNAME, luaopen_base},          {LUA_TABLIBNAME, luaopen_table},
      {LUA_STRLIBNAME, luaopen_string},   {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8},    {LUA_COLIBNAME, luaopen_coroutine},
  };
  for (const auto& lib : libs) {
    luaL_requiref(L_, lib.name, lib.func, 1);
    lua_pop(L_, 1);
  }
  for (const char* name : {"dofile", "loadfile", "require", "module"}) {
    lua_pushnil(L_);
    lua_setglobal(L_, name);
  }
  lua_pushcfunction(L_, sandbox_load);
  lua_setglobal(L_, "load");
  lua_pushcfunction(L_, sandbox_collectgarbage);
  lua_setglobal(L_, "collectgarbage");
  lua_pushcfunction(L_, sandbox_print);
  lua_setglobal(L_, "print");
  lua_getglobal(L_, "string");
  lua_pushnil(L_);
  lua_setfield(L_, -2, "dump");
  lua_pop(L_, 1);
}

bool Engine::load(std::string_view code, const std::string& chunkname, ScriptError* err) {
  int st = luaL_loadbufferx(L_, code.data(), code.size(), chunkname.c_str(), "t");
  if (st == LUA_OK) return true;
  if (err) *err = split_error(lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "syntax error");
  lua_pop(L_, 1);
  return false;
}

bool Engine::call(int nargs, int nresults, ScriptError* err, lua_State* thread) {
  lua_State* L_ = thread ? thread : this->L_;  // the stack to call on
  int fn = lua_gettop(L_) - nargs;
  lua_pushcfunction(L_, message_handler);
  lua_insert(L_, fn);
  if (depth_ == 0) {
    budget_left_ = limits_.instructions ? (int64_t)std::min<uint64_t>(limits_.instructions, INT64_MAX / 2) : 0;
    budget_tripped_ = false;
  }
  ++depth_;
  int st = lua_pcall(L_, nargs, nresults, fn);
  --depth_;
  lua_remove(L_, fn);
  if (st == LUA_OK) return true;
  std::string msg;
  if (st == LUA_ERRMEM) {
    msg = "not enough memory (the Lua heap is capped at " + std::to_string(limits_.memory >> 20) +
          " MiB; raise it with --max-memory)";
  } else {
    const char* s = lua_tostring(L_, -1);
    msg = s ? s : "(error object is not a string)";
  }
  lua_pop(L_, 1);
  lua_gc(L_, LUA_GCCOLLECT);
  if (err) *err = split_error(msg);
  return false;
}

bool Engine::run_string(std::string_view code, const std::string& chunkname, int nresults, ScriptError* err) {
  if (!load(code, chunkname, err)) return false;
  return call(0, nresults, err);
}

bool Engine::run_file(const std::string& path, int nresults, ScriptError* err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (err) *err = ScriptError{path + ": cannot open file: " + std::strerror(errno), ""};
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string code = ss.str();
  if (code.size() > 0 && code[0] == '\x1b') {
    if (err) *err = ScriptError{path + ": binary chunks are not accepted (text Lua only)", ""};
    return false;
  }
  if (code.rfind("#", 0) == 0) code.insert(0, "--");  // a #! line stays a comment, lines keep their numbers
  return run_string(code, "@" + path, nresults, err);
}

void Engine::request_interrupt() { g_interrupt = 1; }
void Engine::clear_interrupt() { g_interrupt = 0; }
bool Engine::interrupt_pending() { return g_interrupt != 0; }

namespace {
struct sigaction g_old_sigint;
bool g_handler_installed = false;
}  // namespace

void install_interrupt_handler() {
  if (g_handler_installed) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, &g_old_sigint);
  g_handler_installed = true;
}

void remove_interrupt_handler() {
  if (!g_handler_installed) return;
  sigaction(SIGINT, &g_old_sigint, nullptr);
  g_handler_installed = false;
}

}  // namespace lathe::script
