-- gpt2_12.lua — a whole GPT-2 small forward in Lua (token and position embeddings, 12
-- pre-LN blocks under scopes h.0 … h.11, ln_f, the tied LM head), T=SEQ (default 64), for
-- the desktop app at real-model scale (tests/gui, tests/gui/bench/model_times.sh).
--   lathe gui tests/gui/models/gpt2_12.lua
local L, T, d, heads, vocab = 12, 64, 768, 12, 50257
-- Scopes are short ("c_fc"); weights carry the whole name ("h.3.mlp.c_fc.w").
local function dense(x, n_in, n_out, scope, name)
  return lathe.scope(scope, function()
    return x:matmul(lathe.input(name .. ".w", {n_in, n_out})) + lathe.input(name .. ".b", {n_out})
  end)
end
local function ln(t, scope, name)
  return lathe.scope(scope, function()
    return t:layer_norm(1, lathe.input(name .. ".w", {d}), lathe.input(name .. ".b", {d}), 1e-5)
  end)
end
local function block(x, i)
  local p = "h." .. i .. "."
  return lathe.scope("h." .. i, function()
    local a = lathe.scope("attn", function()
      return ln(x, "ln_1", p .. "ln_1"):multi_head_attention(
        lathe.input(p .. "attn.c_attn.w", {d, 3 * d}), lathe.input(p .. "attn.c_attn.b", {3 * d}),
        lathe.input(p .. "attn.c_proj.w", {d, d}), lathe.input(p .. "attn.c_proj.b", {d}), heads, true)
    end)
    local h = x + a
    local m = lathe.scope("mlp", function()
      local f = dense(ln(h, "ln_2", p .. "ln_2"), d, 4 * d, "c_fc", p .. "mlp.c_fc"):gelu("tanh")
      return dense(f, 4 * d, d, "c_proj", p .. "mlp.c_proj")
    end)
    return h + m
  end)
end
local tokens = lathe.input("tokens", {1, T}, "i64")
local wte = lathe.input("wte", {vocab, d})
local x = lathe.scope("embeddings", function()
  local pos = lathe.input("positions", {1, T}, "i64")
  return lathe.embedding(tokens, wte) + lathe.embedding(pos, lathe.input("wpe", {1024, d}))
end)
for i = 0, L - 1 do x = block(x, i) end
x = lathe.scope("ln_f", function()
  return x:layer_norm(1, lathe.input("ln_f.w", {d}), lathe.input("ln_f.b", {d}), 1e-5)
end)
local logits = lathe.scope("head", function() return x:matmul(wte:transpose()) end)
return lathe.graph{ logits = logits }
