-- A small random MLP whose contractions all have an even K (38, 54, 30): in dynamic mode the
-- int8 GEMM runs them as u8 × i8 pairs (dot4sat16); widths 54, 30 and 11 (padded to 16).
-- x [64, 38] -> linear 54 -> relu -> matmul [54, 30] -> tanh -> linear 11 (mlp_b64.lua: odd K).
local x = lathe.input("x", {64, 38})
local w1 = lathe.randn({54, 38}, 1)
local w2 = lathe.randn({54, 30}, 2)
local w3 = lathe.randn({11, 30}, 3)
local h1 = x:linear(w1) * 0.2
local h = (h1:relu():matmul(w2) * 0.2):tanh()
return lathe.graph{ y = h:linear(w3), h1 = h1 }
