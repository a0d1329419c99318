-- Rules for the GUI breakpoint and rules-editor tests (tests/gui/data/*.lua).
return lathe.ruleset("gui-test", {
  lathe.rule("mul-one",  "Mul(x, 1)",   "x"),
  lathe.rule("neg-neg",  "Neg(Neg(x))", "x"),
  lathe.rule("add-zero", "Add(x, 0)",   "x"),
})
