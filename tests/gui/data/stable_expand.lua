-- GUI test: a scope expands and collapses in place (issue 13). On a 12-layer GPT-2
-- (tests/gui/models/gpt2_12.lua) the boxes outside the scope keep their places on
-- screen: the ones above it do not move, the ones below it all move down by the same
-- amount and not sideways, and collapsing puts every box back where it was. Nested
-- scopes the same. At the primitive level a frame's title collapses it into one box
-- (gui.collapse there), and a click on that box (gui.expand) opens it again.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...

-- Boxes by title (titles of the boxes compared are unique in these views).
local function places()
  local t = {}
  for _, p in ipairs(gui.places()) do t[p.title] = p end
  return t
end

-- Compares the places of every box outside `scope_title` before and after: above the
-- scope's old top edge (entirely) they stay; below its old bottom edge they move by one
-- common vector (0, dy); boxes beside it (overlapping its rows) are not checked.
local function check_in_place(before, after, scope_title, what)
  local s = before[scope_title]
  expect(s ~= nil, what .. ": " .. scope_title .. " shown before")
  local dy, compared = nil, 0
  for title, b in pairs(before) do
    local a = after[title]
    if title ~= scope_title and a then
      if b.y + b.h <= s.y + 0.5 then
        expect(math.abs(a.x - b.x) < 0.5 and math.abs(a.y - b.y) < 0.5,
          string.format("%s: %s above the scope stays (moved by %.1f, %.1f)", what, title, a.x - b.x, a.y - b.y))
        compared = compared + 1
      elseif b.y >= s.y + s.h - 0.5 then
        expect(math.abs(a.x - b.x) < 0.5, string.format("%s: %s below the scope does not move sideways (%.1f)", what, title, a.x - b.x))
        dy = dy or (a.y - b.y)
        expect(math.abs((a.y - b.y) - dy) < 0.5,
          string.format("%s: %s below moves down with the rest (%.1f, others %.1f)", what, title, a.y - b.y, dy))
        compared = compared + 1
      end
    end
  end
  expect(compared >= 4, what .. ": boxes above and below compared, got " .. compared)
  return dy
end
local function same_places(a, b, what)
  for title, p in pairs(a) do
    local q = b[title]
    expect(q and math.abs(q.x - p.x) < 0.5 and math.abs(q.y - p.y) < 0.5,
      string.format("%s: %s back at its place", what, title))
  end
end

gui.frames(1)
expect(gui.state().toolbar_fits, "the toolbar (search box and its arrows) in view at 1024 px")
gui.zoom(0.5)   -- several layers in view, h.3 near the top
gui.frames(1)
local h = places()["▶ h.3"]
gui.pan(h.x + h.w / 2 - 400, h.y - 120)
gui.frames(1)
local top = places()
gui.expand("h.3")
gui.frames(2)
local h3 = places()
local dy = check_in_place(top, h3, "▶ h.3", "expand h.3")
expect(dy and dy > 0, "the layers below h.3 moved down to make room")
gui.screenshot(out .. "/stable_h3.png")

-- A scope inside the open one: the boxes of h.3 and of the top level outside it stay.
gui.expand("h.3/mlp")
gui.frames(2)
local mlp = places()
check_in_place(h3, mlp, "▶ mlp", "expand h.3/mlp")
gui.collapse("h.3/mlp")
gui.frames(2)
same_places(h3, places(), "collapse h.3/mlp")
gui.collapse("h.3")
gui.frames(2)
same_places(top, places(), "collapse h.3")

-- The primitive level: its frames collapse into a box and open again, in place.
gui.level("primitive")
gui.frames(2)
local st = gui.state()
expect(st.level == "primitive" and st.frames > 0, "frames at the primitive level, got " .. st.frames)
local prim_boxes = st.boxes
local _, frames = gui.boxes()
local has_h5 = false
for _, f in ipairs(frames) do has_h5 = has_h5 or f == "h.5" end
expect(has_h5, "h.5 is a frame at the primitive level")
gui.collapse("h.5")
gui.frames(2)
st = gui.state()
expect(st.level == "primitive", "gui.collapse stays at the primitive level, got " .. st.level)
local b
b, frames = gui.boxes()
local box_h5 = false
for _, t in ipairs(b) do box_h5 = box_h5 or t == "▶ h.5" end
for _, f in ipairs(frames) do expect(f ~= "h.5" and not f:find("^h%.5/"), "no frame of h.5 once collapsed, got " .. f) end
expect(box_h5, "h.5 is one box at the primitive level")
expect(st.boxes < prim_boxes, "fewer boxes with h.5 collapsed")
gui.screenshot(out .. "/stable_prim_collapsed.png")
gui.expand("h.5")
gui.frames(2)
st = gui.state()
expect(st.level == "primitive" and st.boxes == prim_boxes, "h.5 open again: " .. prim_boxes .. " boxes, got " .. st.boxes)
