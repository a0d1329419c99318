-- GUI test: a graph too large for dot to lay out quickly (lathe gui --demo 2600: 26,022
-- nodes). Each layer's weights are built in its scope, so they are members of its box
-- (2,603 boxes in a chain), laid out in rows by rank at once (dot would take seconds).
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.frames(1)
local st = gui.state()
expect(st.level == "tensor", "a huge graph to open at the tensor level, got " .. st.level)
expect(st.boxes == 2603 and st.edges == 2602, "2,603 boxes in a chain (x, 2,600 layers, head, softmax), got " .. st.boxes .. " / " .. st.edges)
expect(st.layout == "layered", "the rows-by-rank layout, got " .. tostring(st.layout))
expect(st.layout_ms < 2000, "a layout within 2 s, took " .. st.layout_ms .. " ms")
gui.screenshot(out .. "/huge_layered.png")
gui.select("w7")              -- a weight: its layer opens, and it is an attribute of the node that reads it
expect(gui.state().selected_summary == "Input w7", "w7 selected")
expect(gui.state().expanded > 0, "the scopes holding w7 opened")
gui.collapse_all()
gui.frames(2)
st = gui.state()
expect(st.boxes == 2603 and st.expanded == 0, "the same boxes collapsed again")
