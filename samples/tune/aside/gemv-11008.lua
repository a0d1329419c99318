-- gemv-11008.lua — a GEMV as in a 7B model's MLP up-projection for one token: 1×4096 · 4096×11008.
local x = lathe.input("x", {1, 4096})
local w = lathe.input("w", {4096, 11008})
return lathe.graph{ y = x:matmul(w) }
