// internal.h — what the C API's files share: the handle structs behind lathe.h's opaque
// pointers, the error guard that turns C++ exceptions into status codes, the one Lua
// state (composites, .lua files and rules run there), and small conversions.
//
// Why Lua is linked: the composites' argument conventions (defaults, option tables, a
// number as either operand, axes as an int or a list) live in scripting/'s Tensor
// bindings, table-driven per family. lathe_call pushes its arguments into a Lua state and
// calls the same Tensor method / lathe.* function a script would, so the C API and every
// binding over it (python/) need no per-op code and gain each composite the day the Lua API
// does. .lua graph files and rule sets are Lua anyway. Compiling and running never touch Lua.
#pragma once
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/ir/graph.h"
#include "core/rewrite/session.h"
#include "include/lathe/lathe.h"
#include "scripting/engine.h"

struct lathe_graph_s {
  lathe::Graph g;
  std::vector<std::string> output_names;  // for lathe_graph_output's const char*
};
struct lathe_tensor_s {
  lathe::NodeRef n;
  std::atomic<int> refs{1};
  std::deque<std::string> strings;  // dim texts handed out (a deque keeps c_str() stable)
};
struct lathe_rules_s {
  lathe::Ruleset rs;
};
struct lathe_rewrite_s {
  std::unique_ptr<lathe::RewriteSession> s;
};

// The state behind a compiled program: the Executable (profile, program text) and the
// fast path of lathe_program_run, which binds caller buffers without copying.
struct lathe_program_s {
  std::string backend;
  std::shared_ptr<lathe::CompiledProgram> compiled;
  std::shared_ptr<lathe::Executable> exe;
  std::vector<std::string> output_names;
  std::mutex mu;  // one run / profile at a time
  // bound state of the fast path (capi/run.cpp)
  struct Bound {
    bool valid = false;
    lathe::Bindings dims;
    std::vector<int64_t> dim_values;
    lathe::MemoryPlan plan;
    std::shared_ptr<std::byte[]> arena;
    int64_t arena_capacity = 0;
    std::vector<std::shared_ptr<std::byte[]>> scratch;  // outputs the caller did not ask for
    std::vector<int64_t> scratch_bytes;
    std::vector<void*> ptrs, args;
    std::vector<int> input_buffer;                      // graph input -> buffer id (or -1)
  } bound;
  std::shared_ptr<lathe::ProfileReport> profile;
};

namespace lathe::capi {

struct BadArg : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Records the message for lathe_last_error and returns the status.
lathe_status fail(lathe_status st, const std::string& msg);
// Runs f, mapping exceptions to statuses (UserError → LATHE_ERROR, InternalError →
// LATHE_INTERNAL, std::bad_alloc → LATHE_ERROR "out of memory").
template <class F>
lathe_status guard(F&& f) {
  try {
    f();
    return LATHE_OK;
  } catch (const UserError& e) {
    return fail(LATHE_ERROR, e.what());
  } catch (const InternalError& e) {
    return fail(LATHE_INTERNAL, std::string("internal error: ") + e.what());
  } catch (const BadArg& e) {
    return fail(LATHE_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(LATHE_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(LATHE_ERROR, e.what());
  } catch (...) {
    return fail(LATHE_INTERNAL, "internal error: unknown exception");
  }
}
// Throws BadArg (→ LATHE_INVALID_ARGUMENT) when p is null.
template <class T>
T& need(T* p, const char* what) {
  if (!p) throw BadArg(std::string(what) + " is NULL");
  return *p;
}

// A C string argument (not dereferenced, unlike need for handles).
inline const char* need(const char* s, const char* what) {
  if (!s) throw BadArg(std::string(what) + " is NULL");
  return s;
}

// The process-wide Lua state, created on first use; hold the lock while using it.
script::Engine& engine();
std::recursive_mutex& lua_mutex();

char* dup_string(const std::string& s);
void put_string(char** out, const std::string& s);
lathe_tensor new_tensor(NodeRef n);

// DLPack descriptor → dtype / checked shape (UserError naming `what` when unsupported).
DType dl_dtype(const lathe_dltensor& t, const std::string& what);
std::vector<int64_t> dl_shape(const lathe_dltensor& t, const std::string& what);
void* dl_data(const lathe_dltensor& t);
// Keyed options → the value for key (nullptr when absent).
const lathe_value* find_opt(const lathe_value* opts, size_t n, const char* key);

}  // namespace lathe::capi
