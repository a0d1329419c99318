-- GUI test: a graph too large for dot to lay out quickly (lathe gui --demo 2600: 26,022
-- nodes, 7,805 boxes collapsed). The Input boxes each read by one layer fold into it, the
-- first picture is the quick rows-by-rank layout, and dot's layout replaces it when done.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.frames(1)
local st = gui.state()
expect(st.level == "tensor", "a huge graph to open at the tensor level, got " .. st.level)
expect(st.folded == 5203, "5,203 Input boxes folded into their layers, got " .. st.folded)
expect(st.boxes == 2602 and st.edges == 2601, "2,602 boxes in a chain, got " .. st.boxes .. " / " .. st.edges)
expect(st.layout == "provisional", "the quick layout first, got " .. tostring(st.layout))
gui.screenshot(out .. "/huge_provisional.png")
gui.select("w7")              -- a folded input selects the layer that reads it
expect(gui.state().selected_summary == "Input w7", "w7 selected")
for _ = 1, 300 do             -- dot runs in the background; frames keep coming meanwhile
  if gui.state().layout == "dot" then break end
  gui.frames(5)
end
st = gui.state()
expect(st.layout == "dot", "dot's layout swapped in, got " .. tostring(st.layout))
expect(st.boxes == 2602 and st.folded == 5203, "the same boxes after the swap")
