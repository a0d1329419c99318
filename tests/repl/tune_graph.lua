-- tune_graph.lua — a column sum and a softmax over 77 with a symbolic batch: the :tune transcript (tune.in).
local x = lathe.input("x", {512, 256})
local y = lathe.input("y", {"B", 77})
return lathe.graph{ s = x:sum(0), t = y:softmax(1) }
