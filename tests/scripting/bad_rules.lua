-- bad_rules.lua — rules that misbehave stop the session at that step with a message that
-- names the rule; the graph stays as it was, and the script keeps running.
local x = lathe.input("x", {4}, "f32")
local g = lathe.graph{ y = (x * 2):exp() }
local before = g:text()

local function expect_failure(rules, pattern)
  local s = lathe.rewrite(g, rules)
  local ok, err = pcall(function() return s:step() end)
  assert(not ok, "the step should fail")
  assert(err:find(pattern), err)
  assert(s:current() == 0 and #s == 0, "no step recorded")
  assert(s:graph():text() == before, "graph unchanged")
  return s
end

-- wrong shape
expect_failure({ lathe.rule("bad-shape", "Mul(x, 2)", function(m) return lathe.input("z", {7}, "f32") end) },
               "bad%-shape")
-- wrong dtype
expect_failure({ lathe.rule("bad-dtype", "Mul(x, 2)", function(m) return m.x:to("f16") end) },
               "bad%-dtype")
-- a Lua error inside the rule
expect_failure({ lathe.rule("oops", "Mul(x, 2)", function(m) return m.nope.field end) }, "oops")
-- a rule that never returns (budget applies inside rules too; the test runs with a small budget)
expect_failure({ lathe.rule("spin", "Mul(x, 2)", function(m) while true do end end) }, "instruction budget")
-- a where-condition that errors
expect_failure({ lathe.rule("bad-where", "Mul(x, 2)", "Add(x, x)", { where = function(m) error("no") end }) },
               "bad%-where")

-- two rules that undo each other: run() reports a cycle naming them, graph unchanged
local s = lathe.rewrite(g, {
  lathe.rule("to-add", "Mul(x, 2)", "Add(x, x)"),
  lathe.rule("to-mul", "Add(x, x)", "Mul(x, 2)"),
}, { batch = false, max_steps = 50 })
local ok, err = pcall(function() return s:run() end)
assert(not ok and (err:find("to%-add") or err:find("to%-mul")), err)
-- still usable afterwards
s:seek(0)
assert(s:graph():text() == before)

-- a bad pattern is a clear error at definition
local ok2, err2 = pcall(lathe.rule, "typo", "Mull(x, 2)", "x")
assert(not ok2 and err2:find("Mull"), err2)
-- a replacement using an unbound name
local ok3, err3 = pcall(lathe.rule, "unbound", "Mul(x, 2)", "Add(y, y)")
assert(not ok3 and err3:find("y"), err3)
print("ok")
