-- bad_memory.lua — a memory bomb under a small memory cap; must fail cleanly.
local ok, err = pcall(function()
  local t = {}
  for i = 1, 1e9 do t[i] = { i, i, i } end
end)
assert(not ok and (err:find("memory") ~= nil), tostring(err))
collectgarbage()
local ok2, err2 = pcall(string.rep, "x", 1 << 40)
assert(not ok2, "huge string refused")
local ok3, err3 = pcall(lathe.randn, {1 << 20, 1 << 20}, 1)
assert(not ok3 and err3:find("memory limit"), err3)
print("ok")
