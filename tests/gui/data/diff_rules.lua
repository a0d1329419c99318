-- Rules for the GUI rewrite-diff test (diff.lua): one replaces a node, one removes two.
return lathe.ruleset("gui-diff", {
  lathe.rule("mul-two", "Mul(x, 2)",   "Add(x, x)"),
  lathe.rule("neg-neg", "Neg(Neg(x))", "x"),
})
