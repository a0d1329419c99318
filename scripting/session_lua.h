// session_lua.h — rewrite sessions between Lua and C++ (bind_session.cpp): the step
// one-liner shared by Lua, the REPL and `lathe rewrite`, and session userdata access.
#pragma once
#include <memory>
#include <string>

#include "core/rewrite/session.h"
#include "scripting/binding.h"

namespace lathe::script {

// "#12 fold-add @%41: -3 +1" (sweeps add "(rule×n, …)").
std::string step_line(const StepInfo& st);
void push_step(lua_State* L, const StepInfo& st);
void push_run_result(lua_State* L, const RunResult& r);  // s:run()'s result table
void push_session(lua_State* L, std::shared_ptr<RewriteSession> s);
std::shared_ptr<RewriteSession> test_session(lua_State* L, int idx);

}  // namespace lathe::script
