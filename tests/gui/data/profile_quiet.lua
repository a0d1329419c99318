-- GUI test: while a profile job measures, the window draws at most once a second (so the
-- software renderer does not take the cores the kernels are timed on). A held profile job
-- keeps the job running while the script asks for frames: three frames take at least two
-- seconds then, where they take a few hundredths otherwise.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
gui.compile("c")
gui.frames(1)
local t0 = gui.clock()
gui.frames(3)
local idle = gui.clock() - t0
gui.hold_jobs(true)
expect(gui.profile(3, false) == nil, "gui.profile(n, false) to return at once")
expect(gui.job().kind == "profile", "a held profile job")
t0 = gui.clock()
gui.frames(3)
local quiet = gui.clock() - t0
expect(quiet >= 1.9, string.format("3 frames during a profile to take >= 2 s (one a second), took %.2f s", quiet))
gui.wait()
expect(gui.state().profiled, "the profile landed")
print(string.format("3 frames: %.2f s idle, %.2f s while profiling", idle, quiet))
