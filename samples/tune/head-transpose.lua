-- head-transpose.lua — attention's head transpose: 1×128×12×64 → 1×12×128×64, made contiguous.
local x = lathe.input("x", {1, 128, 12, 64})
return lathe.graph{ y = x:permute(0, 2, 1, 3) + 0 }
