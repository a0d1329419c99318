-- 02-convnet.lua — 2x (conv3x3 + relu + maxpool2), then a linear layer, on 8x1x28x28.
local x = lathe.input("x", {8, 1, 28, 28})
local function block(h, name, c_in, c_out)
  return lathe.scope(name, function()
    local w = lathe.input(name .. ".w", {c_out, c_in, 3, 3})
    local b = lathe.input(name .. ".b", {c_out})
    return h:conv2d(w, b, { padding = 1 }):relu():max_pool2d(2)
  end)
end
local h = block(x, "conv1", 1, 8)
h = block(h, "conv2", 8, 16)
local logits = lathe.scope("fc", function()
  return h:flatten(1):matmul(lathe.input("fc.w", {16 * 7 * 7, 10})) + lathe.input("fc.b", {10})
end)
return lathe.graph{ logits = logits }
