-- gemv_q4.lua — the packed int4 kernel (weight-int4, blocks packed two a byte: the gemv_q4
-- Extern) on each backend given as an argument against the interpreter. The first argument
-- picks the shapes:
--   cpu   its CPU code (backends/library_q4.cpp), the shapes its AVX-512 VNNI path takes
--         apart: blocks of 32 two a step (an even and an odd count: the odd last block runs the
--         256-bit code), blocks of 64, 128 and 2048 (2, 4 and 32 units of 64 weights summed in
--         i32 a block), blocks of 16 and 96 (not a multiple of 64: the AVX2 code), rows of X 1
--         to 16 (4 at a time, then 3, 2 or 1), prime output widths, and weights over 2 MB (the
--         rows split between threads in chunks of 64). tests/quant runs it as is and with
--         LATHE_Q4_AVX512=0 (the AVX2 code), LATHE_POOL_THREADS=1 (one thread) and others.
--   cuda  its cuda rendering (render_gemv_q4.cpp; tests/cuda runs it through the fake driver:
--         the kernel compiled for the CPU): every run width a lane can take (16, 8, 4, 2 and
--         1 bytes of half a block: blocks of 32, 96, 16, 48, 8, 12, 6 and 2), rows of X 1 to 16
--         (4 a tile, then the rest), prime output widths, K longer than the kernel's
--         shared-memory chunk of X (2560 at 4 rows).
-- Both then check X's extreme int16 values against every nibble and X's int16 rounding (exact).
-- Prints "ok".
local set = arg[1]
local backends = {}
for i = 2, #arg do backends[#backends + 1] = arg[i] end

local cases, atol  -- {batch, K, N, block}; atol(K)
if set == "cpu" then
  cases = {
    {1, 64, 97, 32}, {3, 128, 31, 32}, {1, 96, 13, 32}, {5, 224, 7, 32}, {16, 768, 11, 32}, {2, 32, 3, 32},
    {1, 128, 37, 64}, {3, 192, 17, 64}, {4, 384, 5, 128}, {7, 2048, 3, 2048}, {1, 4096, 2, 2048},
    {3, 96, 19, 16}, {2, 192, 23, 96},
    {1, 4096, 1031, 32}, {3, 4096, 1031, 128}, {1, 768, 6007, 32},
  }
  -- f32 sums of K / block scaled block sums in another order: |y| grows as sqrt(K)
  atol = function(K) return 1e-5 * math.max(1, math.sqrt(K / 64)) end
elseif set == "cuda" then
  cases = {
    {1, 96, 97, 32}, {3, 192, 31, 96}, {5, 64, 13, 16}, {2, 144, 7, 48}, {16, 40, 11, 8},
    {4, 36, 5, 12}, {7, 30, 3, 6}, {1, 10, 17, 2}, {4, 2560, 11, 32}, {6, 2560, 5, 32},
  }
  atol = function() return 1e-5 end
else
  error("usage: gemv_q4.lua cpu|cuda BACKEND...")
end

for _, c in ipairs(cases) do
  local batch, K, N, blk = c[1], c[2], c[3], c[4]
  local g = lathe.graph{ y = lathe.input("x", {batch, K}):linear(lathe.randn({N, K}, 31)) }
  local q, info = lathe.quantize(g, {mode = "weight-int4", block = blk})
  assert(info.quantized == 1 and info.notes[1]:find("packed two a byte"), "not packed: " .. table.concat(info.notes, "; "))
  local ins = {x = lathe.randn({batch, K}, 5)}
  local ref = lathe.run(q, ins)
  for _, bk in ipairs(backends) do
    local got = lathe.run(q, ins, {backend = bk})
    local ok, why = lathe.allclose(got.y, ref.y, 1e-5, atol(K))
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
