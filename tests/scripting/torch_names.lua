-- torch_names.lua — PyTorch names (x:dim(), x:numel(), x.T, masked_fill, expand_as, clone,
-- einsum, softmax{dim=-1}) checked against their long forms on the default backend; the
-- printed forms of s:history() and s:check(); step lines counted as :diff counts.
local function expect_error(f, pattern, what)
  local ok, err = pcall(f)
  assert(not ok, what .. ": expected an error")
  assert(tostring(err):find(pattern), what .. ": got " .. tostring(err))
end

local a, b = lathe.input("a", {3, 4}), lathe.input("b", {4, 5})
local bb, bc = lathe.input("bb", {2, 3, 4}), lathe.input("bc", {2, 4, 5})
assert(a:dim() == 2 and bb:dim() == 3, "dim")
assert(a:numel() == 12 and bb:numel() == 24, "numel")
expect_error(function() return lathe.input("s", {"B", 3}):numel() end, "symbolic", "numel of a symbolic shape")
assert(a.T.shape[1] == 4 and a.T.shape[2] == 3, "x.T")
expect_error(function() return a.Tee end, "no field or method 'Tee'", "a misspelt field")
assert(a.name == "a" and a.value == nil, "fields of some nodes read nil on others")
assert(a:clone() == a, "clone")
local c = lathe.input("c", {3, 1})
assert(c:expand_as(a).shape[2] == 4, "expand_as")

local g = lathe.graph{
  mm = lathe.einsum("ij,jk->ik", a, b), ref_mm = a:matmul(b),
  mm2 = lathe.einsum("ij,jk", {a, b}), -- implicit output, operands as a table
  bmm = lathe.einsum("bij,bjk->bik", bb, bc), ref_bmm = bb:matmul(bc),
  tr = lathe.einsum("ij->ji", a), ref_tr = a:transpose(0, 1),
  tot = lathe.einsum("ij->", a), ref_tot = a:sum(),
  outer = lathe.einsum("i,j->ij", a:sum(1), b:sum(0)), ref_outer = a:sum(1):unsqueeze(1) * b:sum(0):unsqueeze(0),
  masked = a:masked_fill(a:gt(0), 0), ref_masked = -((-a):relu()),
  masked2 = a:masked_fill(c:gt(0), -1.5), ref_masked2 = lathe.where(c:gt(0):expand_as(a), -1.5, a),
  sm = a:softmax{dim = -1}, ref_sm = a:softmax(-1),
  sm0 = a:log_softmax{dim = 0}, ref_sm0 = a:log_softmax(0),
  t = a.T, ref_t = a:permute{1, 0},
}
local out = lathe.run(g, { a = lathe.randn({3, 4}, 1), b = lathe.randn({4, 5}, 2), bb = lathe.randn({2, 3, 4}, 3),
                           bc = lathe.randn({2, 4, 5}, 4), c = lathe.randn({3, 1}, 5) })
for _, k in ipairs{"mm", "bmm", "tr", "tot", "outer", "masked", "masked2", "sm", "sm0", "t"} do
  assert(lathe.allclose(out[k], out["ref_" .. k], 1e-5, 1e-5), k .. " differs from its long form")
end
assert(lathe.allclose(out.mm2, out.ref_mm, 1e-5, 1e-5), "implicit einsum output")
expect_error(function() return lathe.einsum("ii->i", lathe.input("q", {3, 3})) end, "repeats", "einsum diagonal")
expect_error(function() return lathe.einsum("ij,jk->ik", a) end, "2 operands but 1 tensor", "einsum operand count")
expect_error(function() return lathe.einsum("...ij->ij", a) end, "'%.%.%.'", "einsum ellipsis")
expect_error(function() return lathe.einsum("ij,jk->ik", a, a) end, "'j' is 4 in one operand and 3", "einsum sizes")
expect_error(function() return lathe.einsum("ij->iz", a) end, "output letter 'z'", "einsum output letter")

-- sessions print as text, and step lines count as :diff does
local x = lathe.input("x", {4})
local y = ((x * 2):neg()):exp()
local s = lathe.rewrite(lathe.graph{ y = y }, lathe.ruleset("t", { lathe.rule("double", "Mul(x, 2)", "Add(x, x)") }))
local st = s:step()
local d = s:diff(0, 1)
local want = string.format(": %%-%d %%+%d ~%d$", #d.removed, #d.added, #d.changed)
assert(#d.changed >= 2, "the Neg and Exp users are rebuilt")
assert(st.line:find(want), "step line " .. st.line .. " should count as :diff does (" .. want .. ")")
assert(st.rebuilt == #d.changed, "st.rebuilt")
local h = tostring(s:history())
assert(h:find("^> #1 double") and not h:find("table:"), "s:history() prints the listing, got " .. h)
assert(#s:history() == 1 and s:history()[1].rule == "double", "s:history() is still the array of steps")
local chk = tostring(s:check())
assert(chk:find("^check passed"), "s:check() prints its verdict, got " .. chk)
assert(s:check().ok == true)
print("ok")
