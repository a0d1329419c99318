-- 04-layernorm.lua — layer norm over the last dim of 32x128x768, with weight and bias.
local x = lathe.input("x", {32, 128, 768})
local y = x:layer_norm({768}, lathe.input("weight", {768}), lathe.input("bias", {768}))
return lathe.graph{ y = y }
