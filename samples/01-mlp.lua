-- 01-mlp.lua — MLP 784-256-10, batch 32, relu, softmax (the Lua form of 01-mlp.lathe).
-- Weights are graph inputs; `lathe run samples/01-mlp.lua` fills them with seeded data.
local function dense(x, n_in, n_out, name)
  return lathe.scope(name, function()
    local w = lathe.input(name .. ".w", {n_in, n_out})
    local b = lathe.input(name .. ".b", {n_out})
    return x:matmul(w) + b
  end)
end
local x = lathe.input("x", {32, 784})
local h = dense(x, 784, 256, "fc1"):relu()
local probs = dense(h, 256, 10, "fc2"):softmax(-1)
return lathe.graph{ probs = probs }
