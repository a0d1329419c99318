-- model_times.lua — the desktop app on a whole model (run by model_times.sh; any graph:
-- `lathe gui FILE --script model_times.lua --screenshot OUT/x.png`). Prints, in seconds
-- from asking to the complete picture on screen (gui.frames waits for the layout):
-- opening (process start to the first picture, loading included), the primitive level,
-- compiling plus the kernel level, expanding and collapsing one scope; and the median
-- frame time while panning at the tensor level. Screenshots of each step go to OUT.
-- model_times.sh prepends `local COMPILE = false` to skip compiling (NO_COMPILE=1).
local out = ...
local function t() return gui.clock() end
gui.frames(1)
local st = gui.state()
local name = st.title
local function line(what, secs, extra)
  print(string.format("  %-28s %7.2f s   %s", what, secs, extra or ""))
end
print(string.format("%s: %d nodes", name, st.nodes))
line("open (load + first picture)", t(), string.format("%d boxes, %d frames, layout %.1f ms", st.boxes, st.frames, st.layout_ms))
gui.screenshot(out .. "/tensor.png")

-- Panning at the tensor level: 60 frames, each moved by 12 px.
for _ = 1, 60 do gui.pan(0, 12); gui.frames(1) end
local f = gui.frame_stats(60)
print(string.format("  %-28s %7.2f ms  (ui %.2f + render %.2f + swap %.2f; %d boxes in view; %d/60 frames drew the graph panel only)",
  "pan: median frame", f.total_ms, f.ui_ms, f.render_ms, f.swap_ms, f.drawn_boxes, f.partial or 0))
gui.fit("readable")
gui.frames(1)

-- Expand and collapse a scope box from the middle of the top level (a layer).
local scopes = {}
for _, b in ipairs(gui.boxes()) do
  local s = b:match("^▶ (.*)$")
  if s then scopes[#scopes + 1] = s end
end
local scope = scopes[math.max(1, #scopes // 2)]
local expand_path
if scope then
  -- a box's second label line is "PATH · N ops"; the title is enough for Lua scopes, ONNX
  -- paths start with "/"
  for _, p in ipairs({scope, "/" .. scope}) do
    if pcall(gui.expand, p) then expand_path = p break end
  end
end
if expand_path then
  local t0 = t()
  gui.frames(1)
  st = gui.state()
  line("expand " .. expand_path, t() - t0, string.format("%d boxes, %d frames, layout %.2f ms", st.boxes, st.frames, st.layout_ms))
  gui.screenshot(out .. "/expanded.png")
  t0 = t()
  gui.collapse(expand_path)
  gui.frames(1)
  line("collapse " .. expand_path, t() - t0)
end

local t0 = t()
gui.level("primitive")
gui.frames(1)
st = gui.state()
line("primitive level", t() - t0, string.format("%d boxes, %d frames, layout %.1f ms", st.boxes, st.frames, st.layout_ms))
gui.screenshot(out .. "/primitive.png")

if COMPILE ~= false then
  t0 = t()
  gui.compile()
  local tc = t() - t0
  gui.level("kernel")
  gui.frames(1)
  st = gui.state()
  line("compile + kernel level", t() - t0, string.format("compile %.2f s; %d kernels, %d boxes, layout %.1f ms", tc, st.kernels,
    st.boxes, st.layout_ms))
  gui.screenshot(out .. "/kernel.png")
end
gui.level("tensor")
print(string.format("  %-28s %7.2f s", "total", t()))
