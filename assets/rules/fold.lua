-- fold.lua — constant folding of scalar constants (lathe.rules.builtin("fold")).
--
-- Each rule computes in double precision and lathe.const rounds (floats) or wraps
-- (integers) to the result dtype; for one f32 add or mul this equals the f32 result. The
-- engine broadcasts a scalar result to the root's shape. Integer division and modulo
-- follow ops.def: truncation toward zero, x/0 = 0, x%0 = 0.
local function fold2(f)
  return function(m) return lathe.const(f(m.a, m.b), m.dtype) end
end
local function trunc(x) if x >= 0 then return math.floor(x) else return math.ceil(x) end end
local function is_int(m) return m.dtype ~= "f16" and m.dtype ~= "bf16" and m.dtype ~= "f32" and m.dtype ~= "f64" end

return lathe.ruleset("fold", {
  lathe.rule("fold-add",   "Add(Const(a), Const(b))",  fold2(function(a, b) return a + b end)),
  lathe.rule("fold-mul",   "Mul(Const(a), Const(b))",  fold2(function(a, b) return a * b end)),
  lathe.rule("fold-max",   "Max(Const(a), Const(b))",  fold2(function(a, b)
    if a ~= a or b ~= b then return 0/0 end
    return math.max(a, b) end)),
  lathe.rule("fold-idiv",  "IDiv(Const(a), Const(b))", fold2(function(a, b)
    if b == 0 then return 0 end
    return trunc(a / b) end), { where = is_int }),
  lathe.rule("fold-mod",   "Mod(Const(a), Const(b))",  fold2(function(a, b)
    if b == 0 then return 0 end
    return math.fmod(a, b) end)),
  lathe.rule("fold-cmplt", "CmpLT(Const(a), Const(b))", function(m) return lathe.const(m.a < m.b and 1 or 0, "bool") end),
  lathe.rule("fold-cmpne", "CmpNE(Const(a), Const(b))", function(m) return lathe.const(m.a ~= m.b and 1 or 0, "bool") end),
  lathe.rule("fold-neg",   "Neg(Const(a))",   function(m) return lathe.const(-m.a, m.dtype) end),
  lathe.rule("fold-recip", "Recip(Const(a))", function(m) return lathe.const(1 / m.a, m.dtype) end),
  lathe.rule("fold-sqrt",  "Sqrt(Const(a))",  function(m) return lathe.const(math.sqrt(m.a), m.dtype) end),
  lathe.rule("fold-exp2",  "Exp2(Const(a))",  function(m) return lathe.const(2 ^ m.a, m.dtype) end),
  lathe.rule("fold-log2",  "Log2(Const(a))",  function(m) return lathe.const(math.log(m.a, 2), m.dtype) end),
  lathe.rule("fold-sin",   "Sin(Const(a))",   function(m) return lathe.const(math.sin(m.a), m.dtype) end),
})
