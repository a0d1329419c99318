-- graph.lua — a small graph file: a .lua FILE returns a graph.
local x = lathe.input("x", {"B", 8}, "f32")
local y = ((x + 0) * 2):reciprocal():reciprocal() + (lathe.const(1, "f32") + lathe.const(2, "f32"))
return lathe.graph{ y = y }
