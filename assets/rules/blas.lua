-- blas.lua — hand matmuls to the BLAS library kernel (lathe.rules.builtin("blas");
-- off by default: `lathe bench matmul-lib` and users turn it on).
--
-- The frontend (core/frontend/linalg.cpp) emits C = A @ B, A [M, K], B [K, N] f32, as
--   av = View(A) expanded to [M, N, K]   strides [K, 0, 1]  (A row-major)
--                                         or      [1, 0, M]  (A stored transposed, [K, M])
--   bv = View(B) expanded to [M, N, K]   strides [0, 1, N]  (B row-major)
--                                         or      [0, K, 1]  (B stored transposed, [N, K],
--                                                              e.g. linear's weight)
--   Reduce{op="add", axes=[2]}(Mul(av, bv))  -> [M, N, 1], then a reshape View to [M, N].
-- The rule matches the Reduce and replaces it with Extern sgemm(A, B) (ints M, N, K,
-- transA, transB; result [M, N]) reshaped to the root's [M, N, 1]. Mul is commutative, so
-- the two views may come in either order. Only unbatched, constant-shaped f32 matmuls
-- whose views read their source from offset 0 without a mask qualify.
--
-- Uses the node fields of the Lua layer: n.op, n.shape, n.dtype, n.inputs and, on a View,
-- n.view_spec = { shape, strides, offset, mask }.
local function operand(v, M, N, K)
  if v.op ~= "View" then return nil end
  local vw = v.view_spec
  if vw.offset ~= 0 or (vw.mask and #vw.mask > 0) then return nil end
  local s = vw.strides
  local src = v.inputs[1]
  local numel = 1
  for _, d in ipairs(src.shape) do numel = numel * d end
  if s[2] == 0 and numel == M * K then          -- A: constant along N
    if s[1] == K and s[3] == 1 then return "A", src, 0 end
    if s[1] == 1 and s[3] == M then return "A", src, 1 end
  elseif s[1] == 0 and numel == K * N then      -- B: constant along M
    if s[2] == 1 and s[3] == N then return "B", src, 0 end
    if s[2] == K and s[3] == 1 then return "B", src, 1 end
  end
  return nil
end

local function to_sgemm(m)
  local shape = m.p.shape
  if m.root.dtype ~= "f32" or #shape ~= 3 then return nil end
  local M, N, K = shape[1], shape[2], shape[3]
  if type(M) ~= "number" or type(N) ~= "number" or type(K) ~= "number" then return nil end
  local ka, sa, ta = operand(m.p, M, N, K)
  local kb, sb, tb = operand(m.q, M, N, K)
  if ka == "B" and kb == "A" then ka, sa, ta, kb, sb, tb = kb, sb, tb, ka, sa, ta end
  if ka ~= "A" or kb ~= "B" then return nil end
  return lathe.extern("sgemm", { sa, sb }, "f32", { M, N }, { M, N, K, ta, tb }):reshape({ M, N, 1 })
end

return lathe.ruleset("blas", {
  lathe.rule("matmul-to-sgemm", 'Reduce{op="add", axes=[2]}(Mul(p, q))', to_sgemm),
})
