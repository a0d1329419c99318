-- GUI test: a script that fails makes `lathe gui --screenshot` exit 1, and the screenshot
-- shows the error panel.
gui.frames(1)
error("this script fails on purpose")
