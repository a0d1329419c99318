-- Stepping through the qdq rules in a rewrite session (as in the REPL): the tiny QDQ model
-- loaded with its Q/DQ as plain ops, one step per fusion (conv + bias + relu requant, matmul
-- + requant), the final check against step 0 on the interpreter passes, and the result has
-- the int8 contractions (Reduce over i32) that loading with the default options gives.
-- usage: lathe script qdq_step.lua MODEL.onnx
local path = assert(arg and arg[1], "usage: qdq_step.lua MODEL.onnx")
local function int_sums(g)
  local n = 0
  for _, node in ipairs(g:nodes()) do
    if node.op == "Reduce" and node.dtype == "i32" then n = n + 1 end
  end
  return n
end
local plain = lathe.load(path, { qdq_rules = false })
assert(int_sums(plain) == 0, "the plain import has integer sums")
local s = lathe.rewrite(plain, lathe.rules.builtin("qdq"))
local rules = {}
while true do
  local st = s:step()
  if not st then break end
  rules[#rules + 1] = st.rule
end
local want = { "qdq-contraction", "qdq-bias", "qdq-requant", "qdq-contraction", "qdq-requant" }
assert(#rules == #want, "expected " .. #want .. " steps, got " .. #rules .. ": " .. table.concat(rules, ", "))
for i, r in ipairs(want) do assert(rules[i] == r, "step " .. i .. " is " .. rules[i] .. ", expected " .. r) end
assert(s:check().ok, tostring(s:check()))
assert(int_sums(s:graph()) == 2, "expected 2 integer sums after the rules")
assert(int_sums(lathe.load(path)) == 2, "the default load does not apply the qdq rules")
print("ok")
