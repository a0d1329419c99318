-- bad_runtime.lua — a runtime error inside a binding: exit 1, located at the Lua caller.
local x = lathe.input("x", {4, 3})
local w = lathe.input("w", {5, 2})
local y = x:matmul(w)   -- line 4: shapes do not match
