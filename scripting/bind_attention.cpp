// bind_attention.cpp — the Lua side of fused attention, for the `flash-attention` rule set
// (assets/rules/flash-attention.lua):
//   lathe.attention(q, k, v [, mask] [, {causal=false, scale=1/sqrt(E)}])  the fused op (core/ir/attention_op.h)
//   lathe.strided(x, dims, strides [, offset])   a View of x's row-major elements (as_strided)
//   lathe.causal_pattern(c)   for a bool tensor that depends on no input: "fill" when it is
//                             true exactly where j > i (masked_fill's form), "keep" when exactly
//                             where j <= i (where(c, x, -inf)), nil otherwise
#include <cmath>

#include "core/interp/interp.h"
#include "core/ir/attention_op.h"
#include "core/ir/build.h"
#include "core/ir/graph.h"
#include "scripting/binding.h"

namespace lathe::script {

namespace {

int l_attention(lua_State* L) {
  NodeRef q = check_node(L, 1), k = check_node(L, 2), v = check_node(L, 3);
  NodeRef mask = nullptr;
  int opts = 0;
  if (lua_gettop(L) >= 4 && !lua_isnil(L, 4)) {
    if (is_options_table(L, 4)) opts = 4;
    else mask = check_node(L, 4);
  }
  if (!opts && lua_gettop(L) >= 5 && lua_istable(L, 5)) opts = 5;
  bool causal = opts ? opt_field_bool(L, opts, "causal", false) : false;
  double scale = 0;
  if (opts) scale = opt_field_number(L, opts, "scale", 0);
  if (scale == 0) {
    if (q->rank() < 1 || !q->shape.back().is_const() || q->shape.back().value() <= 0)
      raise(L, "lathe.attention: the embedding dim of q must be a positive constant for the default scale");
    scale = 1.0 / std::sqrt(static_cast<double>(q->shape.back().value()));
  }
  push_node(L, attention_call(q, k, v, mask, causal, scale));
  return 1;
}

int l_strided(lua_State* L) {
  NodeRef x = check_node(L, 1);
  ViewSpec s;
  s.shape = check_shape(L, 2);
  if (!lua_istable(L, 3)) raise(L, "lathe.strided(x, dims, strides [, offset]): strides must be a list");
  lua_Integer n = luaL_len(L, 3);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, 3, i);
    if (lua_isinteger(L, -1)) s.strides.push_back(SymInt((int64_t)lua_tointeger(L, -1)));
    else if (auto sym = lua_type(L, -1) == LUA_TSTRING ? SymInt::parse(lua_tostring(L, -1)) : std::nullopt) s.strides.push_back(*sym);
    else raise(L, "lathe.strided: stride " + std::to_string(i) + " must be an integer or a symbolic expression");
    lua_pop(L, 1);
  }
  if (s.strides.size() != s.shape.size()) raise(L, "lathe.strided: dims and strides differ in length");
  if (lua_isinteger(L, 4)) s.offset = SymInt((int64_t)lua_tointeger(L, 4));
  else if (auto sym = lua_type(L, 4) == LUA_TSTRING ? SymInt::parse(lua_tostring(L, 4)) : std::nullopt) s.offset = *sym;
  else if (!lua_isnoneornil(L, 4)) raise(L, "lathe.strided: the offset must be an integer or a symbolic expression");
  push_node(L, prim::view(x, s));
  return 1;
}

int l_causal_pattern(lua_State* L) {
  NodeRef c = check_node(L, 1);
  if (c->dtype != DType::Bool || c->rank() < 2) { lua_pushnil(L); return 1; }
  double numel = 1;
  for (auto& d : c->shape) {
    if (!d.is_const()) { lua_pushnil(L); return 1; }
    numel *= static_cast<double>(d.value());
  }
  if (numel > (double)(1 << 26)) { lua_pushnil(L); return 1; }
  Graph g = Graph::from_outputs({{"c", c}});
  if (!g.inputs.empty()) { lua_pushnil(L); return 1; }
  HostTensor t = interpret(g, {}).at("c");
  int64_t Lr = c->shape[c->rank() - 2].value(), S = c->shape[c->rank() - 1].value();
  bool fill = true, keep = true;
  const uint8_t* p = static_cast<const uint8_t*>(t.data());
  for (int64_t x = 0; x < t.numel() && (fill || keep); ++x) {
    int64_t j = x % S, i = (x / S) % Lr;
    bool on = p[x] != 0;
    fill = fill && on == (j > i);
    keep = keep && on == (j <= i);
  }
  if (fill) lua_pushstring(L, "fill");
  else if (keep) lua_pushstring(L, "keep");
  else lua_pushnil(L);
  return 1;
}

// The one value of a tensor that depends on no input and holds a single value everywhere
// (a scalar constant, possibly broadcast; a small literal or constant expression); else nil.
int l_constant_value(lua_State* L) {
  NodeRef n = check_node(L, 1);
  while (n->op == Op::View && n->attrs.view && !n->attrs.view->has_mask()) n = n->inputs[0];
  if (n->is_scalar_const()) { lua_pushnumber(L, n->const_value()); return 1; }
  double numel = 1;
  for (auto& d : n->shape) {
    if (!d.is_const()) { lua_pushnil(L); return 1; }
    numel *= static_cast<double>(d.value());
  }
  if (numel < 1 || numel > 4096 || !is_float(n->dtype)) { lua_pushnil(L); return 1; }
  Graph g = Graph::from_outputs({{"c", n}});
  if (!g.inputs.empty()) { lua_pushnil(L); return 1; }
  HostTensor t = interpret(g, {}).at("c");
  double v = t.get_f64(0);
  for (int64_t i = 1; i < t.numel(); ++i)
    if (!(t.get_f64(i) == v)) { lua_pushnil(L); return 1; }
  lua_pushnumber(L, v);
  return 1;
}

const Function kFns[] = {
    {"constant_value", l_constant_value, "lathe.constant_value(x)",
     "the single value of a float tensor that depends on no input and is the same everywhere, else nil"},
    {"attention", l_attention, "lathe.attention(q, k, v [, mask] [, {causal=false, scale=1/sqrt(E)}])",
     "the fused attention op (Extern \"attention\"): softmax(q·kᵀ·scale + mask) · v, f32; the flash-attention rules build it"},
    {"strided", l_strided, "lathe.strided(x, dims, strides [, offset])", "a View of x's row-major elements (as_strided)"},
    {"causal_pattern", l_causal_pattern, "lathe.causal_pattern(c)",
     "\"fill\" / \"keep\" when a constant bool mask is exactly j > i / j <= i over its last two dims, else nil"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_attention(lua_State* L, int module) { register_functions(L, module, kFns, "lathe."); }

}  // namespace lathe::script
