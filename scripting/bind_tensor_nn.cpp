// bind_tensor_nn.cpp — neural-network composites of core/frontend/nn.h as Tensor methods
// and lathe.* functions: matmul/linear, conv and pooling, softmax and norms, attention,
// losses. Argument order follows torch.nn.functional; where PyTorch takes many keyword
// arguments, an options table is accepted too (x:conv2d(w, b, {stride=2, padding=1})).
#include "core/frontend/autodiff.h"
#include "scripting/tensor_args.h"

namespace lathe::script {
namespace {

// 2 → {2, 2}; {1, 2} → {1, 2} (for stride / padding / kernel of 2-D ops).
std::vector<int64_t> pair_arg(lua_State* L, int idx, const char* what, std::vector<int64_t> dflt) {
  if (lua_isnoneornil(L, idx)) return dflt;
  if (lua_type(L, idx) == LUA_TNUMBER) { int64_t v = check_int(L, idx, what); return {v, v}; }
  auto v = check_int_list(L, idx, what);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) raise(L, std::string(what) + ": expected a number or a pair {h, w}");
  return v;
}
// Reads field `key` of the options table at idx as a pair, when present.
std::vector<int64_t> pair_field(lua_State* L, int idx, const char* key, std::vector<int64_t> dflt) {
  if (!lua_istable(L, idx)) return dflt;
  lua_getfield(L, idx, key);
  auto r = pair_arg(L, lua_gettop(L), key, dflt);
  lua_pop(L, 1);
  return r;
}

int m_matmul(lua_State* L) { push_tensor(L, matmul(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_bmm(lua_State* L) { push_tensor(L, bmm(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_outer(lua_State* L) { push_tensor(L, outer(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_dot(lua_State* L) { push_tensor(L, dot(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_linear(lua_State* L) {
  push_tensor(L, linear(tensor_arg(L, 1), tensor_arg(L, 2), opt_tensor_arg(L, 3)));
  return 1;
}

// x:conv2d(weight [, bias [, stride [, padding [, dilation [, groups]]]]]) or
// x:conv2d(weight, bias, {stride=, padding=, dilation=, groups=})
int m_conv2d(lua_State* L) {
  Conv2dOptions o;
  if (is_options_table(L, 4)) {
    o.stride = pair_field(L, 4, "stride", o.stride);
    o.padding = pair_field(L, 4, "padding", o.padding);
    o.dilation = pair_field(L, 4, "dilation", o.dilation);
    o.groups = (int64_t)opt_field_number(L, 4, "groups", 1);
  } else {
    o.stride = pair_arg(L, 4, "stride", o.stride);
    o.padding = pair_arg(L, 5, "padding", o.padding);
    o.dilation = pair_arg(L, 6, "dilation", o.dilation);
    o.groups = opt_int(L, 7, 1, "groups");
  }
  push_tensor(L, conv2d(tensor_arg(L, 1), tensor_arg(L, 2), opt_tensor_arg(L, 3), o));
  return 1;
}
int m_conv1d(lua_State* L) {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  if (is_options_table(L, 4)) {
    stride = (int64_t)opt_field_number(L, 4, "stride", 1);
    padding = (int64_t)opt_field_number(L, 4, "padding", 0);
    dilation = (int64_t)opt_field_number(L, 4, "dilation", 1);
    groups = (int64_t)opt_field_number(L, 4, "groups", 1);
  } else {
    stride = opt_int(L, 4, 1, "stride");
    padding = opt_int(L, 5, 0, "padding");
    dilation = opt_int(L, 6, 1, "dilation");
    groups = opt_int(L, 7, 1, "groups");
  }
  push_tensor(L, conv1d(tensor_arg(L, 1), tensor_arg(L, 2), opt_tensor_arg(L, 3), stride, padding, dilation, groups));
  return 1;
}

// x:max_pool2d(kernel [, stride [, padding [, dilation]]]) or x:max_pool2d{kernel=, stride=, …}
Pool2dOptions pool_options(lua_State* L) {
  Pool2dOptions o;
  if (is_options_table(L, 2)) {
    lua_getfield(L, 2, "kernel");
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_getfield(L, 2, "kernel_size"); }
    o.kernel = pair_arg(L, lua_gettop(L), "kernel", o.kernel);
    lua_pop(L, 1);
    o.stride = pair_field(L, 2, "stride", {});
    o.padding = pair_field(L, 2, "padding", o.padding);
    o.dilation = pair_field(L, 2, "dilation", o.dilation);
    o.count_include_pad = opt_field_bool(L, 2, "count_include_pad", true);
    return o;
  }
  o.kernel = pair_arg(L, 2, "kernel_size", o.kernel);
  o.stride = pair_arg(L, 3, "stride", {});
  o.padding = pair_arg(L, 4, "padding", o.padding);
  return o;
}
int m_max_pool2d(lua_State* L) {
  Pool2dOptions o = pool_options(L);
  if (!is_options_table(L, 2)) o.dilation = pair_arg(L, 5, "dilation", o.dilation);
  push_tensor(L, max_pool2d(tensor_arg(L, 1), o));
  return 1;
}
int m_avg_pool2d(lua_State* L) {
  Pool2dOptions o = pool_options(L);
  // PyTorch: avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)
  if (!is_options_table(L, 2)) {
    if (opt_bool(L, 5, false)) raise(L, "avg_pool2d: ceil_mode=true is not supported");
    o.count_include_pad = opt_bool(L, 6, true);
  }
  push_tensor(L, avg_pool2d(tensor_arg(L, 1), o));
  return 1;
}
int m_adaptive_avg_pool2d(lua_State* L) {
  auto hw = pair_arg(L, 2, "output_size", {1, 1});
  push_tensor(L, adaptive_avg_pool2d(tensor_arg(L, 1), hw[0], hw[1]));
  return 1;
}
int m_global_avg_pool2d(lua_State* L) { push_tensor(L, global_avg_pool2d(tensor_arg(L, 1))); return 1; }

int m_softmax(lua_State* L) { push_tensor(L, softmax(tensor_arg(L, 1), (int)axis_arg(L, 2, -1))); return 1; }
int m_log_softmax(lua_State* L) {
  push_tensor(L, log_softmax(tensor_arg(L, 1), (int)axis_arg(L, 2, -1)));
  return 1;
}
// normalized_shape: a number (one dim), a table (its length = the number of trailing dims)
// or nil (the last dim).
int normalized_dims(lua_State* L, int idx) {
  if (lua_isnoneornil(L, idx) || lua_type(L, idx) == LUA_TNUMBER) return 1;
  if (lua_istable(L, idx)) return (int)luaL_len(L, idx);
  raise(L, "normalized_shape: expected a number or a table of dims");
}
// x:layer_norm(normalized_shape [, weight [, bias [, eps=1e-5]]])
int m_layer_norm(lua_State* L) {
  push_tensor(L, layer_norm(tensor_arg(L, 1), normalized_dims(L, 2), opt_tensor_arg(L, 3), opt_tensor_arg(L, 4),
                            opt_number(L, 5, 1e-5)));
  return 1;
}
int m_rms_norm(lua_State* L) {
  push_tensor(L, rms_norm(tensor_arg(L, 1), normalized_dims(L, 2), opt_tensor_arg(L, 3), opt_number(L, 4, 1e-6)));
  return 1;
}
// x:batch_norm(running_mean, running_var [, weight [, bias [, training=false [, momentum [, eps]]]]])
int m_batch_norm(lua_State* L) {
  if (opt_bool(L, 6, false)) raise(L, "batch_norm: training=true is not supported (inference statistics only)");
  push_tensor(L, batch_norm(tensor_arg(L, 1), tensor_arg(L, 2), tensor_arg(L, 3), opt_tensor_arg(L, 4),
                            opt_tensor_arg(L, 5), opt_number(L, 8, 1e-5)));
  return 1;
}
int m_group_norm(lua_State* L) {
  push_tensor(L, group_norm(tensor_arg(L, 1), check_int(L, 2, "num_groups"), opt_tensor_arg(L, 3),
                            opt_tensor_arg(L, 4), opt_number(L, 5, 1e-5)));
  return 1;
}
// x:instance_norm([weight [, bias [, eps]]]) (no running statistics)
int m_instance_norm(lua_State* L) {
  push_tensor(L, instance_norm(tensor_arg(L, 1), opt_tensor_arg(L, 2), opt_tensor_arg(L, 3), opt_number(L, 4, 1e-5)));
  return 1;
}
// x:dropout([p=0.5 [, training=false [, seed=0]]])
int m_dropout(lua_State* L) {
  double p = opt_number(L, 2, 0.5);
  if (p < 0 || p > 1) raise(L, "dropout: p must be in [0, 1]");
  push_tensor(L, dropout(tensor_arg(L, 1), p, opt_bool(L, 3, false), (uint64_t)opt_int(L, 4, 0, "seed")));
  return 1;
}
// lathe.scaled_dot_product_attention(q, k, v [, attn_mask [, dropout_p=0 [, is_causal [, scale]]]])
// or (q, k, v, {attn_mask=, is_causal=, scale=})
int m_sdpa(lua_State* L) {
  Tensor q = tensor_arg(L, 1), k = tensor_arg(L, 2), v = tensor_arg(L, 3);
  std::optional<Tensor> mask;
  bool causal = false;
  std::optional<double> scale;
  if (is_options_table(L, 4)) {
    lua_getfield(L, 4, "attn_mask");
    mask = opt_tensor_arg(L, lua_gettop(L));
    lua_pop(L, 1);
    causal = opt_field_bool(L, 4, "is_causal", false);
    lua_getfield(L, 4, "scale");
    if (!lua_isnil(L, -1)) scale = lua_tonumber(L, -1);
    lua_pop(L, 1);
  } else {
    mask = opt_tensor_arg(L, 4);
    if (opt_number(L, 5, 0) != 0) raise(L, "scaled_dot_product_attention: dropout_p must be 0");
    causal = opt_bool(L, 6, false);
    if (!lua_isnoneornil(L, 7)) scale = opt_number(L, 7, 1);
  }
  push_tensor(L, scaled_dot_product_attention(q, k, v, mask, causal, scale));
  return 1;
}
// x:multi_head_attention(w_qkv, b_qkv, w_out, b_out, heads [, causal=true])
int m_mha(lua_State* L) {
  push_tensor(L, multi_head_attention(tensor_arg(L, 1), tensor_arg(L, 2), opt_tensor_arg(L, 3), tensor_arg(L, 4),
                                      opt_tensor_arg(L, 5), check_int(L, 6, "heads"), opt_bool(L, 7, true)));
  return 1;
}
int m_cross_entropy(lua_State* L) { push_tensor(L, cross_entropy(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_nll_loss(lua_State* L) { push_tensor(L, nll_loss(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_mse_loss(lua_State* L) { push_tensor(L, mse_loss(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_l1_loss(lua_State* L) { push_tensor(L, l1_loss(tensor_arg(L, 1), tensor_arg(L, 2))); return 1; }
int m_bce_logits(lua_State* L) {
  push_tensor(L, binary_cross_entropy_with_logits(tensor_arg(L, 1), tensor_arg(L, 2)));
  return 1;
}

std::vector<Tensor> tensor_array(lua_State* L, int idx, const char* what) {
  if (!lua_istable(L, idx)) raise(L, std::string(what) + ": expected a table of tensors");
  std::vector<Tensor> out;
  lua_Integer n = luaL_len(L, idx);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, idx, i);
    out.push_back(tensor_arg(L, lua_gettop(L)));
    lua_pop(L, 1);
  }
  return out;
}
void push_tensor_array(lua_State* L, const std::vector<Tensor>& ts) {
  lua_createtable(L, (int)ts.size(), 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    push_tensor(L, ts[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}
// lathe.grad(loss, {params…} [, seed]) → {grads…} (reverse-mode autodiff)
int l_grad(lua_State* L) {
  push_tensor_array(L, grad(tensor_arg(L, 1), tensor_array(L, 2, "grad"), opt_tensor_arg(L, 3)));
  return 1;
}
// lathe.sgd_step({params…}, {grads…}, lr) → {updated…} (Assign nodes; make them outputs)
int l_sgd_step(lua_State* L) {
  push_tensor_array(L, sgd_step(tensor_array(L, 1, "sgd_step"), tensor_array(L, 2, "sgd_step"), luaL_checknumber(L, 3)));
  return 1;
}
// lathe.scope(name, fn): nodes built inside fn record `name` in their provenance path.
int l_scope(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  ProvenanceScope ps(name);
  lua_settop(L, 2);
  lua_call(L, 0, LUA_MULTRET);  // a Lua error unwinds through ps (C++ build of Lua)
  return lua_gettop(L) - 1;
}

const Function kModule[] = {
    {"grad", l_grad, "lathe.grad(loss, {params…} [, seed])", "gradients of loss w.r.t. params (reverse-mode autodiff)"},
    {"sgd_step", l_sgd_step, "lathe.sgd_step({params…}, {grads…}, lr)", "param - lr*grad written back (Assign); returns the updates"},
    {"scope", l_scope, "lathe.scope(name, function() … end)", "nodes built inside record name in their provenance"},
    {nullptr, nullptr, nullptr, nullptr},
};

const Function kMethods[] = {
    {"matmul", m_matmul, "a:matmul(b)", "matrix product (torch.matmul: batch dims broadcast)"},
    {"bmm", m_bmm, "a:bmm(b)", "batched matrix product [B, M, K] x [B, K, N]"},
    {"outer", m_outer, "a:outer(b)", "outer product of vectors"},
    {"dot", m_dot, "a:dot(b)", "dot product of vectors"},
    {"linear", m_linear, "x:linear(weight [, bias])", "x · weight^T + bias (weight [out, in])"},
    {"conv2d", m_conv2d, "x:conv2d(weight [, bias [, stride [, padding [, dilation [, groups]]]]])", "2-D convolution, NCHW (options table accepted)"},
    {"conv1d", m_conv1d, "x:conv1d(weight [, bias [, stride [, padding [, dilation [, groups]]]]])", "1-D convolution, NCL"},
    {"max_pool2d", m_max_pool2d, "x:max_pool2d(kernel [, stride [, padding [, dilation]]])", "2-D max pooling"},
    {"avg_pool2d", m_avg_pool2d, "x:avg_pool2d(kernel [, stride [, padding [, ceil_mode [, count_include_pad]]]])", "2-D average pooling"},
    {"adaptive_avg_pool2d", m_adaptive_avg_pool2d, "x:adaptive_avg_pool2d(output_size)", "adaptive average pooling"},
    {"global_avg_pool2d", m_global_avg_pool2d, "x:global_avg_pool2d()", "mean over H, W -> [N, C, 1, 1]"},
    {"softmax", m_softmax, "x:softmax([axis=-1]) or x:softmax{dim=-1}", "softmax along axis"},
    {"log_softmax", m_log_softmax, "x:log_softmax([axis=-1]) or {dim=-1}", "log of softmax along axis"},
    {"layer_norm", m_layer_norm, "x:layer_norm(normalized_shape [, weight [, bias [, eps=1e-5]]])", "layer normalization over the trailing dims"},
    {"rms_norm", m_rms_norm, "x:rms_norm(normalized_shape [, weight [, eps=1e-6]])", "RMS normalization"},
    {"batch_norm", m_batch_norm, "x:batch_norm(running_mean, running_var [, weight [, bias [, training=false [, momentum [, eps]]]]])", "inference batch norm"},
    {"group_norm", m_group_norm, "x:group_norm(num_groups [, weight [, bias [, eps]]])", "group normalization"},
    {"instance_norm", m_instance_norm, "x:instance_norm([weight [, bias [, eps]]])", "instance normalization"},
    {"dropout", m_dropout, "x:dropout([p=0.5 [, training=false [, seed=0]]])", "identity unless training"},
    {"scaled_dot_product_attention", m_sdpa, "lathe.scaled_dot_product_attention(q, k, v [, attn_mask [, dropout_p [, is_causal [, scale]]]])", "softmax(q k^T * scale + mask) v"},
    {"multi_head_attention", m_mha, "x:multi_head_attention(w_qkv, b_qkv, w_out, b_out, heads [, causal=true])", "GPT-2 style self-attention"},
    {"cross_entropy", m_cross_entropy, "logits:cross_entropy(target)", "mean cross-entropy (class indices or probabilities)"},
    {"nll_loss", m_nll_loss, "log_probs:nll_loss(target)", "mean negative log-likelihood"},
    {"mse_loss", m_mse_loss, "a:mse_loss(b)", "mean squared error"},
    {"l1_loss", m_l1_loss, "a:l1_loss(b)", "mean absolute error"},
    {"binary_cross_entropy_with_logits", m_bce_logits, "logits:binary_cross_entropy_with_logits(target)", "BCE on logits"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_tensor_nn(lua_State* L, int module) {
  register_functions(L, module, kModule, "lathe.");
  add_tensor_methods(L, module, kMethods);
}

}  // namespace lathe::script
