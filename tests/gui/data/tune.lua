-- GUI test: the Tune tab (views/tune_job.h, tune_panel.h) driven through gui.tune.
-- A whole-graph tune ranked by the cost model is deterministic: every distinct kernel
-- gets a record, the plot's points are its candidates, the best is never above the
-- heuristic and the column sum beats it; Apply writes the records and makes `p` the tuned
-- program (the Kernels panel shows the best loop IR, p still computes what the
-- interpreter does). A short measured tune of one kernel times real candidates; Cancel
-- keeps what was found. Screenshots: tune_model.png (the plot and both loop IRs).
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ...
local recs = out .. "/tune_records.jsonl"
local g0 = g   -- the graph opened (gui.compile keeps it)
local ok, err

gui.compile("interp")
ok, err = pcall(gui.tune, {measure = "model"})
expect(not ok and tostring(err):find("interp backend", 1, true), "no tuning on interp: " .. tostring(err))
expect(gui.compile("llvm") >= 2, "at least two kernels")
-- bad requests raise, and nothing runs
ok, err = pcall(gui.tune, {kernel = 99, measure = "model"})
expect(not ok and tostring(err):find("out of range", 1, true), "kernel 99 out of range: " .. tostring(err))
ok, err = pcall(gui.tune, {measure = "guess"})
expect(not ok and tostring(err):find("'time' or 'model'", 1, true), "a bad measure named: " .. tostring(err))
ok, err = pcall(gui.tune_apply)
expect(not ok and tostring(err):find("no finished tuning run", 1, true), "nothing to apply yet: " .. tostring(err))

-- the whole graph with the cost model
local r = gui.tune{measure = "model", trials = 8, records = recs}
expect(r.finished and not r.interrupted and r.measure == "model", "a finished model run")
expect(#r.kernels >= 2, "every distinct kernel tuned, got " .. #r.kernels)
local colsum
for _, k in ipairs(r.kernels) do
  expect(k.done and k.has_record, k.name .. ": a record")
  expect(k.trials == #k.points and k.trials > 8, k.name .. ": one plotted point per candidate (" .. k.trials .. ")")
  expect(k.ms > 0 and k.ms <= k.baseline_ms, k.name .. ": the best no slower than the heuristic")
  for _, v in ipairs(k.points) do expect(v == -1 or v >= k.ms * (1 - 1e-9), k.name .. ": no candidate below the best") end
  expect(k.heuristic_loop:find("kernel " .. k.name, 1, true) and k.best_loop:find("kernel " .. k.name, 1, true),
         k.name .. ": both loop IRs")
  if k.kind == "reduce" then colsum = k end
end
expect(colsum and colsum.faster, "the column sum faster than the heuristic under the model")
expect(colsum.best_loop ~= colsum.heuristic_loop and (colsum.schedule[1]:find("^reduce_rows") or colsum.schedule[1]:find("^split_k")),
       "its best schedule (starting with reduce_rows or split_k) differs from the heuristic's: " .. table.concat(colsum.schedule, " | "))
-- deterministic: the same schedules again
local again = gui.tune{measure = "model", trials = 8, records = recs}
for i, k in ipairs(r.kernels) do
  local a = again.kernels[i]
  expect(a.name == k.name and table.concat(a.schedule, "\n") == table.concat(k.schedule, "\n") and a.ms == k.ms,
         k.name .. ": the same schedule on a second model run")
end
gui.select_kernel(colsum.name)   -- the Tune tab shows the selected kernel's row
gui.tab("tune")
gui.frames(3)
gui.screenshot(out .. "/tune_model.png")

-- Apply: records written, p is the tuned program
local heuristic_p = p
local n = gui.tune_apply()
expect(n >= 1 and gui.tune_result().applied, "Apply rescheduled the kernels that beat the heuristic (" .. tostring(n) .. ")")
expect(p ~= heuristic_p, "p replaced by the tuned program")
gui.select_kernel(colsum.name)
expect(gui.kernel_code("loop") == colsum.best_loop, "the Kernels panel shows the best loop IR")
expect(p:loop(colsum.kernel) == colsum.best_loop, "p runs the best schedule")
local from_records = lathe.compile(g0, {backend = "llvm", tuned = recs})
expect(from_records:loop(colsum.kernel) == colsum.best_loop, "the records file replays the best schedule")
local inputs = {x = lathe.randn({384, 256}, 1), a = lathe.randn({33, 70}, 2), b = lathe.randn({70, 50}, 3)}
local want, got = lathe.run(g0, inputs), p:run(inputs)
for _, name in ipairs({"colsum", "y"}) do
  local same, why = lathe.allclose(got[name], want[name], 1e-4, 1e-4)
  expect(same, "the tuned p computes " .. name .. " as the interpreter does: " .. tostring(why))
end

-- a short measured tune of one kernel on the backend
local rt = gui.tune{kernel = colsum.name, trials = 4, measure = "time", records = recs}
expect(rt.finished and #rt.kernels == 1 and rt.kernels[1].name == colsum.name, "one kernel measured")
local k = rt.kernels[1]
expect(k.trials == 4 and #k.points == 4, "four candidates timed, got " .. k.trials)
for _, v in ipairs(k.points) do expect(v > 0 or v == -1, "a time or a failure") end
expect(k.has_record and k.ms > 0 and k.baseline_ms > 0, "a measured record")

-- Cancel before the search starts: nothing found, and nothing to apply
gui.hold_jobs(true)
gui.tune{measure = "model", wait = false}
expect(gui.job().kind == "tune" and gui.tune_cancel(), "a running Tune job cancelled")
gui.wait()
local c = gui.tune_result()
expect(c.finished and c.interrupted and #c.kernels == 0, "cancelled before any kernel")
ok, err = pcall(gui.tune_apply)
expect(not ok and tostring(err):find("found no schedule", 1, true), "nothing to apply: " .. tostring(err))
-- Cancel mid-search (as the button does, after the 20th candidate): the kernel being
-- tuned keeps its best so far, the rest are not tuned
local m = gui.tune{measure = "model", trials = 8, cancel_after = 20}
expect(m.interrupted and #m.kernels == 1 and m.kernels[1].has_record and m.kernels[1].ms <= m.kernels[1].baseline_ms,
       "interrupted after the first kernel, which keeps its best")
expect(not gui.tune_cancel(), "nothing left to cancel")

-- the final screenshot: the model run's plot again
gui.tune{measure = "model", trials = 8, records = recs}
gui.select_kernel(colsum.name)
gui.frames(2)
