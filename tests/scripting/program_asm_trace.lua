-- p:asm(k) and p:trace(path) (SPEC "Compiling"): assembly of a kernel on each CPU backend
-- (llvm: the JIT's, c: the compiler's -S output), the Chrome trace-event JSON of the last
-- profile (or a fresh one), and the per-kernel rows of p:profile.
local x = lathe.input("x", {64, 32})
local g = lathe.graph{ y = lathe.softmax(x:exp() * 2, -1) }
local backends = { "c" }
if pcall(lathe.compile, g, { backend = "llvm" }) then backends[#backends + 1] = "llvm" end
for _, backend in ipairs(backends) do
  local p = lathe.compile(g, { backend = backend })
  local text = p:asm(1)
  assert(#text > 0 and (text:find("ret") or text:find("vmov") or text:find("mov")), backend .. ": no assembly:\n" .. text)
  assert(not pcall(p.asm, p, 99), "p:asm(99) did not fail")

  -- p:trace before any profile profiles first; after p:profile it writes that profile
  local path = "trace_" .. backend .. ".json"
  assert(p:trace(path) == path)
  local prof = p:profile{ iters = 3 }
  assert(#prof >= 1 and prof[1].name and prof[1].ms >= 0 and prof[1].bytes > 0 and prof[1].bound, "profile rows missing")
  assert(prof.text:find("Kernel"), "profile table missing")
  p:trace(path)
  -- the file is trace-event JSON (CTest also greps it; scripts have no io library by default)
  local f = io and io.open and io.open(path) or nil
  if f then
    local json = f:read("a")
    f:close()
    assert(json:find('"traceEvents"') and json:find('"ph": "X"') and json:find(prof[1].name, 1, true), "not a trace:\n" .. json)
  end
  -- a schedule change makes p:asm and p:trace follow the new kernel
  p:kernel(1):reset(true)
  assert(#p:asm(1) > 0)
  p:trace(path, { iters = 2 })
end
print("ok")
