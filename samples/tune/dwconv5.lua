-- dwconv5.lua — a 5×5 depthwise convolution: 1×96×56×56, 96 groups, padding 2.
local x = lathe.input("x", {1, 96, 56, 56})
local w = lathe.input("w", {96, 1, 5, 5})
return lathe.graph{ y = x:conv2d(w, nil, 1, 2, 1, 96) }
