-- bad_loop.lua — runs with a small instruction budget; must stop, not hang.
local ok, err = pcall(function() while true do end end)
assert(not ok and err:find("instruction budget exceeded"), err)
-- the process (and the state) survive; a fresh top-level statement would get a new budget
while true do end
