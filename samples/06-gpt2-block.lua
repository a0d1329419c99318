-- 06-gpt2-block.lua — one GPT-2-small block forward: T=128, d=768, 12 heads.
local d, heads = 768, 12
local function dense(x, n_in, n_out, name)
  return lathe.scope(name, function()
    return x:matmul(lathe.input(name .. ".w", {n_in, n_out})) + lathe.input(name .. ".b", {n_out})
  end)
end
local function ln(t, name)
  return lathe.scope(name, function()
    return t:layer_norm(1, lathe.input(name .. ".w", {d}), lathe.input(name .. ".b", {d}), 1e-5)
  end)
end
local x = lathe.input("x", {1, 128, d})
local y = lathe.scope("block0", function()
  local a = lathe.scope("attn", function()
    return ln(x, "ln_1"):multi_head_attention(lathe.input("attn.c_attn.w", {d, 3 * d}), lathe.input("attn.c_attn.b", {3 * d}),
                                              lathe.input("attn.c_proj.w", {d, d}), lathe.input("attn.c_proj.b", {d}), heads, true)
  end)
  local h = x + a
  local m = lathe.scope("mlp", function()
    local f = dense(ln(h, "ln_2"), d, 4 * d, "mlp.c_fc"):gelu("tanh")
    return dense(f, 4 * d, d, "mlp.c_proj")
  end)
  return h + m
end)
return lathe.graph{ y = y }
