// tensor_args.h — argument helpers shared by the three Tensor binding files
// (bind_tensor.cpp, bind_tensor_shape.cpp, bind_tensor_nn.cpp): frontend Tensor and
// Scalar conversion, optional tensors, option tables.
#pragma once
#include <optional>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "scripting/binding.h"

namespace lathe::script {

inline Tensor tensor_arg(lua_State* L, int idx) { return Tensor(check_node(L, idx)); }
inline void push_tensor(lua_State* L, const Tensor& t) { push_node(L, t.node()); }
inline bool is_tensor_like(lua_State* L, int idx) {
  return luaL_testudata(L, idx, kTensorMT) || luaL_testudata(L, idx, kValueMT);
}
inline std::optional<Tensor> opt_tensor_arg(lua_State* L, int idx) {
  if (lua_isnoneornil(L, idx)) return std::nullopt;
  return tensor_arg(L, idx);
}
// A Lua number as a frontend scalar: 2 is an integer literal, 2.0 / 0.5 float literals.
inline Scalar scalar_arg(lua_State* L, int idx) {
  if (lua_isinteger(L, idx)) return Scalar(static_cast<int64_t>(lua_tointeger(L, idx)));
  if (lua_type(L, idx) == LUA_TNUMBER) return Scalar(static_cast<double>(lua_tonumber(L, idx)));
  if (lua_isboolean(L, idx)) return Scalar(static_cast<int64_t>(lua_toboolean(L, idx)));
  raise(L, "expected a number, got a " + type_of(L, idx));
}
inline std::optional<Scalar> opt_scalar_arg(lua_State* L, int idx) {
  if (lua_isnoneornil(L, idx)) return std::nullopt;
  return scalar_arg(L, idx);
}
inline double opt_number(lua_State* L, int idx, double dflt) {
  if (lua_isnoneornil(L, idx)) return dflt;
  if (lua_type(L, idx) != LUA_TNUMBER) raise(L, "expected a number, got a " + type_of(L, idx));
  return lua_tonumber(L, idx);
}
inline int64_t opt_int(lua_State* L, int idx, int64_t dflt, const char* what) {
  if (lua_isnoneornil(L, idx)) return dflt;
  return check_int(L, idx, what);
}
// One axis, positional (x:softmax(1)) or in an options table (x:softmax{dim = -1}, {axis = 1}).
inline int64_t axis_arg(lua_State* L, int idx, int64_t dflt) {
  if (!lua_istable(L, idx)) return opt_int(L, idx, dflt, "axis");
  if (lua_getfield(L, idx, "axis") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_getfield(L, idx, "dim");
  }
  int64_t v = opt_int(L, lua_gettop(L), dflt, "axis");
  lua_pop(L, 1);
  return v;
}
inline bool opt_bool(lua_State* L, int idx, bool dflt) {
  if (lua_isnoneornil(L, idx)) return dflt;
  return lua_toboolean(L, idx);
}

}  // namespace lathe::script
