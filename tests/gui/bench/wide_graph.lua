-- wide_graph.lua — writes a wide primitive graph for the frame-time benchmark:
-- `lathe script tests/gui/bench/wide_graph.lua OUT.lathe [COLUMNS] [ROWS]` (default 40 × 50:
-- 2,000 elementwise nodes plus the inputs). Columns run side by side; every fifth row each
-- column also reads its right-hand neighbour, so dot draws a wide mesh rather than a chain.
local out, cols, rows = arg[1], arg[2], arg[3]
assert(out, "usage: lathe script wide_graph.lua OUT.lathe [COLUMNS] [ROWS]")
cols, rows = tonumber(cols) or 40, tonumber(rows) or 50
local prev = {}
for c = 1, cols do prev[c] = lathe.input("x" .. c, {4, 8}) end
for r = 1, rows do
  local cur = {}
  for c = 1, cols do
    local b = r % 5 == 0 and prev[c % cols + 1] or prev[c]
    cur[c] = (r + c) % 2 == 0 and prev[c] + b or prev[c] * b
  end
  prev = cur
end
local outs = {}
for c = 1, cols do outs["y" .. c] = prev[c] end
local g = lathe.graph(outs)
g:save(out)
print(string.format("wrote %s (%d nodes)", out, #g:nodes()))
