-- GUI test: a scope that holds one op is drawn as that op's box, not a "▶ add · 1 op" box.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.level("tensor")
gui.collapse_all()
gui.expand("h.0")
gui.frames(2)
local b = gui.boxes()
local titles = table.concat(b, ", ")
for _, t in ipairs(b) do
  expect(t ~= "▶ add" and t ~= "▶ bias", "no box for a one-op scope, got " .. titles)
end
local adds = 0
for _, t in ipairs(b) do if t == "Add" then adds = adds + 1 end end
expect(adds == 2, "h.0's add and bias drawn as their Add boxes, got " .. titles)
-- the bias weight is an attribute of its Add, and selecting it lands there
gui.select("h.0.b")
gui.frames(2)
expect(gui.state().selected_summary == "Input h.0.b", "the bias selected, got " .. tostring(gui.state().selected_summary))
gui.screenshot(out .. "/one_op_scope.png")
