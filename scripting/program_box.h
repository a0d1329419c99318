// program_box.h — the state behind a lathe.Program value (lathe.compile), shared by the
// Program methods (bind_run.cpp), the schedule handles of p:kernel(i) (bind_schedule.cpp)
// and the REPL's program commands (commands.cpp, progress.cpp).
//
// A schedule handle edits the loop IR of one kernel in place (exe->program().funcs[k])
// and marks the program stale; ready() then recompiles the whole program with the same
// backend before the next run, profile or assembly listing.
#pragma once
#include <lua.hpp>

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace lathe::script {

struct ProgramState {
  std::shared_ptr<Executable> exe;
  std::shared_ptr<CompiledProgram> compiled;   // what exe runs (null for whole-graph backends)
  std::vector<loop::LoopFunc> as_compiled;     // kernels as lathe.compile scheduled them (:reset())
  bool stale = false;                          // a kernel's schedule changed since `compiled`
  std::shared_ptr<ProfileReport> last_profile; // the last p:profile / :profile (for p:trace)

  Program& program() { return exe->program(); }
  // Recompiles when stale; returns the executable to run.
  Executable& ready();
};

// lathe.compile without Lua: compiles g with `backend` into a program state (UserError
// when the backend is unavailable or cannot run g). The desktop app calls it on a worker
// thread, then push_program on the UI thread. `tuned`: tuning records to apply (`lathe
// tune`; "" = the default records file when it exists, "none" = none); notes about records
// not applied go to *notes.
std::shared_ptr<ProgramState> compile_program_state(const Graph& g, const std::string& backend, const std::string& tuned = "",
                                                    std::vector<std::string>* notes = nullptr);
// Pushes a lathe.Program value for st.
void push_program(lua_State* L, std::shared_ptr<ProgramState> st);
// The lathe.Program userdata at idx (raises "expected a program …" otherwise).
std::shared_ptr<ProgramState> check_program(lua_State* L, int idx);
// A 0-based kernel index from the 1-based Lua argument at idx (raises when out of range).
int check_kernel_index(lua_State* L, int idx, const Program& p);
// Registers the lathe.Schedule type (bind_schedule.cpp) and pushes a handle for kernel k.
void bind_schedule(lua_State* L);
void push_schedule(lua_State* L, std::shared_ptr<ProgramState> st, int kernel);

}  // namespace lathe::script
