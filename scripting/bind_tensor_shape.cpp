// bind_tensor_shape.cpp — Tensor reductions (sum/mean/max … with axis/keepdim) and shape
// ops (reshape, permute, transpose, slice, pad, concat …) of core/frontend/tensor.h.
//
// Reductions take PyTorch's positional form x:sum(axis, keepdim) or an options table
// x:sum{axis=1, keepdim=true} (`dim` is accepted for `axis`); axis may be nil (all
// axes), an integer or a table of integers. Axes are 0-based, negative from the end.
// Functions that return several tensors in PyTorch (split, chunk) return a Lua array.
#include "scripting/tensor_args.h"

namespace lathe::script {

bool is_options_table(lua_State* L, int idx) {
  if (!lua_istable(L, idx)) return false;
  if (lua_rawgeti(L, idx, 1) != LUA_TNIL) { lua_pop(L, 1); return false; }
  lua_pop(L, 1);
  lua_pushnil(L);
  if (lua_next(L, idx) == 0) return false;  // {} is an (empty) axes list
  lua_pop(L, 2);
  return true;
}

std::vector<int> opt_axes(lua_State* L, int idx) {
  std::vector<int> axes;
  if (lua_isnoneornil(L, idx)) return axes;
  for (int64_t a : check_int_list(L, idx, "axis")) axes.push_back(static_cast<int>(a));
  return axes;
}

namespace {

// Axis + keepdim in either form; `first` is the stack index after the tensor.
struct ReduceArgs { Axes axes; bool keepdim = false; int correction = 1; };
ReduceArgs reduce_args(lua_State* L, int first) {
  ReduceArgs r;
  if (is_options_table(L, first)) {
    lua_getfield(L, first, "axis");
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_getfield(L, first, "dim"); }
    r.axes = opt_axes(L, lua_gettop(L));
    lua_pop(L, 1);
    r.keepdim = opt_field_bool(L, first, "keepdim", false);
    r.correction = (int)opt_field_number(L, first, "correction", 1);
    return r;
  }
  r.axes = opt_axes(L, first);
  r.keepdim = opt_bool(L, first + 1, false);
  if (is_options_table(L, first + 1)) {  // x:var(1, {correction=0, keepdim=true})
    r.keepdim = opt_field_bool(L, first + 1, "keepdim", false);
    r.correction = (int)opt_field_number(L, first + 1, "correction", 1);
  }
  return r;
}

using ReduceFn = Tensor (*)(const Tensor&, Axes, bool);
struct ReduceEntry { const char* name; ReduceFn fn; const char* doc; };
Tensor r_max(const Tensor& x, Axes a, bool k) { return max(x, std::move(a), k); }
Tensor r_min(const Tensor& x, Axes a, bool k) { return min(x, std::move(a), k); }
const ReduceEntry kReduce[] = {
    {"sum", sum, "sum over axes"}, {"mean", mean, "mean over axes"}, {"prod", prod, "product over axes"},
    {"amax", amax, "maximum over axes"}, {"amin", amin, "minimum over axes"}, {"any", any, "bool: any true"},
    {"all", all, "bool: all true"},
};

int call_reduce(lua_State* L) {
  auto* e = static_cast<const ReduceEntry*>(guarded_data(L));
  ReduceArgs r = reduce_args(L, 2);
  push_tensor(L, e->fn(tensor_arg(L, 1), r.axes, r.keepdim));
  return 1;
}

// x:max() / x:max(axis, keepdim) reduce; x:max(y) is the elementwise maximum (PyTorch).
int m_max(lua_State* L) {
  if (is_tensor_like(L, 2)) { push_tensor(L, maximum(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
  ReduceArgs r = reduce_args(L, 2);
  push_tensor(L, r_max(tensor_arg(L, 1), r.axes, r.keepdim));
  return 1;
}
int m_min(lua_State* L) {
  if (is_tensor_like(L, 2)) { push_tensor(L, minimum(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
  ReduceArgs r = reduce_args(L, 2);
  push_tensor(L, r_min(tensor_arg(L, 1), r.axes, r.keepdim));
  return 1;
}
int m_var(lua_State* L) {
  ReduceArgs r = reduce_args(L, 2);
  push_tensor(L, var(tensor_arg(L, 1), r.axes, r.correction, r.keepdim));
  return 1;
}
int m_std(lua_State* L) {
  ReduceArgs r = reduce_args(L, 2);
  push_tensor(L, std_dev(tensor_arg(L, 1), r.axes, r.correction, r.keepdim));
  return 1;
}
std::optional<int> opt_axis(lua_State* L, int idx) {
  if (lua_isnoneornil(L, idx)) return std::nullopt;
  return (int)check_int(L, idx, "axis");
}
int m_argmax(lua_State* L) { push_tensor(L, argmax(tensor_arg(L, 1), opt_axis(L, 2), opt_bool(L, 3, false))); return 1; }
int m_argmin(lua_State* L) { push_tensor(L, argmin(tensor_arg(L, 1), opt_axis(L, 2), opt_bool(L, 3, false))); return 1; }
int m_logsumexp(lua_State* L) {
  ReduceArgs r = reduce_args(L, 2);
  push_tensor(L, logsumexp(tensor_arg(L, 1), r.axes, r.keepdim));
  return 1;
}
int m_cumsum(lua_State* L) { push_tensor(L, cumsum(tensor_arg(L, 1), (int)check_int(L, 2, "axis"))); return 1; }

// ---------------------------------------------------------------- shape ops
// Shapes given as a table or as varargs: x:reshape(2, 3) == x:reshape{2, 3}.
Shape shape_args(lua_State* L, int first) {
  if (lua_istable(L, first)) return check_shape(L, first);
  Shape s;
  for (int i = first; i <= lua_gettop(L); ++i) {
    if (lua_type(L, i) == LUA_TSTRING) {
      auto sym = SymInt::parse(lua_tostring(L, i));
      if (!sym) raise(L, std::string("cannot parse dim '") + lua_tostring(L, i) + "'");
      s.push_back(*sym);
    } else {
      s.push_back(SymInt(check_int(L, i, "dim")));
    }
  }
  return s;
}
std::vector<int> int_args(lua_State* L, int first, const char* what) {
  std::vector<int> v;
  if (lua_istable(L, first)) {
    for (int64_t x : check_int_list(L, first, what)) v.push_back((int)x);
    return v;
  }
  for (int i = first; i <= lua_gettop(L); ++i) v.push_back((int)check_int(L, i, what));
  return v;
}
std::vector<int64_t> int64_args(lua_State* L, int first, const char* what) {
  if (lua_istable(L, first)) return check_int_list(L, first, what);
  std::vector<int64_t> v;
  for (int i = first; i <= lua_gettop(L); ++i) v.push_back(check_int(L, i, what));
  return v;
}
void push_tensor_list(lua_State* L, const std::vector<Tensor>& ts) {
  lua_createtable(L, (int)ts.size(), 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    push_tensor(L, ts[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}
std::vector<Tensor> tensor_list(lua_State* L, int idx) {
  if (!lua_istable(L, idx)) raise(L, "expected a table of tensors, got a " + type_of(L, idx));
  std::vector<Tensor> out;
  lua_Integer n = luaL_len(L, idx);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, idx, i);
    out.push_back(tensor_arg(L, lua_gettop(L)));
    lua_pop(L, 1);
  }
  if (out.empty()) raise(L, "expected at least one tensor");
  return out;
}
SymInt sym_arg(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    auto s = SymInt::parse(lua_tostring(L, idx));
    if (!s) raise(L, std::string("cannot parse dim '") + lua_tostring(L, idx) + "'");
    return *s;
  }
  return SymInt(check_int(L, idx, "dim"));
}

int m_reshape(lua_State* L) { push_tensor(L, reshape(tensor_arg(L, 1), shape_args(L, 2))); return 1; }
int m_permute(lua_State* L) { push_tensor(L, permute(tensor_arg(L, 1), int_args(L, 2, "permutation"))); return 1; }
int m_transpose(lua_State* L) {
  Tensor x = tensor_arg(L, 1);
  push_tensor(L, transpose(x, (int)opt_int(L, 2, -2, "axis"), (int)opt_int(L, 3, -1, "axis")));
  return 1;
}
int m_expand(lua_State* L) { push_tensor(L, expand(tensor_arg(L, 1), shape_args(L, 2))); return 1; }
int m_broadcast_to(lua_State* L) { push_tensor(L, broadcast_to(tensor_arg(L, 1), shape_args(L, 2))); return 1; }
int m_squeeze(lua_State* L) { push_tensor(L, squeeze(tensor_arg(L, 1), opt_axes(L, 2))); return 1; }
int m_unsqueeze(lua_State* L) { push_tensor(L, unsqueeze(tensor_arg(L, 1), (int)check_int(L, 2, "axis"))); return 1; }
int m_flatten(lua_State* L) {
  push_tensor(L, flatten(tensor_arg(L, 1), (int)opt_int(L, 2, 0, "start_dim"), (int)opt_int(L, 3, -1, "end_dim")));
  return 1;
}
int m_unflatten(lua_State* L) {
  push_tensor(L, unflatten(tensor_arg(L, 1), (int)check_int(L, 2, "axis"), check_shape(L, 3)));
  return 1;
}
int m_slice(lua_State* L) {
  std::optional<int64_t> start, stop;
  if (!lua_isnoneornil(L, 3)) start = check_int(L, 3, "start");
  if (!lua_isnoneornil(L, 4)) stop = check_int(L, 4, "stop");
  int64_t step = opt_int(L, 5, 1, "step");
  if (step == 0) raise(L, "slice: step must not be zero");
  push_tensor(L, slice(tensor_arg(L, 1), (int)check_int(L, 2, "axis"), start, stop, step));
  return 1;
}
int m_narrow(lua_State* L) {
  push_tensor(L, narrow(tensor_arg(L, 1), (int)check_int(L, 2, "axis"), sym_arg(L, 3), sym_arg(L, 4)));
  return 1;
}
int m_select(lua_State* L) {
  push_tensor(L, select(tensor_arg(L, 1), (int)check_int(L, 2, "axis"), check_int(L, 3, "index")));
  return 1;
}
// x:pad(pads [, value]): pads = {{before, after}, …} from dim 0, or PyTorch's flat F.pad
// form {left, right, top, bottom, …} starting from the LAST dim.
int m_pad(lua_State* L) {
  Tensor x = tensor_arg(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<std::pair<SymInt, SymInt>> pads;
  lua_rawgeti(L, 2, 1);
  bool nested = lua_istable(L, -1);
  lua_pop(L, 1);
  if (nested) {
    lua_Integer n = luaL_len(L, 2);
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_geti(L, 2, i);
      auto pr = check_int_list(L, -1, "pad");
      if (pr.size() != 2) raise(L, "pad: each entry must be {before, after}");
      pads.push_back({SymInt(pr[0]), SymInt(pr[1])});
      lua_pop(L, 1);
    }
  } else {
    auto flat = check_int_list(L, 2, "pad");
    if (flat.size() % 2) raise(L, "pad: the flat form needs an even number of values (PyTorch F.pad order)");
    if ((int)flat.size() / 2 > x.rank()) raise(L, "pad: more pairs than dims");
    pads.assign(x.rank(), {SymInt(0), SymInt(0)});
    for (size_t k = 0; k < flat.size() / 2; ++k)
      pads[x.rank() - 1 - k] = {SymInt(flat[2 * k]), SymInt(flat[2 * k + 1])};
  }
  push_tensor(L, pad(x, pads, lua_isnoneornil(L, 3) ? Scalar(0) : scalar_arg(L, 3)));
  return 1;
}
int l_cat(lua_State* L) { push_tensor(L, concat(tensor_list(L, 1), (int)axis_arg(L, 2, 0))); return 1; }
int l_stack(lua_State* L) { push_tensor(L, stack(tensor_list(L, 1), (int)axis_arg(L, 2, 0))); return 1; }
int m_split(lua_State* L) {
  Tensor x = tensor_arg(L, 1);
  int axis = (int)opt_int(L, 3, 0, "axis");
  if (lua_istable(L, 2)) push_tensor_list(L, split(x, check_int_list(L, 2, "sizes"), axis));
  else push_tensor_list(L, split(x, check_int(L, 2, "split_size"), axis));
  return 1;
}
int m_chunk(lua_State* L) {
  push_tensor_list(L, chunk(tensor_arg(L, 1), check_int(L, 2, "chunks"), (int)opt_int(L, 3, 0, "axis")));
  return 1;
}
int m_flip(lua_State* L) { push_tensor(L, flip(tensor_arg(L, 1), int_args(L, 2, "axis"))); return 1; }
int m_gather(lua_State* L) {
  push_tensor(L, gather(tensor_arg(L, 1), (int)check_int(L, 2, "axis"), tensor_arg(L, 3)));
  return 1;
}
int m_take_along_dim(lua_State* L) {
  push_tensor(L, take_along_dim(tensor_arg(L, 1), tensor_arg(L, 2), (int)check_int(L, 3, "axis")));
  return 1;
}
int m_index_select(lua_State* L) {
  push_tensor(L, index_select(tensor_arg(L, 1), (int)check_int(L, 2, "axis"), tensor_arg(L, 3)));
  return 1;
}
int m_embedding(lua_State* L) { push_tensor(L, embedding(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_one_hot(lua_State* L) {
  push_tensor(L, one_hot(tensor_arg(L, 1), check_int(L, 2, "num_classes"), check_dtype(L, 3, DType::I64)));
  return 1;
}
int m_tril(lua_State* L) { push_tensor(L, tril(tensor_arg(L, 1), opt_int(L, 2, 0, "diagonal"))); return 1; }
int m_triu(lua_State* L) { push_tensor(L, triu(tensor_arg(L, 1), opt_int(L, 2, 0, "diagonal"))); return 1; }
int m_repeat(lua_State* L) { push_tensor(L, repeat(tensor_arg(L, 1), int64_args(L, 2, "repeats"))); return 1; }
int m_tile(lua_State* L) { push_tensor(L, tile(tensor_arg(L, 1), int64_args(L, 2, "repeats"))); return 1; }
int m_repeat_interleave(lua_State* L) {
  push_tensor(L, repeat_interleave(tensor_arg(L, 1), check_int(L, 2, "repeats"), (int)opt_int(L, 3, 0, "axis")));
  return 1;
}
int m_size(lua_State* L) {  // x:size() → shape table; x:size(axis) → one dim
  NodeRef n = check_node(L, 1);
  if (lua_isnoneornil(L, 2)) { push_shape(L, n->shape); return 1; }
  const SymInt& d = n->shape[check_axis(L, 2, (int)n->shape.size())];
  if (auto v = d.try_value()) lua_pushinteger(L, *v);
  else lua_pushstring(L, d.to_string().c_str());
  return 1;
}

const Function kModule[] = {
    {"cat", l_cat, "lathe.cat(tensors [, axis=0])", "concatenate along axis"},
    {"concat", l_cat, "lathe.concat(tensors [, axis=0])", "alias of cat"},
    {"stack", l_stack, "lathe.stack(tensors [, axis=0])", "stack along a new axis"},
    {nullptr, nullptr, nullptr, nullptr},
};

const Function kMethods[] = {
    {"max", m_max, "x:max([axis [, keepdim]]) | x:max(y)", "maximum over axes, or elementwise with y"},
    {"min", m_min, "x:min([axis [, keepdim]]) | x:min(y)", "minimum over axes, or elementwise with y"},
    {"var", m_var, "x:var([axis [, keepdim]]) | x:var{axis=, correction=1, keepdim=}", "variance"},
    {"std", m_std, "x:std([axis [, keepdim]]) | x:std{axis=, correction=1, keepdim=}", "standard deviation"},
    {"argmax", m_argmax, "x:argmax([axis [, keepdim]])", "index of the first maximum (i64)"},
    {"argmin", m_argmin, "x:argmin([axis [, keepdim]])", "index of the first minimum (i64)"},
    {"logsumexp", m_logsumexp, "x:logsumexp(axis [, keepdim])", "log(sum(exp(x)))"},
    {"cumsum", m_cumsum, "x:cumsum(axis)", "inclusive prefix sum"},
    {"reshape", m_reshape, "x:reshape(dims) | x:reshape(d0, d1, …)", "reshape (one dim may be -1)"},
    {"view", m_reshape, "x:view(dims)", "alias of reshape"},
    {"permute", m_permute, "x:permute(perm) | x:permute(p0, p1, …)", "reorder axes"},
    {"transpose", m_transpose, "x:transpose([a=-2, b=-1])", "swap two axes"},
    {"expand", m_expand, "x:expand(dims)", "broadcast size-1 dims (-1 keeps a dim)"},
    {"broadcast_to", m_broadcast_to, "x:broadcast_to(dims)", "broadcast to dims"},
    {"squeeze", m_squeeze, "x:squeeze([axes])", "drop size-1 dims"},
    {"unsqueeze", m_unsqueeze, "x:unsqueeze(axis)", "insert a size-1 dim"},
    {"flatten", m_flatten, "x:flatten([start=0 [, end=-1]])", "merge dims start..end"},
    {"unflatten", m_unflatten, "x:unflatten(axis, sizes)", "split one dim into sizes"},
    {"slice", m_slice, "x:slice(axis, start, stop [, step])", "Python slicing along one axis; nil bounds = ends"},
    {"narrow", m_narrow, "x:narrow(axis, start, length)", "a contiguous range along axis"},
    {"select", m_select, "x:select(axis, index)", "x[…, index, …] (drops the axis)"},
    {"pad", m_pad, "x:pad({{before, after}, …} | {left, right, top, bottom, …} [, value])", "pad (nested: from dim 0; flat: PyTorch F.pad order, last dim first)"},
    {"split", m_split, "x:split(size | sizes [, axis=0])", "an array of parts"},
    {"chunk", m_chunk, "x:chunk(n [, axis=0])", "an array of n parts"},
    {"flip", m_flip, "x:flip(axes)", "reverse along axes"},
    {"gather", m_gather, "x:gather(axis, index)", "torch.gather"},
    {"take_along_dim", m_take_along_dim, "x:take_along_dim(index, axis)", "torch.take_along_dim"},
    {"index_select", m_index_select, "x:index_select(axis, index)", "pick slices by a 1-D index"},
    {"embedding", m_embedding, "lathe.embedding(index, weight)", "rows of weight [V, D] by index"},
    {"one_hot", m_one_hot, "index:one_hot(num_classes [, dtype=\"i64\"])", "one-hot encoding"},
    {"tril", m_tril, "x:tril([diagonal=0])", "lower triangle"},
    {"triu", m_triu, "x:triu([diagonal=0])", "upper triangle"},
    {"repeat", m_repeat, "x:repeat(reps)", "torch.repeat: tile along each dim"},
    {"tile", m_tile, "x:tile(reps)", "numpy.tile"},
    {"repeat_interleave", m_repeat_interleave, "x:repeat_interleave(repeats [, axis=0])", "repeat each element"},
    {"size", m_size, "x:size([axis])", "the shape, or one dim"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_tensor_shape(lua_State* L, int module) {
  register_functions(L, module, kModule, "lathe.");
  add_tensor_methods(L, module, kMethods);
  lua_getfield(L, LUA_REGISTRYINDEX, "lathe.Tensor.methods");
  int methods = lua_gettop(L);
  for (const auto& e : kReduce) {
    push_guarded(L, call_reduce, &e);
    lua_setfield(L, methods, e.name);
    add_help(std::string("Tensor:") + e.name, std::string("x:") + e.name + "([axis [, keepdim]])", e.doc);
    if (lua_getfield(L, module, e.name) == LUA_TNIL) {
      push_guarded(L, call_reduce, &e);
      lua_setfield(L, module, e.name);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

}  // namespace lathe::script
