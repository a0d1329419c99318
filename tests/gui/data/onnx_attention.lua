-- GUI test: an .onnx model opens as `lathe run` runs it (app/load_model.h): its causal
-- attention fused as a session of the flash-attention rules that the timeline shows at its
-- last step; compiled, its kernels are fewer than the unfused model's, which stepping the
-- timeline back to step 0 shows (the fusion undone).
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
gui.frames(2)
local t = gui.timeline()
expect(t ~= nil and t.source == "flash-attention", "a flash-attention session on open (got " .. tostring(t and t.source) .. ")")
expect(t.step == t.last and t.last >= 1, "the session at its last step (" .. t.step .. " of " .. t.last .. ")")
expect(t.stats["attention-to-flash"] ~= nil and t.stats["attention-to-flash"].fired == 2, "both layers' attention fused")
gui.compile("llvm")
local fused = gui.state()
expect(fused.rules == "flash-attention" and not fused.stale, "the fused graph compiled")
gui.rewrite("seek", 0)
gui.frames(2)
local plain = gui.state()
expect(plain.nodes > fused.nodes and plain.stale, "step 0: the model as in the file (" .. plain.nodes .. " vs " .. fused.nodes .. " nodes)")
gui.compile("llvm")
local unfused = gui.state()
expect(unfused.kernels > fused.kernels, "more kernels unfused (" .. unfused.kernels .. " vs " .. fused.kernels .. ")")
gui.level("kernel")
gui.frames(3)
