-- tune_graph.lua — a small graph for the GUI test of the Tune tab (tune.lua): a column sum
-- read down a 384×256 matrix (strided: the tuner's reduce_rows helps) and an odd-sized
-- matmul (33×70 by 70×50), so a whole-graph tune has kernels of three kinds.
local x = lathe.input("x", {384, 256})
local a = lathe.input("a", {33, 70})
local b = lathe.input("b", {70, 50})
return lathe.graph{ colsum = x:sum({0}), y = a:matmul(b):relu() }
