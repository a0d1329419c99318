// bind_tensor.cpp — the lazy lathe.Tensor type: sources (lathe.input, lathe.const, …),
// operators (+ - * / % // ^ unary -, & | ~ on bool tensors), properties (t.shape,
// t.dtype, …) and the elementwise composites of core/frontend/tensor.h.
//
// Names and argument order follow PyTorch; axes are 0-based and may be negative.
// Comparisons are methods (x:lt(y)), because Lua's __lt/__eq must return booleans.
#include <cmath>
#include <sstream>

#include "core/ir/text.h"
#include "core/rewrite/rewriter.h"
#include "scripting/tensor_args.h"

namespace lathe::script {
namespace {

// ---------------------------------------------------------------- table-driven families
using UnaryFn = Tensor (*)(const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
struct UnaryEntry { const char* name; UnaryFn fn; const char* doc; };
struct BinaryEntry { const char* name; BinaryFn fn; const char* doc; };

Tensor t_neg(const Tensor& x) { return -x; }
Tensor t_relu(const Tensor& x) { return relu(x); }
Tensor t_selu(const Tensor& x) { return selu(x); }

const UnaryEntry kUnary[] = {
    {"exp", exp, "e^x"}, {"exp2", exp2, "2^x"}, {"log", log, "natural log"}, {"log2", log2, "log base 2"},
    {"log1p", log1p, "log(1 + x)"}, {"expm1", expm1, "e^x - 1"}, {"sin", sin, "sine"}, {"cos", cos, "cosine"},
    {"tan", tan, "tangent"}, {"tanh", tanh, "hyperbolic tangent"}, {"sigmoid", sigmoid, "1 / (1 + e^-x)"},
    {"relu", t_relu, "max(x, 0)"}, {"selu", t_selu, "SELU"}, {"erf", erf, "error function"},
    {"silu", silu, "x * sigmoid(x)"}, {"mish", mish, "x * tanh(softplus(x))"}, {"sqrt", sqrt, "square root"},
    {"rsqrt", rsqrt, "1 / sqrt(x)"}, {"reciprocal", reciprocal, "1 / x"}, {"abs", abs, "|x|"},
    {"sign", sign, "-1, 0 or 1"}, {"square", square, "x * x"}, {"trunc", trunc, "round toward zero"},
    {"floor", floor, "round down"}, {"ceil", ceil, "round up"}, {"round", round, "round half to even"},
    {"hardsigmoid", hardsigmoid, "clamp(x/6 + 1/2, 0, 1)"}, {"hardswish", hardswish, "x * hardsigmoid(x)"},
    {"isnan", isnan, "bool: x is NaN"}, {"isinf", isinf, "bool: x is ±inf"},
    {"logical_not", logical_not, "bool: not x"}, {"neg", t_neg, "-x"},
    {"contiguous", contiguous, "materialize a view (Copy)"}, {"t", t, "transpose of a 1-D or 2-D tensor"},
};

Tensor t_lt(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor t_le(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor t_gt(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor t_ge(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor t_eq(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor t_ne(const Tensor& a, const Tensor& b) { return ne(a, b); }

const BinaryEntry kBinary[] = {
    {"add", add, "a + b (broadcasting)"}, {"sub", sub, "a - b"}, {"mul", mul, "a * b"},
    {"div", div, "a / b (true division)"}, {"minimum", minimum, "elementwise min"},
    {"maximum", maximum, "elementwise max"}, {"fmod", fmod, "remainder with the sign of a"},
    {"remainder", remainder, "remainder with the sign of b (Lua/Python %)"},
    {"floor_divide", floor_divide, "floor(a / b)"}, {"lt", t_lt, "bool a < b"}, {"le", t_le, "bool a <= b"},
    {"gt", t_gt, "bool a > b"}, {"ge", t_ge, "bool a >= b"}, {"eq", t_eq, "bool a == b"},
    {"ne", t_ne, "bool a ~= b"}, {"logical_and", logical_and, "bool a and b"},
    {"logical_or", logical_or, "bool a or b"}, {"logical_xor", logical_xor, "bool a xor b"},
};

// Either operand may be a Lua number (turned into a constant shaped and typed like the other).
std::pair<Tensor, Tensor> binary_operands(lua_State* L, const char* op) {
  bool a_num = lua_type(L, 1) == LUA_TNUMBER, b_num = lua_type(L, 2) == LUA_TNUMBER;
  if (a_num && b_num) raise(L, std::string(op) + ": at least one operand must be a tensor");
  if (a_num) { Tensor b = tensor_arg(L, 2); return {scalar_like(b, scalar_arg(L, 1)), b}; }
  if (b_num) { Tensor a = tensor_arg(L, 1); return {a, scalar_like(a, scalar_arg(L, 2))}; }
  return {tensor_arg(L, 1), tensor_arg(L, 2)};
}

int call_unary(lua_State* L) {
  auto* e = static_cast<const UnaryEntry*>(guarded_data(L));
  push_tensor(L, e->fn(tensor_arg(L, 1)));
  return 1;
}

int call_binary(lua_State* L) {
  auto* e = static_cast<const BinaryEntry*>(guarded_data(L));
  auto [a, b] = binary_operands(L, e->name);
  push_tensor(L, e->fn(a, b));
  return 1;
}

// ---------------------------------------------------------------- sources
int l_input(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  if (lua_isnoneornil(L, 2)) raise(L, "lathe.input(\"" + name + "\", dims, dtype): dims are missing");
  Shape s = check_shape(L, 2);
  push_tensor(L, input(name, s, check_dtype(L, 3, DType::F32)));
  return 1;
}

int l_const(lua_State* L) {
  DType dt = check_dtype(L, 2, DType::F32);
  if (lua_type(L, 1) == LUA_TTABLE) raise(L, "lathe.const takes a number; use lathe.tensor for tables");
  Scalar v = scalar_arg(L, 1);
  if (lua_isnoneornil(L, 3)) push_tensor(L, scalar(v, dt));
  else push_tensor(L, full(check_shape(L, 3), v, dt));
  return 1;
}

int l_full(lua_State* L) {
  push_tensor(L, full(check_shape(L, 1), scalar_arg(L, 2), check_dtype(L, 3, DType::F32)));
  return 1;
}
int l_zeros(lua_State* L) { push_tensor(L, zeros(check_shape(L, 1), check_dtype(L, 2, DType::F32))); return 1; }
int l_ones(lua_State* L) { push_tensor(L, ones(check_shape(L, 1), check_dtype(L, 2, DType::F32))); return 1; }

int l_arange(lua_State* L) {
  // arange(n [, dtype]) or arange(start, stop [, step [, dtype]])
  int n = lua_gettop(L);
  if (n == 1 || (n == 2 && lua_type(L, 2) == LUA_TSTRING)) {
    push_tensor(L, arange(check_int(L, 1, "n"), check_dtype(L, 2, DType::I64)));
    return 1;
  }
  double start = luaL_checknumber(L, 1), stop = luaL_checknumber(L, 2);
  double step = opt_number(L, 3, 1);
  if (step == 0) raise(L, "arange: step must not be zero");
  bool all_int = lua_isinteger(L, 1) && lua_isinteger(L, 2) && (lua_isnoneornil(L, 3) || lua_isinteger(L, 3));
  push_tensor(L, arange(start, stop, step, check_dtype(L, 4, all_int ? DType::I64 : DType::F32)));
  return 1;
}

int l_eye(lua_State* L) {
  std::optional<int64_t> m;
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING) m = check_int(L, 2, "m");
  int dt_idx = lua_type(L, 2) == LUA_TSTRING ? 2 : 3;
  push_tensor(L, eye(check_int(L, 1, "n"), m, check_dtype(L, dt_idx, DType::F32)));
  return 1;
}

int l_where(lua_State* L) {
  // lathe.where(cond, a, b); a or b may be numbers
  Tensor c = tensor_arg(L, 1);
  bool a_num = lua_type(L, 2) == LUA_TNUMBER, b_num = lua_type(L, 3) == LUA_TNUMBER;
  if (a_num && b_num) {
    Tensor a = full(c.shape(), scalar_arg(L, 2), lua_isinteger(L, 2) && lua_isinteger(L, 3) ? DType::I64 : DType::F32);
    push_tensor(L, where(c, a, scalar_arg(L, 3)));
  } else if (a_num) {
    push_tensor(L, where(c, scalar_arg(L, 2), tensor_arg(L, 3)));
  } else if (b_num) {
    push_tensor(L, where(c, tensor_arg(L, 2), scalar_arg(L, 3)));
  } else {
    push_tensor(L, where(c, tensor_arg(L, 2), tensor_arg(L, 3)));
  }
  return 1;
}

// ---------------------------------------------------------------- parameterized elementwise
int m_pow(lua_State* L) {
  if (lua_type(L, 1) == LUA_TNUMBER) {  // 2 ^ x
    Tensor e = tensor_arg(L, 2);
    push_tensor(L, pow(scalar_like(e, scalar_arg(L, 1)), e));
  } else if (lua_type(L, 2) == LUA_TNUMBER) {
    push_tensor(L, pow(tensor_arg(L, 1), scalar_arg(L, 2)));
  } else {
    push_tensor(L, pow(tensor_arg(L, 1), tensor_arg(L, 2)));
  }
  return 1;
}

int m_clamp(lua_State* L) {
  Tensor x = tensor_arg(L, 1);
  if (is_tensor_like(L, 2) || is_tensor_like(L, 3)) {
    if (!is_tensor_like(L, 2) || !is_tensor_like(L, 3)) raise(L, "clamp: give both bounds as tensors or as numbers");
    push_tensor(L, clamp(x, tensor_arg(L, 2), tensor_arg(L, 3)));
  } else {
    push_tensor(L, clamp(x, opt_scalar_arg(L, 2), opt_scalar_arg(L, 3)));
  }
  return 1;
}

int m_leaky_relu(lua_State* L) { push_tensor(L, leaky_relu(tensor_arg(L, 1), opt_number(L, 2, 0.01))); return 1; }
int m_elu(lua_State* L) { push_tensor(L, elu(tensor_arg(L, 1), opt_number(L, 2, 1.0))); return 1; }
int m_softplus(lua_State* L) {
  push_tensor(L, softplus(tensor_arg(L, 1), opt_number(L, 2, 1.0), opt_number(L, 3, 20.0)));
  return 1;
}
int m_hardtanh(lua_State* L) {
  push_tensor(L, hardtanh(tensor_arg(L, 1), opt_number(L, 2, -1), opt_number(L, 3, 1)));
  return 1;
}
int m_gelu(lua_State* L) {
  // the options table is checked first: luaL_optstring raises on a table
  std::string approx = lua_istable(L, 2) ? opt_field_string(L, 2, "approximate", "none")
                                         : std::string(luaL_optstring(L, 2, "none"));
  if (approx != "none" && approx != "tanh") raise(L, "gelu: approximate must be \"none\" or \"tanh\"");
  push_tensor(L, gelu(tensor_arg(L, 1), approx));
  return 1;
}
int m_to(lua_State* L) { push_tensor(L, to(tensor_arg(L, 1), check_dtype(L, 2, DType::F32))); return 1; }
int m_float(lua_State* L) { push_tensor(L, to(tensor_arg(L, 1), DType::F32)); return 1; }
int m_half(lua_State* L) { push_tensor(L, to(tensor_arg(L, 1), DType::F16)); return 1; }
int m_int(lua_State* L) { push_tensor(L, to(tensor_arg(L, 1), DType::I32)); return 1; }
int m_long(lua_State* L) { push_tensor(L, to(tensor_arg(L, 1), DType::I64)); return 1; }
int m_bool(lua_State* L) { push_tensor(L, to(tensor_arg(L, 1), DType::Bool)); return 1; }
int m_where(lua_State* L) {
  // x:where(cond, y) = where(cond, x, y), as PyTorch's Tensor.where
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_replace(L, 1);
  lua_replace(L, 2);
  return l_where(L);
}

// n:with_inputs{a, b}: the same node rebuilt on other inputs (validated; View(View) folds).
int m_with_inputs(lua_State* L) {
  NodeRef n = check_node(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<NodeRef> ins;
  lua_Integer k = luaL_len(L, 2);
  for (lua_Integer i = 1; i <= k; ++i) {
    lua_geti(L, 2, i);
    ins.push_back(check_node(L, -1));
    lua_pop(L, 1);
  }
  if (ins.size() != n->inputs.size())
    raise(L, "with_inputs: " + std::string(op_name(n->op)) + " takes " + std::to_string(n->inputs.size()) +
                 " inputs, got " + std::to_string(ins.size()));
  push_node(L, rebuild_node(n, ins));
  return 1;
}

// lathe.extern(name, inputs, dtype, dims [, ints]): a library kernel call (e.g. sgemm).
int l_extern(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<NodeRef> ins;
  lua_Integer k = luaL_len(L, 2);
  for (lua_Integer i = 1; i <= k; ++i) {
    lua_geti(L, 2, i);
    ins.push_back(check_node(L, -1));
    lua_pop(L, 1);
  }
  std::vector<int64_t> ints;
  if (!lua_isnoneornil(L, 5)) ints = check_int_list(L, 5, "ints");
  push_node(L, prim::extern_call(name, ins, check_dtype(L, 3, DType::F32), check_shape(L, 4), ints));
  return 1;
}

// ---------------------------------------------------------------- metamethods, properties
int mm_add(lua_State* L) { auto [a, b] = binary_operands(L, "+"); push_tensor(L, a + b); return 1; }
int mm_sub(lua_State* L) { auto [a, b] = binary_operands(L, "-"); push_tensor(L, a - b); return 1; }
int mm_mul(lua_State* L) { auto [a, b] = binary_operands(L, "*"); push_tensor(L, a * b); return 1; }
int mm_div(lua_State* L) { auto [a, b] = binary_operands(L, "/"); push_tensor(L, a / b); return 1; }
int mm_mod(lua_State* L) { auto [a, b] = binary_operands(L, "%"); push_tensor(L, remainder(a, b)); return 1; }
int mm_idiv(lua_State* L) { auto [a, b] = binary_operands(L, "//"); push_tensor(L, floor_divide(a, b)); return 1; }
int mm_band(lua_State* L) { auto [a, b] = binary_operands(L, "&"); push_tensor(L, logical_and(a, b)); return 1; }
int mm_bor(lua_State* L) { auto [a, b] = binary_operands(L, "|"); push_tensor(L, logical_or(a, b)); return 1; }
int mm_bxor(lua_State* L) { auto [a, b] = binary_operands(L, "~"); push_tensor(L, logical_xor(a, b)); return 1; }
int mm_bnot(lua_State* L) { push_tensor(L, logical_not(tensor_arg(L, 1))); return 1; }
int mm_unm(lua_State* L) { push_tensor(L, -tensor_arg(L, 1)); return 1; }

int mm_tostring(lua_State* L) {
  NodeRef n = check_node(L, 1);
  std::string s = "Tensor " + std::string(dtype_name(n->dtype)) + shape_to_string(n->shape) + " (%" +
                  std::to_string(n->id) + " " + std::string(op_name(n->op));
  if (n->op == Op::Input) s += " \"" + n->attrs.name + "\"";
  if (n->is_scalar_const()) {
    std::ostringstream os;
    os << n->const_value();
    s += " " + os.str();
  }
  s += ")";
  lua_pushstring(L, s.c_str());
  return 1;
}

void push_provenance(lua_State* L, const Provenance& p) {
  lua_createtable(L, 0, 3);
  lua_pushstring(L, p.path.c_str());
  lua_setfield(L, -2, "path");
  lua_pushinteger(L, p.step);
  lua_setfield(L, -2, "step");
  lua_pushboolean(L, p.backward);
  lua_setfield(L, -2, "backward");
}

// __index: methods first (upvalue 3), then properties.
int mm_index(lua_State* L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(3)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  NodeRef n = check_node(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  std::string key = lua_tostring(L, 2);
  if (key == "shape") { push_shape(L, n->shape); return 1; }
  if (key == "dtype") { push_dtype(L, n->dtype); return 1; }
  if (key == "rank" || key == "ndim") { lua_pushinteger(L, (lua_Integer)n->shape.size()); return 1; }
  if (key == "id") { lua_pushinteger(L, n->id); return 1; }
  if (key == "op") { lua_pushstring(L, std::string(op_name(n->op)).c_str()); return 1; }
  if (key == "name" && (n->op == Op::Input || n->op == Op::Extern)) { lua_pushstring(L, n->attrs.name.c_str()); return 1; }
  if (key == "value" && n->is_scalar_const()) {
    if (is_float(n->dtype)) lua_pushnumber(L, n->attrs.f);
    else if (n->dtype == DType::Bool) lua_pushboolean(L, n->attrs.i != 0);
    else lua_pushinteger(L, n->attrs.i);
    return 1;
  }
  if (key == "inputs") {
    lua_createtable(L, (int)n->inputs.size(), 0);
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      push_node(L, n->inputs[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
  }
  if (key == "provenance") { push_provenance(L, n->prov); return 1; }
  // `view` itself is the reshape method (PyTorch), so the spec is `view_spec`
  if (key == "view_spec" && n->op == Op::View && n->attrs.view) {
    const ViewSpec& v = *n->attrs.view;
    lua_createtable(L, 0, 4);
    push_shape(L, v.shape);
    lua_setfield(L, -2, "shape");
    push_shape(L, v.strides);
    lua_setfield(L, -2, "strides");
    if (auto o = v.offset.try_value()) lua_pushinteger(L, *o);
    else lua_pushstring(L, v.offset.to_string().c_str());
    lua_setfield(L, -2, "offset");
    lua_createtable(L, (int)v.mask.size(), 0);
    for (size_t i = 0; i < v.mask.size(); ++i) {
      push_shape(L, {v.mask[i].first, v.mask[i].second});
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "mask");
    return 1;
  }
  if (key == "axes" && n->op == Op::Reduce) {
    push_int_list(L, std::vector<int64_t>(n->attrs.axes.begin(), n->attrs.axes.end()));
    return 1;
  }
  if (key == "reduce" && n->op == Op::Reduce) {
    lua_pushstring(L, std::string(reduce_op_name(n->attrs.reduce)).c_str());
    return 1;
  }
  if (key == "axis" && (n->op == Op::Index || n->op == Op::Take)) { lua_pushinteger(L, n->attrs.axis); return 1; }
  if (key == "text") { lua_pushstring(L, print_node(n).c_str()); return 1; }
  if (key == "T") {  // PyTorch's x.T: the dims reversed
    std::vector<int> perm;
    for (int a = static_cast<int>(n->shape.size()) - 1; a >= 0; --a) perm.push_back(a);
    push_tensor(L, perm.size() < 2 ? Tensor(n) : permute(Tensor(n), perm));
    return 1;
  }
  // Fields that exist only for some nodes read as nil elsewhere; any other name is a typo.
  static const char* const kSometimes[] = {"name", "value", "view_spec", "axes", "reduce", "axis"};
  for (const char* k : kSometimes)
    if (key == k) return 0;
  raise(L, "a tensor has no field or method '" + key +
               "' (fields: shape, dtype, rank, ndim, T, id, op, inputs, provenance, text; `:help lua` lists the methods)");
}

int mm_eq(lua_State* L) {
  NodeRef a = to_node_or_null(L, 1), b = to_node_or_null(L, 2);
  lua_pushboolean(L, a && b && a == b);
  return 1;
}

const Function kModule[] = {
    {"input", l_input, "lathe.input(name, dims [, dtype=\"f32\"])", "a named graph input; dims are numbers or symbolic names (\"B\")"},
    {"const", l_const, "lathe.const(value [, dtype=\"f32\" [, dims]])", "a constant: rank 0, or broadcast to dims"},
    {"full", l_full, "lathe.full(dims, value [, dtype])", "a constant tensor filled with value"},
    {"zeros", l_zeros, "lathe.zeros(dims [, dtype])", "zeros"},
    {"ones", l_ones, "lathe.ones(dims [, dtype])", "ones"},
    {"arange", l_arange, "lathe.arange(n) | lathe.arange(start, stop [, step [, dtype]])", "[start, stop) by step (i64 for integers)"},
    {"eye", l_eye, "lathe.eye(n [, m] [, dtype])", "identity matrix"},
    {"where", l_where, "lathe.where(cond, a, b)", "cond ? a : b (a, b may be numbers)"},
    {"extern", l_extern, "lathe.extern(name, inputs, dtype, dims [, ints])", "a library kernel call (Extern), e.g. sgemm"},
    {nullptr, nullptr, nullptr, nullptr},
};

const Function kMethods[] = {
    {"pow", m_pow, "x:pow(e)  (also x ^ e)", "power; e is a number or a tensor"},
    {"clamp", m_clamp, "x:clamp(lo, hi)", "clamp to [lo, hi]; either bound may be nil"},
    {"clip", m_clamp, "x:clip(lo, hi)", "alias of clamp"},
    {"leaky_relu", m_leaky_relu, "x:leaky_relu([negative_slope=0.01])", "leaky ReLU"},
    {"elu", m_elu, "x:elu([alpha=1])", "ELU"},
    {"softplus", m_softplus, "x:softplus([beta=1 [, threshold=20]])", "softplus"},
    {"hardtanh", m_hardtanh, "x:hardtanh([lo=-1 [, hi=1]])", "clamp to [lo, hi]"},
    {"gelu", m_gelu, "x:gelu([approximate=\"none\"|\"tanh\"])", "GELU"},
    {"to", m_to, "x:to(dtype)", "cast (to bool is x ~= 0)"},
    {"float", m_float, "x:float()", "cast to f32"},
    {"half", m_half, "x:half()", "cast to f16"},
    {"int", m_int, "x:int()", "cast to i32"},
    {"long", m_long, "x:long()", "cast to i64"},
    {"bool", m_bool, "x:bool()", "x ~= 0"},
    {"with_inputs", m_with_inputs, "n:with_inputs{a, …}", "the same node on other inputs (rule replacements)"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void add_tensor_methods(lua_State* L, int module, const Function* fns) {
  lua_getfield(L, LUA_REGISTRYINDEX, "lathe.Tensor.methods");
  int methods = lua_gettop(L);
  for (const Function* f = fns; f->name; ++f) {
    push_guarded(L, f->fn);
    lua_setfield(L, methods, f->name);
    add_help(std::string("Tensor:") + f->name, f->signature ? f->signature : "", f->doc ? f->doc : "");
    if (lua_getfield(L, module, f->name) == LUA_TNIL) {
      push_guarded(L, f->fn);
      lua_setfield(L, module, f->name);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

void bind_tensor(lua_State* L, int module) {
  // the metatable and its methods table (kept in the registry for the other bind files)
  new_type<NodeRef>(L, kTensorMT);  // NodeBox is a trivially destructible pointer
  int mt = lua_gettop(L);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "lathe.Tensor.methods");
  lua_pushvalue(L, -1);
  push_guarded(L, mm_index, nullptr, 1);
  lua_setfield(L, mt, "__index");
  lua_pop(L, 1);  // methods
  static const struct { const char* name; lua_CFunction fn; } metas[] = {
      {"__add", mm_add}, {"__sub", mm_sub}, {"__mul", mm_mul}, {"__div", mm_div}, {"__mod", mm_mod},
      {"__idiv", mm_idiv}, {"__pow", m_pow}, {"__unm", mm_unm}, {"__band", mm_band}, {"__bor", mm_bor},
      {"__bxor", mm_bxor}, {"__bnot", mm_bnot}, {"__tostring", mm_tostring}, {"__eq", mm_eq},
  };
  for (auto& m : metas) {
    push_guarded(L, m.fn);
    lua_setfield(L, mt, m.name);
  }
  lua_pop(L, 1);  // mt

  register_functions(L, module, kModule, "lathe.");
  add_tensor_methods(L, module, kMethods);

  lua_getfield(L, LUA_REGISTRYINDEX, "lathe.Tensor.methods");
  int methods = lua_gettop(L);
  for (const auto& e : kUnary) {
    push_guarded(L, call_unary, &e);
    lua_setfield(L, methods, e.name);
    add_help(std::string("Tensor:") + e.name, std::string("x:") + e.name + "()", e.doc);
    if (lua_getfield(L, module, e.name) == LUA_TNIL) {
      push_guarded(L, call_unary, &e);
      lua_setfield(L, module, e.name);
    }
    lua_pop(L, 1);
  }
  for (const auto& e : kBinary) {
    push_guarded(L, call_binary, &e);
    lua_setfield(L, methods, e.name);
    add_help(std::string("Tensor:") + e.name, std::string("a:") + e.name + "(b)", e.doc);
    if (lua_getfield(L, module, e.name) == LUA_TNIL) {
      push_guarded(L, call_binary, &e);
      lua_setfield(L, module, e.name);
    }
    lua_pop(L, 1);
  }
  push_guarded(L, m_where);
  lua_setfield(L, methods, "where");
  lua_pop(L, 1);
}

}  // namespace lathe::script
