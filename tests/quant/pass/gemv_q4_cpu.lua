-- gemv_q4_cpu.lua — the packed int4 kernel's CPU code (backends/library_q4.cpp) on each backend
-- given as an argument against the interpreter, on the shapes its AVX-512 VNNI path takes
-- apart: blocks of 32 two a step (an even and an odd count: the odd last block runs the 256-bit
-- code), blocks of 64, 128 and 2048 (2, 4 and 32 units of 64 weights summed in i32 a block),
-- blocks of 16 and 96 (not a multiple of 64: the AVX2 code), rows of X 1 to 16 (4 at a time,
-- then 3, 2 or 1), prime output widths, and weights over 2 MB (the rows split between threads
-- in chunks of 64). CMake runs it as is and with LATHE_Q4_AVX512=0 (the AVX2 code) and
-- LATHE_POOL_THREADS=1 (one thread). Prints "ok".
local backends = {}
for i = 1, #arg do backends[#backends + 1] = arg[i] end

local cases = {  -- batch, K, N, block
  {1, 64, 97, 32}, {3, 128, 31, 32}, {1, 96, 13, 32}, {5, 224, 7, 32}, {16, 768, 11, 32}, {2, 32, 3, 32},
  {1, 128, 37, 64}, {3, 192, 17, 64}, {4, 384, 5, 128}, {7, 2048, 3, 2048}, {1, 4096, 2, 2048},
  {3, 96, 19, 16}, {2, 192, 23, 96},
  {1, 4096, 1031, 32}, {3, 4096, 1031, 128}, {1, 768, 6007, 32},
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
    -- f32 sums of K / block scaled block sums in another order: |y| grows as sqrt(K)
    local ok, why = lathe.allclose(got.y, ref.y, 1e-5, 1e-5 * math.max(1, math.sqrt(K / 64)))
    assert(ok, string.format("gemv_q4 %dx%dx%d blocks of %d on %s: %s", batch, N, K, blk, bk, tostring(why)))
  end
end

-- X's extreme int16 values against every nibble: a block [32767, -32767, ...] times weights
-- 0..15 (stored) in both halves of a byte; exact in i32 (the lanes' offsets included)
do
  local K, N = 256, 17
  local w, xv = {}, {}
  for n = 1, N do
    w[n] = {}
    for k = 1, K do w[n][k] = ((n * 7 + k * 3) % 16) - 8 end
  end
  for k = 1, K do xv[k] = (k % 2 == 0) and 32767 or -32767 end
  for _, blk in ipairs({32, 64, 128}) do
    local q = lathe.quantize(lathe.graph{ y = lathe.input("x", {2, K}):linear(lathe.tensor(w)) }, {mode = "weight-int4", block = blk})
    local ins = {x = lathe.tensor({xv, xv})}
    local ref = lathe.run(q, ins)
    for _, bk in ipairs(backends) do
      local ok, why = lathe.allclose(lathe.run(q, ins, {backend = bk}).y, ref.y, 1e-6, 1e-6)
      assert(ok, "extreme values, blocks of " .. blk .. " on " .. bk .. ": " .. tostring(why))
    end
  end
end
print("ok")
