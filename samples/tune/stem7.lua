-- stem7.lua — a 7×7 stride-2 stem convolution: 1×3×224×224 → 1×64×112×112, padding 3.
local x = lathe.input("x", {1, 3, 224, 224})
local w = lathe.input("w", {64, 3, 7, 7})
return lathe.graph{ y = x:conv2d(w, nil, 2, 3) }
