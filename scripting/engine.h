// engine.h — one sandboxed Lua 5.4 state with the `lathe` module loaded.
//
// The sandbox (DEPS.md §6): only base, table, string, math, utf8 and coroutine are opened;
// io, os, package/require, debug, dofile, loadfile and string.dump are absent; `load`
// accepts text chunks only; collectgarbage is limited to harmless options. Two limits keep
// a runaway script from taking the process down:
//   - an instruction budget per top-level call (a count hook; "instruction budget exceeded"),
//   - a memory cap (the allocator refuses past it; the hook reports a located error first).
// The same hook checks an interrupt flag that a SIGINT handler may set (REPL Ctrl-C).
//
// Every error comes back as a ScriptError value: `message` is "file:line: what" (the Lua
// caller's position is prefixed to C++ UserErrors raised inside bindings), `traceback` the
// Lua stack. Nothing here exits or aborts.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

struct lua_State;
struct lua_Debug;

namespace lathe::script {

struct Limits {
  uint64_t instructions = uint64_t(1) << 31;  // per top-level call; 0 = unlimited
  size_t memory = size_t(2) << 30;            // bytes the Lua heap may hold; 0 = unlimited
};

struct ScriptError {
  std::string message;    // "file:line: message" (one line or a few for diagnostics)
  std::string traceback;  // "stack traceback:\n\t…" (may be empty)
  std::string full() const { return traceback.empty() ? message : message + "\n" + traceback; }
};

class Engine {
 public:
  explicit Engine(Limits limits = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  lua_State* L() const { return L_; }
  const Limits& limits() const { return limits_; }
  void set_limits(const Limits& l) { limits_ = l; }
  size_t memory_used() const { return mem_used_; }

  // Where print() and the REPL write; defaults to stdout.
  std::function<void(std::string_view)> out;

  // Loads text (mode "t") under `chunkname` ("@file.lua" for files, "=stdin" for the REPL).
  // On a syntax error returns false and fills *err; leaves the function on the stack on success.
  bool load(std::string_view code, const std::string& chunkname, ScriptError* err);
  // Calls the function below nargs arguments with a fresh instruction budget; results stay
  // on the stack (LUA_MULTRET allowed). On error the stack is as before the function.
  // `thread`: run on this coroutine/thread's stack instead of the main one (callbacks).
  bool call(int nargs, int nresults, ScriptError* err, lua_State* thread = nullptr);
  // load + call. `nresults` values are left on the stack on success.
  bool run_string(std::string_view code, const std::string& chunkname, int nresults, ScriptError* err);
  bool run_file(const std::string& path, int nresults, ScriptError* err);

  // Signal-safe: makes the running script stop with "interrupted" at its next hook.
  static void request_interrupt();
  static void clear_interrupt();
  static bool interrupt_pending();

  static Engine* from(lua_State* L);  // the Engine owning L
  // Expires when the Engine is destroyed: C++ objects holding Lua references (rule
  // callbacks) check it before touching the state.
  std::weak_ptr<void> alive_token() const { return alive_; }
  // The thread (main state or coroutine) running the innermost guarded binding call;
  // callbacks from C++ into Lua run on it. Null when no binding is running.
  static lua_State*& active_thread();

 private:
  static void* alloc(void* ud, void* ptr, size_t osize, size_t nsize);
  static void hook(lua_State* L, lua_Debug* ar);
  void open_sandbox();

  lua_State* L_ = nullptr;
  Limits limits_;
  size_t mem_used_ = 0;
  int64_t budget_left_ = 0;
  bool budget_tripped_ = false;
  int depth_ = 0;  // nested call()s share the top-level call's budget
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

// Installs the SIGINT handler that calls Engine::request_interrupt (REPL); returns the
// previous handler state to restore on exit.
void install_interrupt_handler();
void remove_interrupt_handler();

}  // namespace lathe::script
