-- A small random MLP for the packed weight-int4 tests (weights are seeded constants), batch 3:
-- x [3, 96] -> linear 160 -> relu -> matmul [160, 64] (ONNX MatMul layout) -> tanh ->
-- linear 11 (prime); K = 96, 160, 64 are multiples of 32 (96 and 160 odd multiples), none of 64.
local x = lathe.input("x", {3, 96})
local w1 = lathe.randn({160, 96}, 1)
local w2 = lathe.randn({160, 64}, 2)
local w3 = lathe.randn({11, 64}, 3)
local h1 = x:linear(w1) * 0.1
local h = (h1:relu():matmul(w2) * 0.1):tanh()
return lathe.graph{ y = h:linear(w3), h1 = h1 }
