-- bmm-odd.lua — odd-sized batched small matmuls: 64 × (17×33 · 33×29).
local a = lathe.input("a", {64, 17, 33})
local b = lathe.input("b", {64, 33, 29})
return lathe.graph{ y = a:matmul(b) }
