-- colsum-4099.lua — a column reduction with a prime-ish width: the sum over the rows of 1000×4099.
local x = lathe.input("x", {1000, 4099})
return lathe.graph{ y = x:sum(0) }
