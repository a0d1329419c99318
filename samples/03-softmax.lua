-- 03-softmax.lua — softmax over the last dim of 64x1000.
local x = lathe.input("x", {64, 1000})
return lathe.graph{ y = x:softmax(-1) }
