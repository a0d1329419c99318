-- GUI test: profile, heat colouring, the profile table + roofline and the bar chart.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ... or "/tmp"
local ok = pcall(gui.profile)
expect(not ok, "gui.profile() to fail before compiling")
gui.compile("c")
local ms = gui.profile(3)
local st = gui.state()
expect(st.profiled and ms > 0 and st.total_ms == ms, "a profile with a positive time")
expect(st.color == "heat", "heat colouring after profiling, got " .. st.color)
gui.level("kernel")
gui.select_kernel(1)
gui.tab("roofline")
gui.frames(3)
expect(gui.state().profile_columns == 7, "all 7 profile table columns in view, got " .. gui.state().profile_columns)
expect(gui.state().boxes == 4, "4 boxes at the kernel level")
gui.screenshot(out .. "/profile_roofline.png")
gui.tab("bars")
