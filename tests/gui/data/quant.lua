-- GUI test: quantization in the app. Timeline > Quantize… (gui.quantize, the `:quantize`
-- command) is one session step; Inspector > Quantization (gui.quant_info) shows, for a
-- node near a quantize / dequantize, the integer tensor, its scales (per channel: count
-- and range) and zero point, read back out of the graph; "Measure the error"
-- (gui.quant_error) compares each output with the float graph before the step. Going back
-- before the step shows the float graph with no sites; a failing quantize (a block that
-- does not divide a row) leaves the graph as it was, with the error in the log.
-- Screenshot: quant.png (the inspector on a dequantize and the timeline).
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
local nodes0 = gui.state().nodes

-- a failing step first: the graph stays, no session step is added
local ok, err = pcall(gui.quantize, {mode = "weight-int4", block = 7})
expect(not ok and tostring(err):find("does not divide", 1, true), "a bad block refused: " .. tostring(err))
expect(gui.state().nodes == nodes0, "the graph unchanged after the failed step")

gui.quantize{mode = "weight-int8", per_channel = true}
local tl = gui.timeline()
expect(tl and tl.step == 1 and tl.last == 1, "one session step")
local st = gui.state()
expect(st.nodes ~= nodes0, "the quantized graph shown")

-- find a dequantize with a per-channel scale: select the Casts in turn
local found
for _, n in ipairs(s:graph():nodes()) do
  if n.op ~= "Cast" then goto continue end
  gui.select(n.id)
  local qi = gui.quant_info()
  for _, site in ipairs(qi.sites) do
    if site.kind == "dequantize" and site.dtype == "i8" then found = {qi = qi, site = site} break end
  end
  if found then break end
  ::continue::
end
expect(found, "a dequantize of an i8 weight near a Cast")
expect(found.qi.step and found.qi.step:find("quantize weight-int8 per-channel", 1, true), "the step named: " .. tostring(found.qi.step))
local sc = found.site.scales[1]
expect(sc and sc.constant and sc.count > 1 and sc.min > 0 and sc.max >= sc.min, "a per-channel constant scale")
expect(found.site.lines[1]:find("dequantize at %", 1, true), "the site's line: " .. found.site.lines[1])
expect(#found.qi.errors == 0, "no error measured yet")

-- measure the error (interpreter) and show it
local errs = gui.quant_error("interp")
expect(#errs >= 1, "one error row per output")
for _, e in ipairs(errs) do
  expect(e.rel_max >= 0 and e.rel_max < 0.05, e.output .. ": small error " .. e.rel_max)
  expect(e.cosine > 0.999, e.output .. ": cosine " .. e.cosine)
end
expect(#gui.quant_info().errors == #errs, "the inspector keeps the errors")
gui.tab("inspector")
gui.screenshot(out .. "/quant.png")

-- back before the step: the float graph, no quantization, no errors
gui.rewrite("back")
expect(gui.state().nodes == nodes0, "back to the float graph")
local qi = gui.quant_info()
expect(qi.step == nil and #qi.errors == 0, "no quantize step at step 0")
ok, err = pcall(gui.quant_error)
expect(not ok and tostring(err):find("does not come from a quantize step", 1, true), "no error to measure at step 0: " .. tostring(err))
gui.rewrite("seek", 1)
expect(gui.quant_info().step ~= nil, "forward again: the step is known")
print("ok")
