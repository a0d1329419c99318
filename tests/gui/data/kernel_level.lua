-- GUI test: compile, the kernel level (boxes = kernels + input buffers), select a kernel,
-- then provenance at the primitive level (its nodes outlined) and back from a node.
local function expect(cond, what) if not cond then error("expected " .. what, 2) end end
local out = ... or "/tmp"
local st = gui.state()
expect(st.level == "primitive" and st.nodes == 18, "small.lathe at the primitive level")
expect(not st.compiled and st.kernels == 0, "nothing compiled at start")

-- The kernel level before compiling is empty, with a reason, not an error.
gui.level("kernel")
gui.frames(2)
expect(gui.state().boxes == 0 and gui.state().error == nil, "an empty kernel level before compiling")

local n = gui.compile("c")
st = gui.state()
expect(n >= 1 and st.kernels == n and st.backend == "c", "kernels after gui.compile('c'), got " .. n)
expect(st.color == "kernel", "kernel colouring after compiling, got " .. st.color)
gui.frames(3)
st = gui.state()
-- softmax(relu(x*w+b)) fuses into one kernel reading three inputs.
expect(st.boxes == n + 3 and st.edges == 3, "kernel boxes + 3 input buffers, got " .. st.boxes .. " boxes")
expect(gui.select_kernel(1) == "k0_softmax", "kernel 1 is k0_softmax")
st = gui.state()
expect(st.selected_kernel == 1 and st.kernel_name == "k0_softmax", "kernel 1 selected")
expect(st.selected_summary == "Mul", "the kernel's root node selected too, got " .. tostring(st.selected_summary))
gui.screenshot(out .. "/kernel_level.png")

-- Provenance: at the primitive level the kernel's 15 nodes are outlined.
gui.level("primitive")
gui.frames(3)
st = gui.state()
-- Its two constants are attributes of the boxes that read them (not boxes): 13 boxes.
expect(st.highlighted == 13, "13 highlighted primitive boxes, got " .. st.highlighted)
gui.weights(true)     -- constants as boxes of their own: all 15 nodes
gui.frames(3)
st = gui.state()
expect(st.highlighted == 15, "15 highlighted primitive boxes with weights shown, got " .. st.highlighted)
gui.weights(false)
gui.screenshot(out .. "/kernel_provenance.png")

-- And the other way: selecting a node selects the kernel computing it.
gui.select("Exp2")
st = gui.state()
expect(st.selected_kernel == 1 and st.selected_summary == "Exp2", "Exp2 selects k0_softmax")
gui.select("Input x")
expect(gui.state().selected_kernel == nil, "an input is in no kernel")
gui.level("kernel")
