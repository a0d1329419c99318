-- conv3s2-67.lua — a 3×3 stride-2 convolution, 67 channels in and out at 57×57 (odd everywhere).
local x = lathe.input("x", {1, 67, 57, 57})
local w = lathe.input("w", {67, 67, 3, 3})
return lathe.graph{ y = x:conv2d(w, nil, 2, 1) }
