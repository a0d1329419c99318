-- GUI test: the rewrite timeline's diff. After each step the boxes that survive keep their
-- places (moved == 0), the boxes the step removed are drawn as ghosts where they were and
-- the new ones are marked; Back is a step too; Re-layout lays the graph out afresh.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
local data = gui.state().file:match("^(.*/)") or "./"
gui.weights(true)   -- the Const 2 the first step removes is a box (a ghost) of its own
gui.load_rules(data .. "diff_rules.lua")
gui.frames(2)
local st = gui.state()
expect(st.nodes == 11 and st.ghosts == 0 and st.added_boxes == 0, "the graph as loaded, no diff yet")

gui.rewrite("step")   -- mul-two: Mul(x, 2) -> Add(x, x); its users are rebuilt
gui.frames(2)
st = gui.state()
expect(gui.timeline().step == 1, "step 1")
expect(st.layout == "stable", "the step keeps the old places, got " .. tostring(st.layout))
expect(st.moved == 0 and st.kept >= 8, "no box moved (" .. st.moved .. " moved, " .. st.kept .. " kept)")
expect(st.ghosts == 2, "Mul and Const 2 as ghosts, got " .. st.ghosts)
expect(st.added_boxes == 1, "the new Add marked, got " .. st.added_boxes)
gui.tab("timeline")
gui.screenshot(out .. "/diff_step1.png")

gui.rewrite("step")   -- neg-neg: both Negs go, nothing new but rebuilt users
gui.frames(2)
st = gui.state()
expect(st.layout == "stable" and st.moved == 0, "step 2 keeps the places too")
expect(st.ghosts == 2 and st.added_boxes == 0, "two Neg ghosts and nothing added, got " .. st.ghosts .. "/" .. st.added_boxes)
expect(st.nodes == 8, "8 nodes after two steps, got " .. st.nodes)
gui.screenshot(out .. "/diff_step2.png")

gui.rewrite("back")   -- back to step 1: the Negs come back (added), nothing left
gui.frames(2)
st = gui.state()
expect(gui.timeline().step == 1 and st.layout == "stable" and st.moved == 0, "back keeps the places")
expect(st.added_boxes == 2 and st.ghosts == 0, "the two Negs back and marked, got " .. st.added_boxes .. "/" .. st.ghosts)

gui.relayout()        -- afresh with dot: no ghosts, no marks
gui.frames(2)
st = gui.state()
expect(st.layout == "dot" and st.ghosts == 0 and st.added_boxes == 0, "a fresh layout without ghosts")
expect(st.boxes == 11 - 1, "boxes of step 1 shown, got " .. st.boxes)

-- Rule text, not a file name: gui.load_rules takes it too (written to a file of its own).
gui.load_rules('return lathe.ruleset("inline", { lathe.rule("neg-neg", "Neg(Neg(x))", "x") })')
local tl = gui.timeline()
expect(tl.step == 0 and #tl.rules == 1 and tl.rules[1].name == "neg-neg", "a session on the rule text's one rule")
