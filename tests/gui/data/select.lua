-- GUI test: search and gui.select match names and ids exactly before substrings.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
gui.frames(1)
local id = gui.select("y")
expect(gui.state().selected_summary == "Neg", "gui.select('y') to pick the output y (Neg), got " .. tostring(gui.state().selected_summary))
gui.select("Cop")            -- no exact match: the substring finds the Copy
expect(gui.state().selected_summary == "Copy", "a substring match when nothing matches exactly")
gui.select("x")
expect(gui.state().selected_summary == "Input x", "the input named x")
gui.select("%" .. id)
expect(gui.state().selected == id, "%N selects node N")
local ok = pcall(gui.select, "nothing-like-this")
expect(not ok, "an error for no match")
