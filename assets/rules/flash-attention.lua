-- flash-attention.lua — fused attention by rewriting (lathe.rules.builtin("flash-attention"),
-- `--rules flash-attention`). Off by default.
--
-- Finds attention in primitive form, however it was built — the Lua/C++ composite
-- (core/frontend/attention.cpp), PyTorch exports through ONNX (GPT-2: Where(causal_buffer,
-- -inf, scores); BERT: scores + padding mask; scaled scores or scaled Q) — and replaces it
-- with the fused op lathe.attention (Extern "attention", core/ir/attention_op.h), which the
-- scheduler keeps as one kernel and lowers to the tiled online-softmax loop nest
-- (core/loop/lower_attention.cpp): the L×S score matrix is never stored.
--
-- The rule's root is the P·V matmul as the frontend writes it (linalg.cpp):
--   Reduce{op="add", axes=[last]}(Mul(expand(P), expand(V)))   shape [b.., L, Ev, S] → [b.., L, Ev, 1]
-- and it walks up from P:
--   P = E · Recip(Reduce{add}(E))          E = Exp2((X - Reduce{max}(X)) · log2(e))    softmax over the last axis
--   X = Where(c, -inf, Y) | Where(c, Y, -inf)   a bool mask: causal when c is the constant
--                                               j > i (resp. j <= i) pattern, else additive
--     | Y + M                                   an additive mask M (a padding mask)
--     | Y · s                                   a constant scale s > 0
--     | Q·Kᵀ                                    Reduce{add}(Mul(expand(Q), expand(K)))
-- Q and K (and V) are taken as strided views of what the matmul views read, so head
-- splits and transposes stay index math; a constant factor on Q's source joins the scale.
-- Masks keep their broadcast (size-1) dims: BERT's [B, 1, 1, S] mask stays that small.
-- Grouped K/V heads (GQA: K/V with fewer heads repeated to Q's) are read unrepeated.
local LOG2E = 1.4426950408889634
-- When to fuse (measured on the llvm backend, 12 heads, d 64, causal, 2 cores): the fused
-- kernel wins from 4×4 scores up (T=4: 0.016 vs 0.025 ms, T=16: 0.033 vs 0.048, T=128:
-- 0.70 vs 1.06, T=4096: 1.35 s vs 3.5 s) and loses on a single score (T=1: 0.014 vs 0.010 ms,
-- where the unfused softmax is trivial). Scores with a symbolic length are fused.
local MIN_SCORES = 16

local function is_view(n) return n.op == "View" and not (n.view_spec.mask and #n.view_spec.mask > 0) end
local function strip(n)
  while is_view(n) do n = n.inputs[1] end
  return n
end
local function rank(n) return #n.shape end
local function reduces_last(n, op)
  return n.op == "Reduce" and n.reduce == op and #n.axes == 1 and n.axes[1] == rank(n) - 1
end
local function const_of(n) return lathe.constant_value(n) end

-- The View v of `src` with dim `drop` (1-based) removed; nil unless that dim has stride 0
-- (or size 1), so v is src's tensor broadcast along it.
local function operand(v, drop)
  if not is_view(v) then return nil end
  local vs = v.view_spec
  if vs.strides[drop] ~= 0 and vs.shape[drop] ~= 1 then return nil end
  local shape, strides = {}, {}
  for d = 1, #vs.shape do
    if d ~= drop then
      shape[#shape + 1] = vs.shape[d]
      strides[#strides + 1] = vs.strides[d]
    end
  end
  return lathe.strided(v.inputs[1], shape, strides, vs.offset), v.inputs[1], shape, strides, vs.offset
end

-- A matmul as the frontend writes it: Reduce{add, last}(Mul(a, b)), rank nb + 3 with dims
-- [batch.., M, N, K]. Returns the operands as [batch.., M, K] and [batch.., K, N] views
-- ("A" is constant along N, "B" along M), trying both orders of the Mul.
local function matmul_operands(r)
  if not reduces_last(r, "add") or r.inputs[1].op ~= "Mul" or rank(r) < 4 then return nil end
  local x, y = r.inputs[1].inputs[1], r.inputs[1].inputs[2]
  local M, N = rank(r) - 2, rank(r) - 1
  for _, pair in ipairs({ { x, y }, { y, x } }) do
    local a, asrc, ashape, astr, aoff = operand(pair[1], N)
    local b, bsrc, bshape, bstr, boff = operand(pair[2], M)
    if a and b then
      return { a = a, asrc = asrc, ashape = ashape, astr = astr, aoff = aoff,
               b = b, bsrc = bsrc, bshape = bshape, bstr = bstr, boff = boff }
    end
  end
  return nil
end

-- [batch.., K, N] from the B operand's [batch.., M, K]-less layout: the view built by
-- `operand` is [batch.., N, K]; transpose the last two dims by swapping strides.
local function kn_of(m)
  local shape, strides = {}, {}
  for d = 1, #m.bshape do shape[d], strides[d] = m.bshape[d], m.bstr[d] end
  local n = #shape
  shape[n - 1], shape[n] = shape[n], shape[n - 1]
  strides[n - 1], strides[n] = strides[n], strides[n - 1]
  return lathe.strided(m.bsrc, shape, strides, m.boff)
end

-- softmax(X) over the last axis as the frontend writes it; returns X.
local function softmax_input(p)
  if p.op ~= "Mul" then return nil end
  for _, o in ipairs({ { p.inputs[1], p.inputs[2] }, { p.inputs[2], p.inputs[1] } }) do
    local e, r = o[1], strip(o[2])
    if e.op == "Exp2" and r.op == "Recip" then
      local s = strip(r.inputs[1])
      if reduces_last(s, "add") and s.inputs[1] == e then
        local m = e.inputs[1]
        if m.op == "Mul" then
          for _, q in ipairs({ { m.inputs[1], m.inputs[2] }, { m.inputs[2], m.inputs[1] } }) do
            local c = const_of(q[2])
            local d = q[1]
            if c and math.abs(c - LOG2E) < 1e-6 and d.op == "Add" then
              for _, t in ipairs({ { d.inputs[1], d.inputs[2] }, { d.inputs[2], d.inputs[1] } }) do
                local neg = strip(t[2])
                if neg.op == "Neg" then
                  local mx = strip(neg.inputs[1])
                  if reduces_last(mx, "max") and mx.inputs[1] == t[1] then return t[1] end
                end
              end
            end
          end
        end
      end
    end
  end
  return nil
end

-- a broadcast View read as the smaller tensor it broadcasts (size 1 where the stride is 0)
local function unbroadcast(n)
  if not is_view(n) then return n end
  local vs = n.view_spec
  local shape, changed = {}, false
  for d = 1, #vs.shape do
    if vs.strides[d] == 0 and vs.shape[d] ~= 1 then shape[d], changed = 1, true else shape[d] = vs.shape[d] end
  end
  if not changed then return n end
  return lathe.strided(n.inputs[1], shape, vs.strides, vs.offset)
end

-- Is the View x of r (rank one more) r's row-major layout with the last (size-1) axis dropped?
local function drops_last(x, r)
  if not is_view(x) or rank(r) ~= rank(x) + 1 or x.inputs[1] ~= r then return false end
  local vs = x.view_spec
  if vs.offset ~= 0 then return false end
  local st = 1
  for d = rank(x), 1, -1 do
    if vs.shape[d] ~= r.shape[d] then return false end
    if vs.shape[d] ~= 1 and vs.strides[d] ~= st then return false end
    if type(vs.shape[d]) ~= "number" then return false end
    st = st * vs.shape[d]
  end
  return true
end

-- Peels masks and scales off the scores X down to Q·Kᵀ; `factor` is the product of the
-- scales peeled on the way down (a mask found inside a scale is scaled by it).
local function scores_of(x, factor, depth)
  if depth > 16 then return nil end
  if x.op == "Where" and x.dtype == "f32" then
    local c, a, b = x.inputs[1], x.inputs[2], x.inputs[3]
    local fill = const_of(a) == -math.huge
    local keep = not fill and const_of(b) == -math.huge
    if not fill and not keep then return nil end
    local s = scores_of(fill and b or a, factor, depth + 1)
    if not s then return nil end
    local cu = unbroadcast(c)
    local pat = lathe.causal_pattern(cu)
    if (fill and pat == "fill") or (keep and pat == "keep") then
      s.causal = true
    else  -- -inf and 0 stay so under a positive scale
      s.masks[#s.masks + 1] = fill and lathe.where(cu, -math.huge, 0) or lathe.where(cu, 0, -math.huge)
    end
    return s
  elseif x.op == "Add" then
    for _, o in ipairs({ { x.inputs[1], x.inputs[2] }, { x.inputs[2], x.inputs[1] } }) do
      local s = scores_of(o[1], factor, depth + 1)
      if s then
        local m = unbroadcast(o[2])
        if m.dtype ~= "f32" then return nil end
        if factor ~= 1 then m = m * factor end
        s.masks[#s.masks + 1] = m
        return s
      end
    end
    return nil
  elseif x.op == "Mul" then
    for _, o in ipairs({ { x.inputs[1], x.inputs[2] }, { x.inputs[2], x.inputs[1] } }) do
      local c = const_of(o[2])
      if c and c > 0 then
        local s = scores_of(o[1], factor * c, depth + 1)
        if s then s.scale = s.scale * c end
        return s
      end
    end
    return nil
  elseif is_view(x) and drops_last(x, x.inputs[1]) then
    local m = matmul_operands(x.inputs[1])
    if not m then return nil end
    local s = { scale = 1, causal = false, masks = {}, q = m.a, k = m.b }
    -- a constant factor on Q's source joins the scale
    local qs = m.asrc
    if qs.op == "Mul" then
      for _, o in ipairs({ { qs.inputs[1], qs.inputs[2] }, { qs.inputs[2], qs.inputs[1] } }) do
        local c = const_of(o[2])
        if c and c > 0 then
          s.scale = s.scale * c
          s.q = lathe.strided(o[1], m.ashape, m.astr, m.aoff)
          break
        end
      end
    end
    return s
  end
  return nil
end

-- Does the A operand read P exactly in its own row-major layout (a plain broadcast)?
local function reads_whole(mm)
  local p = mm.asrc
  if mm.aoff ~= 0 or rank(p) ~= #mm.ashape then return false end
  local st = 1
  for d = #mm.ashape, 1, -1 do
    if type(p.shape[d]) ~= "number" or p.shape[d] ~= mm.ashape[d] then return false end
    if p.shape[d] ~= 1 and mm.astr[d] ~= st then return false end
    st = st * p.shape[d]
  end
  return true
end

-- Grouped heads (GQA): t ([.., H, S, E]) reads the materialized repeat of a K/V with fewer
-- heads: Copy(View(x)) where the View broadcasts x's heads over a group dim (what
-- repeat_interleave / expand + reshape give). Returns t as a strided view of x itself with
-- Hkv heads (the fused op maps query head h to K/V head h / (H / Hkv)), or nil.
local function ungroup(t)
  if not is_view(t) or t.view_spec.offset ~= 0 then return nil end
  local src = t.inputs[1]
  if src.op ~= "Copy" or not is_view(src.inputs[1]) then return nil end
  local c = src.inputs[1]
  local cs = c.view_spec
  local n = #cs.shape
  if rank(t) ~= n - 1 then return nil end
  local rm, st = {}, 1  -- the Copy's row-major strides
  for d = n, 1, -1 do
    if type(cs.shape[d]) ~= "number" then return nil end
    rm[d], st = st, st * cs.shape[d]
  end
  local g = nil  -- the group dim: broadcast (stride 0, size > 1) right after a head dim
  for d = 2, n do
    if cs.strides[d] == 0 and cs.shape[d] > 1 and cs.shape[d - 1] > 1 and cs.strides[d - 1] ~= 0 then g = d break end
  end
  if not g then return nil end
  local ts = t.view_spec
  local shape, strides, used = {}, {}, {}
  for d = 1, #ts.shape do
    local size, s = ts.shape[d], ts.strides[d]
    if type(size) ~= "number" then return nil end
    if size == 1 then
      shape[d], strides[d] = 1, 0
    elseif s == rm[g] and size == cs.shape[g - 1] * cs.shape[g] and not used[g] then  -- the merged heads
      shape[d], strides[d], used[g] = cs.shape[g - 1], cs.strides[g - 1], true
    else
      local e = nil
      for x = 1, n do
        if x ~= g and x ~= g - 1 and not used[x] and rm[x] == s and cs.shape[x] == size then e = x break end
      end
      if not e then return nil end
      shape[d], strides[d], used[e] = size, cs.strides[e], true
    end
  end
  for x = 1, n do  -- t reads every element of the repeat exactly as the reshape laid it out
    if x ~= g - 1 and cs.shape[x] > 1 and not used[x] then return nil end
  end
  return lathe.strided(c.inputs[1], shape, strides, cs.offset)
end

local function to_attention(m)
  local r = m.root
  if r.dtype ~= "f32" then return nil end
  local mm = matmul_operands(r)
  if not mm or not reads_whole(mm) then return nil end
  local x = softmax_input(mm.asrc)
  if not x then return nil end
  local s = scores_of(x, 1, 0)
  if not s then return nil end
  local v = kn_of(mm)
  local q, k = s.q, s.k
  local kg, vg = ungroup(k), ungroup(v)  -- grouped heads: read the smaller K/V, not their repeat
  if kg and vg and kg.shape[rank(kg) - 2] == vg.shape[rank(vg) - 2] then k, v = kg, vg end
  if rank(q) ~= rank(v) or rank(k) ~= rank(v) then return nil end
  local L, S = q.shape[rank(q) - 1], k.shape[rank(k) - 1]
  if type(L) == "number" and type(S) == "number" and L * S < MIN_SCORES then return nil end
  local mask = nil
  for _, mk in ipairs(s.masks) do
    mask = mask and (mask + mk) or mk
  end
  local out = lathe.attention(q, k, v, mask, { causal = s.causal, scale = s.scale })
  return out:reshape(r.shape)
end

return lathe.ruleset("flash-attention", {
  lathe.rule("attention-to-flash", 'Reduce{op="add"}(Mul(p, q))', to_attention),
})
