-- api_build_run.lua — building, inspecting and running graphs exactly as SPEC.md writes it.
local x = lathe.input("x", {"B", 6}, "f32")      -- dims: numbers or symbolic names
local w = lathe.input("w", {6, 3})               -- dtype defaults to f32
local y = (x:matmul(w) + 1):relu():softmax(-1)   -- operators + - * / and methods
local g = lathe.graph{ y = y }                    -- named outputs

assert(#g > 5, "graph has nodes")
assert(g:verify())
assert(x.dtype == "f32" and x.shape[1] == "B" and x.shape[2] == 6)
assert(w.dtype == "f32")
assert(y.shape[1] == "B" and y.shape[2] == 3)

local nodes = g:nodes()
assert(#nodes == #g)
local seen_input = 0
for _, n in ipairs(nodes) do
  assert(type(n.id) == "number" and type(n.op) == "string" and type(n.dtype) == "string")
  assert(type(n.shape) == "table" and type(n.inputs) == "table")
  assert(n.provenance ~= nil)
  if n.op == "Input" then seen_input = seen_input + 1 end
end
assert(seen_input == 2)
assert(g:text():find("Input") or g:text():find("in "), "text form")

-- values and running
local t = lathe.tensor({{1, 2}, {3, 4}}, "f32")
assert(t.shape[1] == 2 and t.shape[2] == 2)
local l = t:tolist()
assert(l[2][1] == 3)
local xs = lathe.randn({4, 6}, 42)
local ws = lathe.randn({6, 3}, 7)
assert(lathe.allclose(xs, lathe.randn({4, 6}, 42)), "randn is seeded")
local out = lathe.run(g, { x = xs, w = ws })
assert(out.y.shape[1] == 4 and out.y.shape[2] == 3)

-- reference in plain Lua
local X, W, Y = xs:tolist(), ws:tolist(), out.y:tolist()
for i = 1, 4 do
  local row, m = {}, -math.huge
  for j = 1, 3 do
    local acc = 1
    for k = 1, 6 do acc = acc + X[i][k] * W[k][j] end
    row[j] = math.max(acc, 0)
    m = math.max(m, row[j])
  end
  local sum = 0
  for j = 1, 3 do row[j] = math.exp(row[j] - m); sum = sum + row[j] end
  for j = 1, 3 do
    assert(math.abs(row[j] / sum - Y[i][j]) < 1e-5, "softmax mismatch at " .. i .. "," .. j)
  end
end
local ref = lathe.tensor(Y, "f32")
assert(lathe.allclose(out.y, ref, 1e-5, 1e-6))      -- rtol, atol
local ok, why = lathe.allclose(out.y, lathe.tensor({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}), 1e-5, 1e-6)
assert(not ok and type(why) == "string")

-- operators with numbers on either side, unary minus, division
local a = lathe.input("a", {3})
local e = lathe.graph{ r = (2 - a) * 3 / (a + 4) + (-a) }
local av = lathe.tensor({1, 2, 3})
local r = lathe.run(e, { a = av }).r:tolist()
for i, v in ipairs({1, 2, 3}) do
  assert(math.abs(r[i] - ((2 - v) * 3 / (v + 4) - v)) < 1e-5)
end

-- reductions with axis / keepdim, shape ops
local m = lathe.input("m", {2, 3})
local gs = lathe.graph{ s0 = m:sum(0), s1 = m:sum(1, true), mx = m:max{axis = -1}, tr = m:transpose(0, 1),
                       rs = m:reshape{3, 2} }
local o = lathe.run(gs, { m = lathe.tensor({{1, 2, 3}, {4, 5, 6}}) })
assert(o.s0:tolist()[3] == 9)
assert(o.s1.shape[2] == 1 and o.s1:tolist()[2][1] == 15)
assert(o.mx:tolist()[1] == 3)
assert(o.tr:tolist()[3][2] == 6)
assert(o.rs:tolist()[3][1] == 5)

-- the array form keeps output order; the map form sorts by name
local go = lathe.graph{ {"zeta", m:sum()}, {"alpha", m:mean()} }
assert(go.output_names[1] == "zeta" and go.output_names[2] == "alpha")
local gm = lathe.graph{ zeta = m:sum(), alpha = m:mean() }
assert(gm.output_names[1] == "alpha")

-- constants
local c = lathe.const(2.5, "f32")
assert(c.dtype == "f32" and #c.shape == 0)
print("ok")
