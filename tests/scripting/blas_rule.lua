-- The built-in BLAS rule turns matmuls (plain and with a transposed weight, as linear
-- makes them) into Extern sgemm, and the result matches the interpreter on the default
-- backend (llvm calls OpenBLAS between its JIT kernels).
local a = lathe.input("a", {33, 20})
local b = lathe.input("b", {20, 17})
local w = lathe.input("w", {17, 20})      -- linear's [out, in] weight: transposed operand
local g = lathe.graph{ y = a:matmul(b), z = lathe.linear(a, w) }
local s = lathe.rewrite(g, lathe.rules.builtin("blas"), { check = true })
s:run()
local externs = 0
for _, n in ipairs(s:graph():nodes()) do
  if n.op == "Extern" then externs = externs + 1 end
end
assert(externs == 2, "expected 2 sgemm calls, got " .. externs)
local inputs = { a = lathe.randn({33, 20}, 1), b = lathe.randn({20, 17}, 2), w = lathe.randn({17, 20}, 3) }
local want = lathe.run(g, inputs)
local got = lathe.run(s:graph(), inputs, { backend = "llvm" })
assert(lathe.allclose(got.y, want.y, 1e-4, 1e-5), "y differs")
assert(lathe.allclose(got.z, want.z, 1e-4, 1e-5), "z differs")
print("ok")
