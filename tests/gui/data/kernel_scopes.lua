-- GUI test: the kernel level groups kernels by the scope of their nodes (blocks.lua).
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local function has(list, x) for _, v in ipairs(list) do if v == x then return true end end return false end
local out = ...
gui.compile("c")
gui.level("kernel")
gui.frames(2)
local st = gui.state()
local b = gui.boxes()
expect(has(b, "▶ h.0") and has(b, "▶ h.1") and has(b, "▶ h.2"), "one box per block: " .. table.concat(b, ", "))
expect(st.boxes < st.kernels, "fewer boxes (" .. st.boxes .. ") than kernels (" .. st.kernels .. ")")
local top = st.boxes
gui.screenshot(out .. "/kernel_scopes_top.png")
gui.expand("h.1")
gui.frames(2)
st = gui.state()
local frames
b, frames = gui.boxes()
expect(frames[1] == "h.1" and not has(b, "▶ h.1") and has(b, "▶ h.0"), "h.1's kernels in a frame, the others collapsed")
gui.screenshot(out .. "/kernel_scopes_h1.png")
gui.collapse("h.1")
gui.frames(2)
expect(gui.state().boxes == top and gui.state().frames == 0, "collapsed again")

-- The kernel colour legend names every kernel (it scrolls when long), not the first eight.
gui.level("primitive")
gui.color("kernel")
gui.frames(2)
st = gui.state()
expect(st.kernels > 8, "more than 8 kernels in blocks.lua, got " .. st.kernels)
expect(st.legend == st.kernels + 1, "the legend lists all " .. st.kernels .. " kernels and 'no kernel', got " .. st.legend)
gui.screenshot(out .. "/kernel_scopes_legend.png")
gui.color("category")
