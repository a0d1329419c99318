-- softmax-77.lua — a softmax over 77 (CLIP's text length): attention scores 12×77×77.
local x = lathe.input("x", {12, 77, 77})
return lathe.graph{ y = x:softmax(-1) }
