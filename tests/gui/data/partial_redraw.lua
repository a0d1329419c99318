-- GUI test: while only the graph panel changes (panning), a frame draws only it and keeps
-- the rest of the window (views/redraw.h), and of the canvas clears only the tiles the
-- frame before drew on: after panning every way (boxes, labels, edges and frames crossing
-- where others were), the picture is the one a whole redraw gives (the test compares the
-- two screenshots pixel for pixel). Anything else changing (a selection shown in the
-- inspector) draws the whole window again.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.frames(3)
gui.expand("h.5")   -- a frame with boxes inside, and its edges
gui.frames(2)
local moves = {{0, 10}, {7, 0}, {0, -13}, {-11, 5}, {0, 37}, {29, -3}}
for i = 1, 24 do
  local m = moves[(i % #moves) + 1]
  gui.pan(m[1], m[2])
  gui.frames(1)
end
local f = gui.frame_stats(20)
expect(f.partial >= 18, "panning frames to draw only the graph panel, got " .. f.partial .. " of 20")
gui.screenshot(out .. "/partial_pan.png")
gui.full_redraw()
gui.screenshot(out .. "/partial_full.png")
gui.select("h.3.mlp.c_fc.w")   -- the inspector changes too
gui.frames(1)
expect(gui.frame_stats(1).partial == 0, "a full redraw when the inspector changes")
