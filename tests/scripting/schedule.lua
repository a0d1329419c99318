-- Schedules from Lua (SPEC "Compiling"): p:kernel(i) applies split / reorder / tile / fuse /
-- vectorize / unroll / parallel / cache / rows to one kernel; p:loop shows the change; p:run
-- recompiles and matches the interpreter; an illegal schedule is a Lua error naming the
-- reason and leaves the program usable. Runs on c and, when built, llvm.
local function has(text, piece) return text:find(piece, 1, true) ~= nil end
local function refused(fn, why)
  local ok, err = pcall(fn)
  assert(not ok, "expected a refusal mentioning '" .. why .. "'")
  assert(has(tostring(err), why), "refusal '" .. tostring(err) .. "' does not mention '" .. why .. "'")
  assert(has(tostring(err), "schedule.lua:"), "error not located in the script: " .. tostring(err))
end

local x = lathe.input("x", {30, 40})
local b = lathe.input("b", {40})
local g = lathe.graph{ y = (x * b):exp() + 1, s = lathe.softmax(x, -1) }
local inputs = { x = lathe.randn({30, 40}, 1), b = lathe.randn({40}, 2) }
local want = lathe.run(g, inputs)

local function check(p, what)
  local got = p:run(inputs)
  assert(lathe.allclose(got.y, want.y), what .. ": y differs from the interpreter")
  assert(lathe.allclose(got.s, want.s), what .. ": s differs from the interpreter")
end

local function kernel_of(p, pattern)
  for i, k in ipairs(p:kernels()) do
    if p:loop(i):find(pattern) then return i, p:kernel(i) end
  end
  error("no kernel matches " .. pattern)
end

