-- bmm-long-k.lua — a batched matmul with a long reduction and odd sides: 3 × (17×1000 · 1000×37).
local a = lathe.input("a", {3, 17, 1000})
local b = lathe.input("b", {3, 1000, 37})
return lathe.graph{ y = a:matmul(b) }
