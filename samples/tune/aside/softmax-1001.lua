-- softmax-1001.lua — a softmax over 1001 (an ImageNet head with a background class), 64 rows.
local x = lathe.input("x", {64, 1001})
return lathe.graph{ y = x:softmax(-1) }
