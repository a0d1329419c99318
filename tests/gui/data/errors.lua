-- GUI test: failing commands raise to the script but never close the app; the error
-- panel shows the last one.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local ok, err = pcall(gui.compile, "no-such-backend")
expect(not ok and tostring(err):find("no-such-backend", 1, true), "an error naming the unknown backend")
expect(not gui.state().compiled, "nothing compiled after a failed compile")
ok = pcall(gui.level, "loops")
expect(not ok, "an unknown level to fail")
ok = pcall(gui.open, "/no/such/file.lathe")
expect(not ok and gui.state().error ~= nil and gui.state().nodes == 18, "a failed open keeps the graph, shows the error")
ok = pcall(gui.select_kernel, 1)
expect(not ok, "select_kernel before compiling to fail")
gui.compile("c")
expect(gui.state().kernels == 1, "compiling still works afterwards")
