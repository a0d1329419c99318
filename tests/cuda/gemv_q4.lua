-- gemv_q4.lua — the packed int4 kernel (weight-int4, blocks packed two a byte: the gemv_q4
-- Extern) on each backend given as an argument against the interpreter: every run width a
-- lane can take on cuda (16, 8, 4, 2 and 1 bytes of half a block: blocks of 32, 96, 16, 48,
-- 8, 12, 6 and 2), rows of X 1 to 16 (4 a tile on cuda, then the rest), prime output widths,
-- K longer than the cuda kernel's shared-memory chunk of X (2560 at 4 rows), and X's int16
-- rounding (exact). Run by CMake on cuda through the fake driver (the kernel compiled for the
-- CPU); tests/quant runs the same kernel's CPU versions. Prints "ok".
local backends = {}
for i = 1, #arg do backends[#backends + 1] = arg[i] end

local cases = {  -- batch, K, N, block
  {1, 96, 97, 32}, {3, 192, 31, 96}, {5, 64, 13, 16}, {2, 144, 7, 48}, {16, 40, 11, 8},
  {4, 36, 5, 12}, {7, 30, 3, 6}, {1, 10, 17, 2}, {4, 2560, 11, 32}, {6, 2560, 5, 32},
}
for _, c in ipairs(cases) do
  local batch, K, N, blk = c[1], c[2], c[3], c[4]
  local g = lathe.graph{ y = lathe.input("x", {batch, K}):linear(lathe.randn({N, K}, 31)) }
  local q, info = lathe.quantize(g, {mode = "weight-int4", block = blk})
  assert(info.quantized == 1 and info.notes[1]:find("packed two a byte"), "not packed: " .. table.concat(info.notes, "; "))
  local ins = {x = lathe.randn({batch, K}, 5)}
  local ref = lathe.run(q, ins)
  for _, bk in ipairs(backends) do
    local got = lathe.run(q, ins, {backend = bk})
    local ok, why = lathe.allclose(got.y, ref.y, 1e-5, 1e-5)
    assert(ok, string.format("gemv_q4 %dx%dx%d blocks of %d on %s: %s", batch, N, K, blk, bk, tostring(why)))
  end
end

-- int16 activations: a block [32767, 0.4, 0, ...] has the scale 1, so 0.4 rounds to 0 and y is
-- exact (core/interp/gemv_q4_act.h; quantize_test.lua has the derivation)
do
  local xv, ones = {}, {}
  for i = 1, 64 do xv[i], ones[i] = 0, 1 end
  local q = lathe.quantize(lathe.graph{ y = lathe.input("x", {1, 64}):linear(lathe.tensor({ones, ones})) }, {mode = "weight-int4"})
  xv[1], xv[2], xv[33], xv[34] = 32767, 0.4, -32767, 16384
  local ins = {x = lathe.tensor({xv})}
  local ref = lathe.run(q, ins).y:tolist()
  assert(ref[1][1] == 16384 and ref[1][2] == 16384, "interp: " .. ref[1][1])
  for _, bk in ipairs(backends) do
    local got = lathe.run(q, ins, {backend = bk}).y:tolist()
    assert(got[1][1] == ref[1][1] and got[1][2] == ref[1][2], "int16 activation blocks on " .. bk .. ": got " .. got[1][1])
  end
end
print("ok")
