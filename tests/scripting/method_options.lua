-- method_options.lua — a tensor method takes its options either positionally or as a table
-- (x:gelu("tanh") and x:gelu{approximate = "tanh"} are the same graph).
local x = lathe.input("x", {4, 8})
local a = lathe.graph{ y = x:gelu("tanh") }
local b = lathe.graph{ y = x:gelu{ approximate = "tanh" } }
local c = lathe.graph{ y = x:gelu() }
assert(a:text() == b:text(), "gelu{approximate=} differs from gelu(\"tanh\")")
assert(a:text() ~= c:text(), "tanh gelu equals the exact one")
local ok, err = pcall(function() return x:gelu{ approximate = "fast" } end)
assert(not ok and tostring(err):find("approximate"), "bad approximate not reported: " .. tostring(err))
print("ok")
