-- GUI test: run the graph, the inspector's value statistics for the selected node.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ... or "/tmp"
gui.select("Exp2")
expect(gui.stats() == nil, "no values before a run")
gui.run()
expect(gui.state().ran, "state.ran after gui.run()")
local v = gui.stats()
-- Exp2 of (x - rowmax) * log2(e): values in (0, 1], the row maxima exactly 1.
expect(v.ok and v.count == 32 and v.nans == 0 and v.infs == 0, "32 finite values")
expect(v.max == 1 and v.min > 0 and v.mean > 0 and v.mean < 1, "values in (0, 1] with max 1")
gui.select("Recip")
local r = gui.stats()
expect(r.ok and r.min > 0, "Recip of a positive sum is positive")
gui.select("Exp2")
gui.tab("inspector")
