-- frame_time.lua — the desktop app's frame-time benchmark (run by frame_time.sh; any graph:
-- `lathe gui FILE --script frame_time.lua --screenshot OUT/x.png`). For the graph as it
-- opened, fitted whole into the window and zoomed in to where labels show, it renders
-- FRAMES frames and prints the medians of where the time went (gui.frame_stats): ui =
-- building ImGui's draw lists (our code), render = rasterizing them (llvmpipe under
-- Xvfb), swap = presenting. Each view is also screenshotted.
local out = ...
local FRAMES = 120
local st = gui.state()
print(string.format("graph: %s · %d nodes · level %s", st.title, st.nodes, st.level))
local function measure(name)
  gui.frames(FRAMES)
  local f = gui.frame_stats(FRAMES)
  local s = gui.state()
  print(string.format("  %-10s %6d boxes (%5d in view, labels %-3s) zoom %5.1f%%  median %6.2f ms = ui %5.2f + render %5.2f + swap %5.2f  (%d vertices)",
    name, s.boxes, f.drawn_boxes, f.text and "yes" or "no", gui.zoom() * 100, f.total_ms, f.ui_ms, f.render_ms,
    f.swap_ms, f.vertices))
  gui.screenshot(out .. "/frame_time_" .. name .. ".png")
  return f
end
measure("opened")
gui.fit()
measure("fit")
gui.zoom(0.6)
measure("zoom60")
