-- 07-mlp-train-step.lua — forward, cross-entropy loss, backward (autodiff) and an SGD step.
local x = lathe.input("x", {32, 784})
local labels = lathe.input("labels", {32}, "i64")
local w1, b1 = lathe.input("fc1.w", {784, 128}), lathe.input("fc1.b", {128})
local w2, b2 = lathe.input("fc2.w", {128, 10}), lathe.input("fc2.b", {10})
local logits = lathe.scope("forward", function()
  return (x:matmul(w1) + b1):relu():matmul(w2) + b2
end)
local loss = logits:cross_entropy(labels)
local params = { w1, b1, w2, b2 }
local updates = lathe.sgd_step(params, lathe.grad(loss, params), 0.01)
local outs = { {"loss", loss} }
for i, name in ipairs({"fc1.w", "fc1.b", "fc2.w", "fc2.b"}) do outs[#outs + 1] = { "new." .. name, updates[i] } end
return lathe.graph(outs)
