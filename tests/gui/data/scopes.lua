-- GUI test: a whole 12-layer GPT-2 (tests/gui/models/gpt2_12.lua) as nested scopes. It
-- opens at its top level collapsed; a scope expands in place into a frame and collapses
-- back; search and gui.select open the scopes that hide a match; weights are attributes
-- of the node that reads them unless gui.weights(true).
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local function has(list, x) for _, v in ipairs(list) do if v == x then return true end end return false end
local out = ...
gui.frames(1)
local st = gui.state()
expect(st.level == "tensor", "the tensor level, got " .. st.level)
local top = st.boxes
expect(top <= 60, "at most 60 boxes at the top level, got " .. top)
local boxes = gui.boxes()
for _, name in ipairs({"▶ embeddings", "▶ h.0", "▶ h.11", "▶ ln_f", "▶ head"}) do
  expect(has(boxes, name), name .. " among the top-level boxes")
end
expect(st.frames == 0, "no frames when collapsed")
expect(st.layout_ms < 2000, "the layout in under 2 s, took " .. st.layout_ms .. " ms")
gui.screenshot(out .. "/scopes_top.png")

-- Expand h.3 in place: a frame holding its parts, the other layers still boxes.
gui.expand("h.3")
gui.frames(2)
st = gui.state()
local b, frames = gui.boxes()
expect(st.frames == 1 and frames[1] == "h.3", "h.3 drawn as a frame, got " .. st.frames .. " frames")
expect(not has(b, "▶ h.3") and has(b, "▶ h.2") and has(b, "▶ h.4"), "h.3 open, h.2 and h.4 still collapsed")
expect(has(b, "▶ attn") and has(b, "▶ mlp"), "h.3's attn and mlp inside it")
gui.expand("h.3/mlp")
gui.frames(2)
st = gui.state()
expect(st.frames == 2, "h.3/mlp nested in h.3, got " .. st.frames .. " frames")
gui.screenshot(out .. "/scopes_h3.png")
gui.collapse("h.3")          -- and everything inside it
gui.frames(2)
st = gui.state()
expect(st.frames == 0 and st.boxes == top and st.expanded == 0, "back to the top level after collapse, got " .. st.boxes)
expect(not pcall(gui.expand, "h.99"), "an unknown scope is an error")

-- Search into a collapsed scope: the weight's scopes open and the box that reads it is selected.
gui.select("h.7.mlp.c_proj.b")
gui.frames(2)
st = gui.state()
expect(st.selected_summary == "Input h.7.mlp.c_proj.b", "the weight selected, got " .. tostring(st.selected_summary))
b, frames = gui.boxes()
expect(has(frames, "h.7") and has(frames, "h.7/mlp"), "h.7 and h.7/mlp opened for it")
expect(not has(b, "▶ h.7"), "h.7 is no longer a collapsed box")
-- Weights are attributes: no box of their own, unless asked for.
for _, t in ipairs(b) do expect(not t:find("^Input h%.7%.mlp"), "no box for a weight, got " .. t) end
expect(st.folded > 0, "weights folded into their readers")
gui.screenshot(out .. "/scopes_search.png")
gui.weights(true)
gui.frames(2)
b = gui.boxes()
expect(has(b, "Input h.7.mlp.c_proj.b"), "with gui.weights(true) the weight is a box")
gui.weights(false)
gui.collapse_all()
gui.frames(2)

-- The search box: exact names first; stepping opens the scope of each hit, and closes the
-- one the previous step opened.
gui.search("h.2.attn.c_attn.w")
gui.frames(2)
st = gui.state()
expect(st.search_hits >= 1 and st.search_cursor == 1, "a hit for the weight's name, got " .. st.search_hits)
expect(st.selected_summary == "Input h.2.attn.c_attn.w", "the search selected it")
b, frames = gui.boxes()
expect(has(frames, "h.2"), "the search opened h.2")
gui.search("h.9.mlp.c_fc.b")
gui.frames(2)
b, frames = gui.boxes()
expect(has(frames, "h.9") and not has(frames, "h.2"), "the next search opened h.9 and closed h.2")
gui.collapse_all()
gui.frames(2)
expect(gui.state().boxes == top, "collapse_all: the top level again")
