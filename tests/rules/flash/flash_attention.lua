-- The flash-attention rule set fires once per attention layer on the small GPT-2 and BERT
-- exports (causal Where mask; additive padding mask) and on the Lua composite (causal,
-- boolean and additive masks, scaled Q, grouped K/V heads), and the rewritten graphs match: the models
-- PyTorch's outputs (max|d| / max|ref| <= 1e-3), the composites the interpreter, on the
-- interpreter and the llvm backend (the fused kernel).
-- usage: lathe script flash_attention.lua MODELS_DIR
local dir = assert(arg and arg[1], "usage: flash_attention.lua MODELS_DIR")
local fa = lathe.rules.builtin("flash-attention")

local function count_fused(g)
  local n = 0
  for _, node in ipairs(g:nodes()) do
    if node.op == "Extern" and node.name == "attention" then n = n + 1 end
  end
  return n
end

local function max_abs(t)
  if type(t) == "number" then return math.abs(t) end
  local m = 0
  for _, x in ipairs(t) do m = math.max(m, max_abs(x)) end
  return m
end
-- max|got - want| <= 1e-3 * max|want|
local function max_rel(got, want)
  return lathe.allclose(got, want, 0, 1e-3 * max_abs(want:tolist()))
end

for _, m in ipairs({ { "gpt2_small", { tokens = "in_tokens" }, { logits = "out_logits" }, 2 },
                     { "bert_base", { input_ids = "in_input_ids", attention_mask = "in_attention_mask" },
                       { last_hidden = "out_last_hidden", pooled = "out_pooled" }, 2 } }) do
  local name, ins, outs, layers = m[1], m[2], m[3], m[4]
  local g = lathe.load(dir .. "/" .. name .. "/model.onnx")
  local s = lathe.rewrite(g, fa)
  s:run()
  local rg = s:graph()
  assert(count_fused(rg) == layers, name .. ": expected " .. layers .. " fused attentions, got " .. count_fused(rg))
  -- the text IR round-trips the fused op
  local again = lathe.parse(rg:text())
  assert(count_fused(again) == layers, name .. ": the text IR lost the fused op")
  local inputs = {}
  for k, f in pairs(ins) do inputs[k] = lathe.npy.load(dir .. "/" .. name .. "/npy/" .. f .. ".npy") end
  for _, backend in ipairs({ "interp", "llvm" }) do
    local got = lathe.run(again, inputs, { backend = backend })
    for o, f in pairs(outs) do
      local want = lathe.npy.load(dir .. "/" .. name .. "/npy/" .. f .. ".npy")
      local ok, why = max_rel(got[o], want)
      assert(ok, name .. " " .. o .. " on " .. backend .. ": " .. tostring(why))
    end
  end
end

-- composites: causal, bool mask, additive mask, scaled Q, odd T, batch 2
local function check(label, build, shapes, want_fused, causal)
  local g = build()
  local s = lathe.rewrite(g, fa, { check = true })
  s:run()
  local rg = s:graph()
  assert(count_fused(rg) == want_fused, label .. ": expected " .. want_fused .. " fused, got " .. count_fused(rg))
  if causal ~= nil then
    for _, node in ipairs(rg:nodes()) do
      if node.op == "Extern" then assert(node.text:find("ints=%[" .. causal), label .. ": causal flag: " .. node.text) end
    end
  end
  local inputs = {}
  for i, shp in pairs(shapes) do inputs[i] = lathe.randn(shp, #i + 3) end
  local want = lathe.run(g, inputs)
  local got = lathe.run(rg, inputs, { backend = "llvm" })
  for o, w in pairs(want) do assert(lathe.allclose(got[o], w, 1e-4, 1e-5), label .. ": " .. o .. " differs") end
end

for _, T in ipairs({ 1, 7, 129 }) do
  local s = { 2, 3, T, 16 }
  check("causal T=" .. T, function()
    local q, k, v = lathe.input("q", s), lathe.input("k", s), lathe.input("v", s)
    return lathe.graph{ out = lathe.scaled_dot_product_attention(q, k, v, nil, 0, true) }
  end, { q = s, k = s, v = s }, T == 1 and 0 or 1, 1)  -- a single score stays unfused (faster)
  check("additive mask T=" .. T, function()
    local q, k, v = lathe.input("q", s), lathe.input("k", s), lathe.input("v", s)
    local m = lathe.input("m", { 2, 1, 1, T })
    return lathe.graph{ out = lathe.scaled_dot_product_attention(q, k, v, m) }
  end, { q = s, k = s, v = s, m = { 2, 1, 1, T } }, T == 1 and 0 or 1, 0)
end
-- a boolean (non-causal) mask: tril with diagonal 0 kept but the first key always on
local s = { 1, 2, 9, 8 }
check("bool mask", function()
  local q, k, v = lathe.input("q", s), lathe.input("k", s), lathe.input("v", s)
  local i = lathe.arange(9):reshape({ 9, 1 })
  local j = lathe.arange(9):reshape({ 1, 9 })
  local keep = (j:le(i + 2)):logical_and(j:ge(i - 3))  -- a band, not causal
  return lathe.graph{ out = lathe.scaled_dot_product_attention(q, k, v, keep) }
end, { q = s, k = s, v = s }, 1, 0)
-- scaled Q (q * c before the product), scores scaled again and masked_fill'd causally
check("scaled q + masked_fill", function()
  local q, k, v = lathe.input("q", s), lathe.input("k", s), lathe.input("v", s)
  local tri = lathe.ones({ 9, 9 }):triu(1):to("bool")
  local sc = (q * 0.5):matmul(k:transpose(-1, -2)) * 0.25
  local p = sc:masked_fill(tri, -math.huge):softmax(-1)
  return lathe.graph{ out = p:matmul(v) }
end, { q = s, k = s, v = s }, 1, 1)
-- grouped K/V heads (GQA: 6 query heads, 2 K/V heads repeated with expand + reshape, as
-- repeat_interleave): fused reading the 2-head K and V themselves, not their repeat
for _, causal in ipairs({ false, true }) do
  local qs, kvs = { 2, 6, 11, 8 }, { 2, 2, 11, 8 }
  local function rep(t) return t:unsqueeze(2):expand({ 2, 2, 3, 11, 8 }):reshape({ 2, 6, 11, 8 }) end
  local build = function()
    local q, k, v = lathe.input("q", qs), lathe.input("k", kvs), lathe.input("v", kvs)
    return lathe.graph{ out = lathe.scaled_dot_product_attention(q, rep(k), rep(v), nil, 0, causal) }
  end
  check("grouped heads" .. (causal and " causal" or ""), build, { q = qs, k = kvs, v = kvs }, 1, causal and 1 or 0)
  local s = lathe.rewrite(build(), fa)
  s:run()
  local by_id = {}
  for _, node in ipairs(s:graph():nodes()) do by_id[node.id] = node end
  for _, node in ipairs(s:graph():nodes()) do
    if node.op == "Extern" then
      local k, v = by_id[node.inputs[2]], by_id[node.inputs[3]]
      assert(k.op == "Input" and v.op == "Input", "grouped heads: the fused op should read K and V unrepeated: " .. node.text)
    end
  end
end
print("ok")