local backends = { "c" }
if pcall(lathe.compile, g, { backend = "llvm" }) then backends[#backends + 1] = "llvm" end

for _, backend in ipairs(backends) do
  local p = lathe.compile(g, { backend = backend })
  check(p, backend .. " default schedule")
  local ei, ek = kernel_of(p, "kind=elementwise")  -- y
  local si, sk = kernel_of(p, "reduce max")        -- the softmax kernel (s)

  -- :loops() names and extents
  local loops = ek:reset(true):loops()
  assert(#loops == 2 and loops[1].name == "i0" and loops[1].extent == 30 and loops[2].extent == 40,
         "unexpected loops of the elementwise kernel")

  -- split + vectorize + parallel from plain loops; p:loop shows it, p:source re-renders
  ek:reset(true):split("i1", 8):vectorize("i1_i"):parallel("i0")
  local ir = p:loop(ei)
  assert(has(ir, "split i1 by 8 -> i1_o, i1_i") and has(ir, "vectorized for i1_i in 0..8") and has(ir, "parallel for i0"), ir)
  assert(p:kernels()[ei].rescheduled, "kernel not marked rescheduled")
  check(p, backend .. " split/vectorize/parallel")

  -- reorder (outermost first), tile, fuse, unroll, vectorize with a width
  ek:reset(true):reorder("i1", "i0")
  assert(p:loop(ei):find("for i1 in 0%.%.40:[^\n]*\n%s*for i0 in 0%.%.30"), p:loop(ei))
  check(p, backend .. " reorder")
  ek:reset(true):tile("i0", "i1", 6, 8):unroll("i1_i", 8)
  check(p, backend .. " tile/unroll")
  ek:reset(true):fuse("i0", "i1"):vectorize("i0_i1", 16)
  assert(has(p:loop(ei), "for i0_i1_o in 0..75"), p:loop(ei))
  check(p, backend .. " fuse/vectorize width")

  -- cache: the broadcast row once, the output row per iteration, written back
  ek:reset(true):cache("in1"):cache("out", "i0"):parallel("i0")
  ir = p:loop(ei)
  assert(has(ir, "alloc in1_tile: f32[40]") and has(ir, "alloc out_tile: f32[40]") and has(ir, "write out_tile back to out"), ir)
  check(p, backend .. " cache")
  -- softmax: its three passes over a row share one cached row (on the plain loops: the
  -- default schedule jams short rows, whose copies read the row at several index patterns)
  sk:reset(true):cache("in0", "i0")
  assert(#sk:log() > 0 and has(p:loop(si), "alloc in0_tile: f32[40]"), p:loop(si))
  check(p, backend .. " softmax row cache")
  -- and the output row it writes and reads back (when lowering keeps exp values there)
  if has(p:loop(si), "= out[") then
    sk:cache("out", "i0")
    check(p, backend .. " softmax output row cache")
  end

  -- illegal schedules: a clear error, the kernel unchanged, the program still runs
  local before = p:loop(si)
  refused(function() sk:parallel("r1") end, "carries a reduction")
  refused(function() sk:split("nope", 4) end, "no such loop")
  refused(function() sk:split("i0", 0) end, "factor must be at least 1")
  refused(function() sk:cache("nope", "i0") end, "has no buffer nope")
  refused(function() sk:vectorize("i0") end, "contains other loops")
  refused(function() sk:reorder("i0", "r1") end, "not")
  refused(function() sk:fuse("i0", "r1") end, "not perfectly nested")
  refused(function() sk:split(7, 2) end, "expected a loop name")
  assert(p:loop(si) == before, "a refused schedule changed the kernel")
  refused(function() p:kernel(99) end, "out of range")
  check(p, backend .. " after refusals")
  -- back to lathe.compile's schedule
  ek:reset(); sk:reset()
  assert(not p:kernels()[ei].rescheduled and not p:kernels()[si].rescheduled, "reset() did not restore the schedule")
  check(p, backend .. " reset")

  -- rows: a column sum's reduction runs around its output loop, over a row of accumulators
  local cs = lathe.graph{ c = x:sum(0) }
  local pc = lathe.compile(cs, { backend = backend })
  local ck = pc:kernel(1):reset(true)
  sk:reset(true)
  refused(function() sk:rows("i0") end, "reduce_rows i0: ")
  refused(function() sk:rows("r1") end, "reduction loop")
  ck:rows("i0", 16)
  assert(has(pc:loop(1), "reduce_rows i0 by 16") and has(pc:loop(1), "alloc row_"), pc:loop(1))
  local xin = { x = inputs.x }
  assert(lathe.allclose(pc:run(xin).c, lathe.run(cs, xin).c), backend .. " rows: c differs from the interpreter")

  -- split_k: the column sum's reduction in 3 per-thread parts (30 rows: 10 each) plus a
  -- combine, then rows in the partial nest; a GEMV at batch 3 over a prime K in 2 parts
  ck:reset(true)
  refused(function() ck:split_k("i0", 2) end, "split_k i0: ")
  ck:split_k("r0", 3)
  assert(has(pc:loop(1), "split_k r0 by 3") and has(pc:loop(1), "parallel for r0_k in 0..3"), pc:loop(1))
  assert(lathe.allclose(pc:run(xin).c, lathe.run(cs, xin).c), backend .. " split_k: c differs from the interpreter")
  ck:rows("i0_p", 16)
  assert(lathe.allclose(pc:run(xin).c, lathe.run(cs, xin).c), backend .. " split_k + rows: c differs from the interpreter")
  local a, w = lathe.input("a", {3, 101}), lathe.input("w", {101, 7})
  local mv = lathe.graph{ y = a:matmul(w) }
  local ain = { a = lathe.randn({3, 101}, 5), w = lathe.randn({101, 7}, 6) }
  local pm = lathe.compile(mv, { backend = backend })
  local mk = pm:kernel(1):reset(true)
  mk:split_k("r0", 2)
  assert(lathe.allclose(pm:run(ain).y, lathe.run(mv, ain).y), backend .. " split_k gemv: y differs from the interpreter\n" .. pm:loop(1))
end
print("ok")
