-- GUI test: the rules editor. Open a rules file, save a copy, break a rule and reload:
-- the error (file:line) goes to the error panel and above the text, and the rules loaded
-- before stay; fix it and reload: the new rule is there. A built-in set is never
-- overwritten.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
local data = gui.state().file:match("^(.*/)") or "./"
local copy = out .. "/edited_rules.lua"

gui.edit_rules(data .. "bp_rules.lua")
local text = gui.rules_text()
expect(text:find("neg-neg", 1, true), "the file's text in the editor")
local ok, why = gui.save_rules(copy, false)          -- a scratch copy to edit
expect(ok and gui.state().rules_file == copy and not gui.state().rules_dirty, "saved a copy: " .. tostring(why))
gui.load_rules(copy)
expect(#gui.timeline().rules == 3, "3 rules loaded from the copy")

-- Break line 5: the reload fails, the 3 rules stay loaded.
local broken = text:gsub('"Add%(x, 0%)"', '"Add(x,"')
gui.rules_text(broken)
expect(gui.state().rules_dirty, "the buffer marked modified")
ok, why = gui.save_rules()
expect(not ok and why:find("edited_rules.lua:5:", 1, true), "the error names file:line, got: " .. tostring(why))
local st = gui.state()
expect(st.error and st.error:find("cannot load rules", 1, true), "the error panel shows the failed load")
expect(st.rules_error_line == 5, "the editor marks line 5, got " .. tostring(st.rules_error_line))
local tl = gui.timeline()
expect(#tl.rules == 3 and tl.source == copy, "the previous rules stay loaded")
gui.tab("rules")
gui.frames(3)
gui.screenshot(out .. "/rules_error.png")

-- Fix it and add a rule: the reload works and the session has 4 rules.
local fixed = text:gsub('lathe.rule%("add%-zero"', 'lathe.rule("exp2-neg-neg", "Exp2(Neg(Neg(x)))", "Exp2(x)"),\n  lathe.rule("add-zero"')
gui.rules_text(fixed)
ok, why = gui.save_rules()
expect(ok, "the fixed rules to load: " .. tostring(why))
st = gui.state()
expect(st.rules_error_line == nil and st.error == nil, "the error cleared")
tl = gui.timeline()
expect(#tl.rules == 4 and tl.stats["exp2-neg-neg"], "the new rule loaded")
gui.rewrite("run")
expect(gui.state().nodes == 2, "the edited rules rewrite the graph")

-- A built-in set opens, but saving it over itself is refused.
gui.edit_rules("simplify")
ok, why = gui.save_rules()
expect(not ok and why:find("built-in", 1, true), "saving a built-in over itself refused")
expect(gui.rules_text():find("add-zero", 1, true), "the built-in's text shown")
gui.edit_rules(copy)
gui.tab("rules")
gui.frames(2)
