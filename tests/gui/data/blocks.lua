-- blocks.lua — a small model for the GUI tests of the kernel level's scopes: three MLP
-- blocks (layer norm, dense, GELU, dense, residual) under scopes h.0 … h.2, d=32, T=8.
local d, T = 32, 8
local function dense(x, n_in, n_out, scope, name)
  return lathe.scope(scope, function()
    return x:matmul(lathe.input(name .. ".w", {n_in, n_out})) + lathe.input(name .. ".b", {n_out})
  end)
end
local x = lathe.input("x", {T, d})
for i = 0, 2 do
  local p = "h." .. i .. "."
  x = lathe.scope("h." .. i, function()
    local h = lathe.scope("ln", function()
      return x:layer_norm(1, lathe.input(p .. "ln.w", {d}), lathe.input(p .. "ln.b", {d}), 1e-5)
    end)
    local f = dense(h, d, 4 * d, "fc", p .. "fc"):gelu("tanh")
    return x + dense(f, 4 * d, d, "proj", p .. "proj")
  end)
end
return lathe.graph{ y = x }
