-- profile_agree.lua — run by profile_agree.sh: compiles the graph shown with the app's
-- default backend and profiles it RUNS times in the app (gui.profile: a background job,
-- while the window draws at most once a second), printing the median whole-run time and
-- the kernels' fastest calls added up.
local RUNS = 10
gui.compile()
gui.profile(RUNS)
local st = gui.state()
print(string.format("gui.profile: %.3f ms per run, kernel minimums %.3f ms (%d kernels)", st.total_ms,
  st.kernels_min_ms, st.kernels))
