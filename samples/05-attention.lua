-- 05-attention.lua — causal scaled dot-product attention, 2x12 heads, T=128, d=64.
local s = {2, 12, 128, 64}
local q, k, v = lathe.input("q", s), lathe.input("k", s), lathe.input("v", s)
local out = lathe.scaled_dot_product_attention(q, k, v, nil, 0, true)
return lathe.graph{ out = out }
