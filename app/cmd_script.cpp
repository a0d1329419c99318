// cmd_script.cpp — `lathe SCRIPT.lua [ARGS…]` (also `lathe script [OPTIONS] SCRIPT.lua
// [ARGS…]`): runs a Lua script in the sandbox with the `lathe` module loaded. The global
// `arg` holds ARGS (arg[0] is the script, as with lua.c). Exit code 0 unless the script
// errors: then the located message and its traceback go to stderr and the code is 1.
//
// Limits: --max-instructions N (per top-level call) and --max-memory MIB, or the
// LATHE_MAX_INSTRUCTIONS / LATHE_MAX_MEMORY_MB environment variables.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "app/commands.h"

#ifdef HAVE_LATHE_SCRIPTING
#include <lua.hpp>

#include "scripting/engine.h"

namespace lathe::app {
namespace {

const char* kUsage =
    "usage: lathe SCRIPT.lua [ARGS…]\n"
    "       lathe script [--max-instructions N] [--max-memory MIB] SCRIPT.lua [ARGS…]\n\n"
    "Runs a Lua script with the `lathe` module (see `lathe help lua`); `arg` holds ARGS.\n"
    "The sandbox has base, table, string, math, utf8 and coroutine; no io, os or require.\n"
    "Exit code: 0, or 1 when the script raises an error (printed as file:line: message).\n"
    "Environment: LATHE_MAX_INSTRUCTIONS, LATHE_MAX_MEMORY_MB; LATHE_ASSETS (built-in rules).\n";

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (*end || s[0] == '-') return false;
  *out = v;
  return true;
}

int run_script(const std::vector<std::string>& argv) {
  script::Limits limits;
  uint64_t v = 0;
  if (const char* e = std::getenv("LATHE_MAX_INSTRUCTIONS"); e && parse_u64(e, &v)) limits.instructions = v;
  if (const char* e = std::getenv("LATHE_MAX_MEMORY_MB"); e && parse_u64(e, &v)) limits.memory = (size_t)v << 20;
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") { std::cout << kUsage; return 0; }
    if (a == "--max-instructions" || a == "--max-memory") {
      if (i + 1 >= argv.size() || !parse_u64(argv[i + 1], &v)) {
        std::cerr << "lathe script: " << a << " needs a non-negative integer\n" << kUsage;
        return 2;
      }
      if (a == "--max-instructions") limits.instructions = v;
      else limits.memory = (size_t)v << 20;
      ++i;
      continue;
    }
    if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::cerr << "lathe script: unknown option '" << a << "'\n" << kUsage;
      return 2;
    }
    break;
  }
  if (i >= argv.size()) {
    std::cerr << "lathe script: no script given\n" << kUsage;
    return 2;
  }
  const std::string path = argv[i];
  script::Engine engine(limits);
  lua_State* L = engine.L();
  lua_createtable(L, (int)(argv.size() - i), 1);
  for (size_t k = i; k < argv.size(); ++k) {
    lua_pushstring(L, argv[k].c_str());
    lua_rawseti(L, -2, (lua_Integer)(k - i));
  }
  lua_setglobal(L, "arg");
  script::ScriptError err;
  if (!engine.run_file(path, 0, &err)) {
    std::fflush(stdout);
    std::cerr << err.full() << "\n";
    return 1;
  }
  std::fflush(stdout);
  return 0;
}

LATHE_COMMAND("script", "run a Lua script: `lathe SCRIPT.lua [ARGS…]`", run_script);

}  // namespace
}  // namespace lathe::app
#endif  // HAVE_LATHE_SCRIPTING
