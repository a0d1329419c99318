-- simplify.lua — algebraic identities, one rule per line (lathe.rules.builtin("simplify")).
--
-- Float safety: an identity is applied to floats only when it holds for every float
-- value, NaN and ±inf included.
--   x + 0 -> x       exact except for the sign of zero (-0 + 0 = +0); accepted, since
--                    comparisons and every Lathe op treat -0 and +0 alike.
--   x * 1, --x, max(x, x), where(c, x, x): exact for every value.
--   x * 0 -> 0       UNSAFE for floats (NaN*0 = NaN, inf*0 = NaN): integers and bool only.
--   x + (-x) -> 0    UNSAFE for floats (inf - inf = NaN): integers only.
--   1/(1/x) -> x     not exact in floating point (rounding, overflow of 1/x for tiny x); kept
--                    as in SPEC.md for f32/f64, skipped for f16 where 1/x overflows easily.
--   and(x, x), or(x, x) -> x; xor(x, x) -> 0: bool and integers (the ops reject floats).
local not_float = function(m) return m.dtype ~= "f16" and m.dtype ~= "bf16" and m.dtype ~= "f32" and m.dtype ~= "f64" end

return lathe.ruleset("simplify", {
  lathe.rule("add-zero",    "Add(x, 0)",          "x"),
  lathe.rule("mul-one",     "Mul(x, 1)",          "x"),
  lathe.rule("mul-zero",    "Mul(x, 0)",          "0",  { where = not_float }),
  lathe.rule("add-neg-self","Add(x, Neg(x))",     "0",  { where = not_float }),
  lathe.rule("neg-neg",     "Neg(Neg(x))",        "x"),
  lathe.rule("recip-recip", "Recip(Recip(x))",    "x",
             { where = function(m) return m.x.dtype ~= "f16" end }),
  lathe.rule("max-self",    "Max(x, x)",          "x"),
  lathe.rule("and-self",    "And(x, x)",          "x"),
  lathe.rule("or-self",     "Or(x, x)",           "x"),
  lathe.rule("xor-self",    "Xor(x, x)",          "0"),
  lathe.rule("where-same",  "Where(c, x, x)",     "x"),
  lathe.rule("where-true",  "Where(1, x, y)",     "x"),
  lathe.rule("where-false", "Where(0, x, y)",     "y"),
  lathe.rule("idiv-one",    "IDiv(x, 1)",         "x"),
  lathe.rule("copy-copy",   "Copy(Copy(x))",      "Copy(x)"),
})
