// bind_value.cpp — concrete tensors (lathe.Value, a HostTensor): lathe.tensor from nested
// tables, lathe.randn, lathe.allclose, lathe.npy.load / v:save, and the Value methods
// (v.shape, v.dtype, v:tolist(), v:item(), v:numel()). A Value used where a graph tensor
// is expected becomes a tensor literal (Const).
#include <cmath>

#include "core/runtime/compare.h"
#include "core/runtime/npy.h"
#include "core/runtime/random.h"
#include "scripting/binding.h"
#include "scripting/engine.h"
#include "scripting/pretty.h"

namespace lathe::script {
namespace {

// Refuses tensors larger than the sandbox's memory limit before allocating them.
void check_size(lua_State* L, DType dt, const std::vector<int64_t>& shape) {
  double bytes = (double)dtype_size(dt);
  for (int64_t d : shape) {
    if (d < 0) raise(L, "negative dim " + std::to_string(d));
    bytes *= (double)d;
  }
  Engine* e = Engine::from(L);
  double cap = e && e->limits().memory ? (double)e->limits().memory : 16.0 * (1ull << 30);
  if (bytes > cap)
    raise(L, "tensor of " + std::to_string((long long)(bytes / (1 << 20))) + " MiB exceeds the memory limit (" +
                 std::to_string((long long)(cap / (1 << 20))) + " MiB)");
}

// Shape of a nested table: follows the first element at each level.
void infer_shape(lua_State* L, int idx, std::vector<int64_t>& shape, bool& has_float, bool& has_bool) {
  int depth = 0;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    shape.push_back((int64_t)luaL_len(L, -1));
    if (++depth > 16) raise(L, "lathe.tensor: nesting deeper than 16 levels");
    if (shape.back() == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  (void)has_float;
  (void)has_bool;
}

// Fills t from the nested table at idx, checking it is rectangular.
void fill(lua_State* L, int idx, HostTensor& t, const std::vector<int64_t>& shape, size_t dim, int64_t& pos,
          std::string path) {
  if (dim == shape.size()) {
    int isnum = 0;
    if (lua_isboolean(L, idx)) {
      t.set_i64(pos++, lua_toboolean(L, idx));
    } else if (lua_isinteger(L, idx)) {
      t.set_i64(pos++, lua_tointeger(L, idx));
    } else {
      double v = lua_tonumberx(L, idx, &isnum);
      if (!isnum) raise(L, "lathe.tensor: element " + path + " is a " + type_of(L, idx) + ", expected a number");
      t.set_f64(pos++, v);
    }
    return;
  }
  if (!lua_istable(L, idx))
    raise(L, "lathe.tensor: element " + path + " is a " + type_of(L, idx) + ", expected a table (ragged nesting)");
  if ((int64_t)luaL_len(L, idx) != shape[dim])
    raise(L, "lathe.tensor: row " + path + " has " + std::to_string(luaL_len(L, idx)) + " elements, expected " +
                 std::to_string(shape[dim]) + " (ragged nesting)");
  for (int64_t i = 1; i <= shape[dim]; ++i) {
    lua_rawgeti(L, idx, i);
    fill(L, lua_gettop(L), t, shape, dim + 1, pos, path + "[" + std::to_string(i) + "]");
    lua_pop(L, 1);
  }
}

// lathe.tensor(nested [, dtype]): dtype defaults to f32 for numbers, bool for booleans.
int l_tensor(lua_State* L) {
  std::vector<int64_t> shape;
  bool has_float = false, has_bool = false;
  if (lua_istable(L, 1)) infer_shape(L, 1, shape, has_float, has_bool);
  else if (lua_type(L, 1) != LUA_TNUMBER && !lua_isboolean(L, 1))
    raise(L, "lathe.tensor: expected a number or a nested table of numbers, got a " + type_of(L, 1));
  // first leaf decides the default dtype when booleans are used
  DType dflt = DType::F32;
  lua_pushvalue(L, 1);
  while (lua_istable(L, -1) && luaL_len(L, -1) > 0) { lua_rawgeti(L, -1, 1); lua_remove(L, -2); }
  if (lua_isboolean(L, -1)) dflt = DType::Bool;
  lua_pop(L, 1);
  DType dt = check_dtype(L, 2, dflt);
  check_size(L, dt, shape);
  HostTensor t(dt, shape);
  int64_t pos = 0;
  fill(L, 1, t, shape, 0, pos, "");
  push_value(L, std::move(t));
  return 1;
}

// lathe.randn(dims, seed [, dtype]): standard normal (integers: uniform in [0, 10)).
int l_randn(lua_State* L) {
  std::vector<int64_t> shape = check_int_list(L, 1, "dims");
  uint64_t seed = lua_isnoneornil(L, 2) ? 0 : (uint64_t)check_int(L, 2, "seed");
  DType dt = check_dtype(L, 3, DType::F32);
  check_size(L, dt, shape);
  push_value(L, random_tensor(dt, shape, seed));
  return 1;
}

// lathe.allclose(a, b [, rtol [, atol]]): defaults by dtype (compare.h).
int l_allclose(lua_State* L) {
  HostTensor& a = check_value(L, 1);
  HostTensor& b = check_value(L, 2);
  Tolerance tol = default_tolerance(b.dtype());
  double rtol = lua_isnoneornil(L, 3) ? tol.rtol : luaL_checknumber(L, 3);
  double atol = lua_isnoneornil(L, 4) ? tol.atol : luaL_checknumber(L, 4);
  if (a.shape() != b.shape()) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, ("shapes differ: " + a.shape_string() + " vs " + b.shape_string()).c_str());
    return 2;
  }
  std::string why;
  bool ok = allclose(a, b, rtol, atol, &why);
  lua_pushboolean(L, ok);
  if (ok) return 1;
  lua_pushstring(L, why.c_str());
  return 2;  // false, why (assert() shows it as the message)
}

int l_npy_load(lua_State* L) { push_value(L, read_npy(luaL_checkstring(L, 1))); return 1; }

void push_element(lua_State* L, const HostTensor& t, int64_t i) {
  if (is_float(t.dtype())) lua_pushnumber(L, t.get_f64(i));
  else if (t.dtype() == DType::Bool) lua_pushboolean(L, t.get_i64(i) != 0);
  else lua_pushinteger(L, t.get_i64(i));
}

void push_list(lua_State* L, const HostTensor& t, size_t dim, int64_t& pos) {
  if (dim == t.rank()) { push_element(L, t, pos++); return; }
  int64_t n = t.shape()[dim];
  lua_createtable(L, (int)std::min<int64_t>(n, 1 << 20), 0);
  for (int64_t i = 1; i <= n; ++i) {
    push_list(L, t, dim + 1, pos);
    lua_rawseti(L, -2, i);
  }
}

int v_tolist(lua_State* L) {
  HostTensor& t = check_value(L, 1);
  if (t.numel() > (int64_t)1 << 24) raise(L, "tolist: tensor too large (" + std::to_string(t.numel()) + " elements)");
  int64_t pos = 0;
  push_list(L, t, 0, pos);
  return 1;
}
int v_item(lua_State* L) {
  HostTensor& t = check_value(L, 1);
  if (t.numel() != 1) raise(L, "item: the tensor has " + std::to_string(t.numel()) + " elements, expected 1");
  push_element(L, t, 0);
  return 1;
}
int v_numel(lua_State* L) { lua_pushinteger(L, check_value(L, 1).numel()); return 1; }
int v_save(lua_State* L) {
  write_npy(luaL_checkstring(L, 2), check_value(L, 1));
  return 0;
}
int v_tostring(lua_State* L) {
  lua_pushstring(L, format_value(check_value(L, 1)).c_str());
  return 1;
}
int v_index(lua_State* L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  HostTensor& t = check_value(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  std::string key = lua_tostring(L, 2);
  if (key == "shape") { push_int_list(L, t.shape()); return 1; }
  if (key == "dtype") { push_dtype(L, t.dtype()); return 1; }
  if (key == "rank" || key == "ndim") { lua_pushinteger(L, (lua_Integer)t.rank()); return 1; }
  return 0;
}
int v_len(lua_State* L) {
  HostTensor& t = check_value(L, 1);
  lua_pushinteger(L, t.rank() ? t.shape()[0] : 1);
  return 1;
}

const Function kModule[] = {
    {"tensor", l_tensor, "lathe.tensor(nested [, dtype])", "a value from nested tables (dtype: f32, or bool for booleans)"},
    {"randn", l_randn, "lathe.randn(dims, seed [, dtype=\"f32\"])", "seeded random value: normal for floats, [0, 10) for integers"},
    {"allclose", l_allclose, "lathe.allclose(a, b [, rtol [, atol]])", "true when |a-b| <= atol + rtol*|b| everywhere; else false, why"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kNpy[] = {
    {"load", l_npy_load, "lathe.npy.load(path)", "read a .npy file as a value"},
    {nullptr, nullptr, nullptr, nullptr},
};
const Function kMethods[] = {
    {"tolist", v_tolist, "v:tolist()", "nested tables of numbers (a number for rank 0)"},
    {"item", v_item, "v:item()", "the only element as a number"},
    {"numel", v_numel, "v:numel()", "number of elements"},
    {"save", v_save, "v:save(path)", "write a .npy file"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_value(lua_State* L, int module) {
  new_type<HostTensor>(L, kValueMT);
  int mt = lua_gettop(L);
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kMethods, "Value:");
  push_guarded(L, v_index, nullptr, 1);
  lua_setfield(L, mt, "__index");
  push_guarded(L, v_tostring);
  lua_setfield(L, mt, "__tostring");
  push_guarded(L, v_len);
  lua_setfield(L, mt, "__len");
  lua_pop(L, 1);
  register_functions(L, module, kModule, "lathe.");
  lua_newtable(L);
  register_functions(L, lua_gettop(L), kNpy, "lathe.npy.");
  lua_setfield(L, module, "npy");
}

}  // namespace lathe::script
