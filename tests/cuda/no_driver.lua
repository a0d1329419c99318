-- no_driver.lua — run with LATHE_CUDA_DRIVER naming a library that does not exist: NVRTC
-- needs no driver, so lathe.compile(g, {backend = "cuda"}) gives a program whose kernels,
-- CUDA C and PTX can be inspected; running it says why it cannot, and that it compiled.
local x = lathe.input("x", {64, 100})
local g = lathe.graph{ y = x:softmax(-1) }
local p = lathe.compile(g, { backend = "cuda" })
assert(#p:kernels() >= 1, "kernels listed")
assert(p:source(1):find("__global__"), "CUDA C")
assert(p:asm(1):find("%.entry"), "PTX")
local ok, err = pcall(function() return p:run({ x = lathe.randn({64, 100}, 1) }) end)
assert(not ok, "running without a driver must fail")
err = tostring(err)
assert(err:find("cannot run here") and err:find("no CUDA driver") and err:find("p:asm"), err)
print("ok")
