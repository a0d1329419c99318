-- GUI test: breakpoints on rules and per-rule stats in the rewrite timeline. A run stops
-- before the breakpoint rule fires (the node it would rewrite is outlined), a step then
-- fires it, and the stats count what fired.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
local data = gui.state().file:match("^(.*/)") or "./"
gui.load_rules(data .. "bp_rules.lua")
local tl = gui.timeline()
expect(tl and #tl.rules == 3 and tl.step == 0, "a session with 3 rules at step 0")
expect(tl.rules[1].name == "mul-one" and tl.rules[2].name == "neg-neg", "rules listed as written")
gui.breakpoint("neg-neg")
tl = gui.timeline()
expect(#tl.breakpoints == 1 and tl.stats["neg-neg"].breakpoint, "a breakpoint on neg-neg")

local said = gui.rewrite("run")
expect(said:find("breakpoint", 1, true), "run to stop at the breakpoint, said: " .. said)
tl = gui.timeline()
local st = gui.state()
expect(tl.step == 1 and tl.break_rule == "neg-neg" and st.break_rule == "neg-neg", "stopped at step 1 before neg-neg")
expect(st.break_node and st.break_node >= 0, "the node neg-neg would rewrite")
expect(tl.stats["mul-one"].fired == 1 and tl.stats["neg-neg"].fired == 0, "mul-one fired once, neg-neg not yet")
expect(tl.stats["mul-one"].tried >= 1 and tl.stats["mul-one"].ms >= 0, "tries and time counted")
gui.tab("timeline")
gui.frames(3)
gui.screenshot(out .. "/breakpoint.png")

said = gui.rewrite("step")   -- a step fires the breakpoint rule
tl = gui.timeline()
expect(tl.step == 2 and tl.stats["neg-neg"].fired == 1 and tl.break_rule == nil, "the step fired neg-neg")
gui.rewrite("run")           -- it stops only before a rule fires from a run, not again here
tl = gui.timeline()
expect(tl.step == 3 and tl.stats["add-zero"].fired == 1, "ran to the fixpoint, add-zero fired")
expect(gui.state().nodes == 2, "x and Exp2 are left, got " .. gui.state().nodes)

gui.rewrite("seek", 1)       -- time travel keeps the stats and the breakpoints
tl = gui.timeline()
expect(tl.step == 1 and tl.last == 3 and #tl.breakpoints == 1, "at step 1 of 3")
gui.breakpoint("neg-neg", false)
expect(#gui.timeline().breakpoints == 0, "the breakpoint cleared")
expect(not pcall(gui.breakpoint, "no-such-rule"), "a breakpoint on an unknown rule to fail")
expect(not pcall(gui.rewrite, "sideways"), "an unknown rewrite command to fail")
gui.frames(2)
