-- custom_pass.lua — a Lua function over the graph API, stepped through like a rule.
local x = lathe.input("x", {3})
local g = lathe.graph{ y = x:exp() + 1 }
local s = lathe.rewrite(g, lathe.ruleset("none", {}))
local st = s:apply("double-output", function(gr)
  local y = gr:output("y")
  return lathe.graph{ y = y * 2 }
end)
assert(st ~= nil and st.rule == "double-output" and #s == 1)
local r0 = lathe.run(g, { x = lathe.tensor({0, 1, 2}) }).y:tolist()
local r1 = lathe.run(s:graph(), { x = lathe.tensor({0, 1, 2}) }).y:tolist()
for i = 1, 3 do assert(math.abs(r1[i] - 2 * r0[i]) < 1e-5) end
s:back()
assert(s:current() == 0)
-- a pass that errors leaves the session where it was
local ok, err = pcall(function() return s:apply("broken", function(gr) error("boom") end) end)
assert(not ok and err:find("broken") and err:find("boom"), err)
assert(s:current() == 0)
print("ok")
