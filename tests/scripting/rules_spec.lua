-- rules_spec.lua — the rule DSL and rewrite sessions exactly as SPEC.md writes them.
local rules = lathe.ruleset("mine", {
  lathe.rule("add-zero",  "Add(x, 0)",       "x"),
  lathe.rule("double",    "Mul(x, 2)",       "Add(x, x)"),
  lathe.rule("fold-add",  "Add(Const(a), Const(b))",
             function(m) return lathe.const(m.a + m.b, m.dtype) end),
  lathe.rule("recip2",    "Recip(Recip(x))", "x",
             { where = function(m) return m.x.dtype ~= "f16" end }),
})
assert(#rules == 4)

local x = lathe.input("x", {4}, "f32")
local k = lathe.const(3, "f32") + lathe.const(4, "f32")
local y = ((x + 0) * 2):reciprocal():reciprocal() * k
local g = lathe.graph{ y = y }
local before = g:text()
local n0 = #g

local inputs = { x = lathe.tensor({1, -2, 3.5, 0.25}) }
local want = lathe.run(g, inputs).y

local s = lathe.rewrite(g, rules, { check = true })  -- check: numeric check of every step
local st = s:step()
assert(st ~= nil and st.index == 1 and type(st.rule) == "string")
assert(type(st.root) == "number" and type(st.removed) == "table" and type(st.added) == "table")
assert(tostring(st):match("^#1 [%w%-]+ @%%%d+: %-%d+ %+%d+ ?~?%d*$"), tostring(st))  -- ~N: users rebuilt
local more = s:step(2)
assert(#more == 2)
s:run()
local fired = {}
for _, h in ipairs(s:history()) do fired[h.rule] = true end
assert(fired["add-zero"] and fired["double"] and fired["fold-add"] and fired["recip2"], "every rule fired")
assert(s:step() == nil, "fixpoint")
local last = #s
local g2 = s:graph()
assert(#g2 < n0, "graph got smaller")
assert(lathe.allclose(lathe.run(g2, inputs).y, want))

-- time travel: back / seek give the same graphs as replaying from scratch
s:back()
assert(s:current() == last - 1)
s:seek(0)
assert(s:graph():text() == before)
s:seek(2)
local replay = lathe.rewrite(g, rules)
replay:step(2)
assert(replay:graph():text() == s:graph():text())
s:seek(last)

local d = s:diff(0, #s)                               -- added / removed / changed
assert(type(d.added) == "table" and type(d.removed) == "table" and type(d.changed) == "table")
assert(#d.removed > 0)
assert(tostring(d) ~= "")

-- breakpoints stop run() before a rule fires
local s2 = lathe.rewrite(g, rules)
s2:breakpoint("double")
local r = s2:run()
assert(r.stop == "breakpoint" and r.rule == "double")
for _, h in ipairs(s2:history()) do assert(h.rule ~= "double") end

-- stats: per rule tried / matched / fired / time
local stats = s:stats()
assert(stats["double"].fired >= 1 and stats["double"].tried >= 1 and stats["double"].time >= 0)
assert(tostring(stats):find("double"))

-- why: the deepest point where a pattern failed
local s3 = lathe.rewrite(g, rules)
local xin = s3:graph():input("x")
assert(type(s3:why("double", xin)) == "string")

-- rules.builtin/rules.load report clearly when a set is missing
local ok, err = pcall(lathe.rules.builtin, "no-such-set")
assert(not ok and err:find("no built%-in rule set 'no%-such%-set'"), err)
print("ok")
