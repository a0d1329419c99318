-- GUI test: the kernels panel shows the selected kernel's loop IR, source and assembly.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ... or "/tmp"
gui.compile("c")
gui.select_kernel("softmax")
local loop = gui.kernel_code("loop")
expect(loop:find("kernel k0_softmax", 1, true) and loop:find("for i0", 1, true), "loop IR with the kernel's loops")
local src = gui.kernel_code("source")
expect(src:find("void k0_softmax", 1, true), "C source of k0_softmax")
gui.tab("loop")
gui.screenshot(out .. "/kernels_loop.png")
gui.tab("source")
gui.screenshot(out .. "/kernels_source.png")
local asm = gui.kernel_code("asm")
expect(#asm > 100, "assembly from the c backend")
gui.tab("asm")
