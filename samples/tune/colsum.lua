-- colsum.lua — a column reduction: the sum over the rows of a 4096×1024 matrix.
local x = lathe.input("x", {4096, 1024})
return lathe.graph{ y = x:sum(0) }
