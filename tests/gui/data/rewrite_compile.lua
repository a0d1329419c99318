-- GUI test: compile, then step a rewrite rule (as the timeline does): the kernels are
-- marked out of date until recompiled, and recompiling shows the new graph's kernels.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.compile("c")
local before = gui.state()
expect(before.kernels == 1 and not before.stale, "one up-to-date kernel")
lathe.cmd.rules("simplify")
gui.frames(2)
expect(not gui.state().stale, "loading rules alone changes nothing")
lathe.cmd.step("1")
gui.frames(3)
local st = gui.state()
expect(st.nodes < before.nodes, "the step removed a node (" .. before.nodes .. " -> " .. st.nodes .. ")")
expect(st.stale and st.compiled, "kernels marked out of date after the step")
gui.level("kernel")
gui.frames(3)
gui.screenshot(out .. "/rewrite_stale.png")
gui.compile("c")
expect(not gui.state().stale, "up to date after recompiling")
