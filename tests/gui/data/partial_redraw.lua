-- GUI test: while only the graph panel changes (panning), a frame draws only it and keeps
-- the rest of the window (views/redraw.h); anything else changing (a selection shown in
-- the inspector) draws the whole window again.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.frames(3)
for _ = 1, 20 do gui.pan(0, 10); gui.frames(1) end
local f = gui.frame_stats(20)
expect(f.partial >= 18, "panning frames to draw only the graph panel, got " .. f.partial .. " of 20")
gui.screenshot(out .. "/partial_pan.png")
gui.select("h.3.mlp.c_fc.w")   -- the inspector changes too
gui.frames(1)
expect(gui.frame_stats(1).partial == 0, "a full redraw when the inspector changes")
