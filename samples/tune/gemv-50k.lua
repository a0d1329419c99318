-- gemv-50k.lua — a GEMV with a 50k-wide output (GPT-2's logits for one token): 1×768 · 768×50257.
local x = lathe.input("x", {1, 768})
local w = lathe.input("w", {768, 50257})
return lathe.graph{ logits = x:matmul(w) }
