// rules_lua.h — rule sets between Lua and C++: pushing/reading lathe.Ruleset values,
// loading rule files (assets/rules/*.lua or a user's file) into a Lua state, and finding
// the assets directory. Used by bind_rules.cpp, bind_session.cpp, the command layer and
// `lathe rewrite`.
#pragma once
#include <string>
#include <vector>

#include "core/rewrite/rule.h"
#include "scripting/binding.h"

namespace lathe::script {

inline constexpr const char* kRulesetMT = "lathe.Ruleset";

void push_ruleset(lua_State* L, Ruleset rs);
Ruleset* test_ruleset(lua_State* L, int idx);
// A ruleset, a rule, or a table of rules/rulesets at idx, as one Ruleset named `name`.
Ruleset check_rules_arg(lua_State* L, int idx, const std::string& name);
// Runs a rule file in L's sandbox (its Lua functions stay in L); it must return a ruleset
// or a table of rules. UserError with the located message otherwise.
Ruleset load_rules_file(lua_State* L, const std::string& path);

// Where assets live: $LATHE_ASSETS, next to the executable (./assets, ../assets), or the
// source tree's assets/ baked in at build time.
std::string assets_dir();
std::vector<std::string> builtin_rule_names();
std::string builtin_rules_path(const std::string& name);  // UserError listing known names

}  // namespace lathe::script
