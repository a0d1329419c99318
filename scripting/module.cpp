// module.cpp — assembles the `lathe` module from the binding files (one per area) and
// installs it as a global. The order matters only where one area extends another's types.
#include <lua.hpp>

#include "scripting/binding.h"

namespace lathe::script {

namespace {

// lathe.help([topic]): the signature and doc of one function, or the list of topics.
int l_help(lua_State* L) {
  const auto& h = help_entries();
  if (lua_isnoneornil(L, 1)) {
    std::string s;
    for (const auto& [topic, e] : h) s += topic + "\n";
    lua_pushstring(L, s.c_str());
    return 1;
  }
  std::string topic = luaL_checkstring(L, 1);
  if (const HelpEntry* e = find_help_entry(topic)) {  // also the listed names: k:split, s:step
    lua_pushstring(L, (e->signature + "\n  " + e->doc).c_str());
    return 1;
  }
  if (const char* guide = help_guide(topic)) {
    lua_pushstring(L, guide);
    return 1;
  }
  raise(L, "no help for '" + topic + "'");
}

const Function kModule[] = {
    {"help", l_help, "lathe.help([topic])", "signature and description of a lathe function"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void open_lathe(lua_State* L) {
  lua_newtable(L);
  int module = lua_gettop(L);
  lua_pushstring(L, "0.1");
  lua_setfield(L, module, "version");
  register_functions(L, module, kModule, "lathe.");
  bind_tensor(L, module);
  bind_tensor_shape(L, module);
  bind_tensor_nn(L, module);
  bind_tensor_torch(L, module);
  bind_value(L, module);
  bind_graph(L, module);
  bind_run(L, module);
  bind_rules(L, module);
  bind_attention(L, module);
  bind_session(L, module);
  bind_quantize(L, module);
  lua_setglobal(L, "lathe");
}

}  // namespace lathe::script
