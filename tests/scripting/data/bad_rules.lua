-- bad_rules.lua — a rule whose replacement has the wrong shape.
return lathe.ruleset("bad", {
  lathe.rule("bad-shape", "Mul(x, 2)", function(m) return lathe.const(1, m.dtype, {3, 3}) end),
})
