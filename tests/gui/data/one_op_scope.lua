-- one_op_scope.lua — a model for the GUI test of scopes holding one op (as ONNX names each
-- node's own scope: "/h.0/Add:Add"): two blocks, each with a scope "mm" (a matmul and its
-- weight), "bias" (one Add of a broadcast weight) and "add" (one Add).
local x = lathe.input("x", {4, 8})
for i = 0, 1 do
  x = lathe.scope("h." .. i, function()
    local y = lathe.scope("mm", function() return x:matmul(lathe.input("h." .. i .. ".w", {8, 8})) end)
    y = lathe.scope("bias", function() return y + lathe.input("h." .. i .. ".b", {8}) end)
    return lathe.scope("add", function() return x + y end)
  end)
end
return lathe.graph{ y = x }
