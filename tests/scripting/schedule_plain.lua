-- p:kernel(i):reset(true) gives the unscheduled loops for every kernel kind: a matmul's are
-- its plain reduction (a loop per output dim, the reduction inside), not the packed GEMM
-- nest lowering schedules it as. Every loop name means one loop within its kernel, in the
-- packed nest too (it used to repeat kk, r and c). The rescheduled programs still match
-- the interpreter. Run from the source root (the samples).
local function unique(loops, what)
  local seen = {}
  for _, l in ipairs(loops) do
    assert(not seen[l.name], what .. ": loop name " .. l.name .. " repeats")
    seen[l.name] = true
  end
end

local function check_sample(path, run)
  local g = lathe.load(path)
  local p = lathe.compile(g, { backend = "c" })
  local matmuls = 0
  for i, info in ipairs(p:kernels()) do
    if info.kind ~= "extern" then
      local k = p:kernel(i)
      local what = path .. " kernel " .. i .. " (" .. info.kind .. ")"
      unique(k:loops(), what .. ", as compiled")
      k:reset(true)
      local loops = k:loops()
      unique(loops, what .. ", plain")
      assert(#k:log() == 0, what .. ": plain loops carry a schedule: " .. table.concat(k:log(), "; "))
      if info.kind == "matmul" then
        matmuls = matmuls + 1
        for _, l in ipairs(loops) do
          assert(l.name:match("^[ir]%d+$"), what .. ": plain loop " .. l.name .. " (" .. l.note .. ") is not an output or reduction loop")
          assert(not l.parallel and not l.vectorize and l.unroll == 0, what .. ": plain loop " .. l.name .. " is scheduled")
        end
        assert(loops[#loops].reduce, what .. ": the innermost plain loop is not the reduction")
        -- the names p:loop shows are the ones the primitives take
        k:split(loops[#loops].name, 4)
        assert(p:loop(i):find(loops[#loops].name .. "_i", 1, true), what .. ": split did not apply")
      end
      k:reset()   -- back to lathe.compile's schedule
      unique(k:loops(), what .. ", reset to the compiled schedule")
    end
  end
  assert(matmuls > 0, path .. ": expected matmul kernels")
  if run then
    for i, info in ipairs(p:kernels()) do
      if info.kind ~= "extern" then p:kernel(i):reset(true) end
    end
    local got, want = p:run({}, { seed = 3 }), lathe.run(g, {}, { seed = 3 })
    for name, v in pairs(want) do
      assert(lathe.allclose(got[name], v, 1e-4, 1e-4), path .. ": output " .. name .. " differs with plain loops")
    end
  end
end

check_sample("samples/01-mlp.lathe", true)
check_sample("samples/02-convnet.lathe", true)   -- convolutions: gathered (implicit im2col) operands
check_sample("samples/06-gpt2-block.lathe", false)
print("ok")
