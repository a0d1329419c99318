-- GUI test: compile, profile and run are background jobs. A held job lets the script
-- look at the app mid-job: the window keeps rendering, views change, the timeline steps
-- (the job compiles a snapshot, so its result arrives marked out of date), and the
-- blocking gui.compile / profile / run give the same results as before.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
local before = gui.state()

gui.hold_jobs(true)
expect(gui.compile("c", false) == nil, "gui.compile(b, false) to return at once")
local job = gui.job()
expect(job and job.kind == "compile" and job.held, "a held compile job")
gui.frames(3)                  -- frames render while it waits
expect(gui.state().busy == "compile" and not gui.state().compiled, "still compiling after 3 frames")
gui.level("tensor")            -- the app stays interactive
gui.level("primitive")
gui.select("Exp2")
gui.load_rules("simplify")     -- and the graph may change under the job
gui.rewrite("step")
gui.frames(2)
expect(gui.state().nodes < before.nodes, "the rewrite step went through during the job")
gui.screenshot(out .. "/jobs_busy.png")
gui.wait()
local st = gui.state()
expect(st.compiled and st.kernels >= 1 and st.stale and st.busy == nil, "compiled, marked from an earlier step")
expect(st.jobs_finished == before.jobs_finished + 1, "one job finished")

gui.compile("c")               -- blocking: waits, then the result is there
st = gui.state()
expect(st.compiled and not st.stale, "recompiled: up to date")
local ms = gui.profile(3)
expect(ms > 0 and gui.state().profiled, "a profile through the job")
gui.run()
expect(gui.state().ran, "values after gui.run()")

-- A job whose graph is replaced before it ends is dropped, not shown on the new graph.
gui.hold_jobs(true)
gui.compile("c", false)
gui.open(before.file)
gui.wait()
expect(not gui.state().compiled, "the old graph's compile dropped after opening another")

-- A failing job raises to the script and fills the error panel; the app goes on.
local ok, err = pcall(gui.compile, "no-such-backend")
expect(not ok and tostring(err):find("no-such-backend", 1, true), "the job's error raised: " .. tostring(err))
expect(gui.state().error and gui.state().busy == nil, "the error panel shows it, nothing running")
gui.compile("c")
expect(gui.state().kernels >= 1, "compiling works again")
gui.frames(2)
