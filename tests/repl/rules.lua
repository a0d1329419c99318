-- rules.lua — a rule file written from SPEC.md alone.
return lathe.ruleset("mine", {
  lathe.rule("add-zero",  "Add(x, 0)",       "x"),
  lathe.rule("double",    "Mul(x, 2)",       "Add(x, x)"),
  lathe.rule("fold-add",  "Add(Const(a), Const(b))",
             function(m) return lathe.const(m.a + m.b, m.dtype) end),
  lathe.rule("recip2",    "Recip(Recip(x))", "x",
             { where = function(m) return m.x.dtype ~= "f16" end }),
})
