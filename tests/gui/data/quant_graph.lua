-- A small random MLP with odd sizes, batch 64, for the quantize pass tests (weights are
-- seeded constants): x [64, 37] -> linear 53 -> relu -> matmul [53, 29] (ONNX MatMul
-- layout) -> tanh -> linear 11, and a second output straight from the first layer.
local x = lathe.input("x", {64, 37})
local w1 = lathe.randn({53, 37}, 1)
local w2 = lathe.randn({53, 29}, 2)
local w3 = lathe.randn({11, 29}, 3)
local h1 = x:linear(w1) * 0.2
local h = (h1:relu():matmul(w2) * 0.2):tanh()
return lathe.graph{ y = h:linear(w3), h1 = h1 }
