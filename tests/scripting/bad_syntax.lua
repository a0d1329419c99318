-- bad_syntax.lua — a syntax error: exit 1 with file:line.
local x = lathe.input("x", {4})
local y = x +
