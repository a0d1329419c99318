#!/bin/sh
# frame_time.sh — the desktop app's frame-time benchmark (issue 6): median frame times under
# Xvfb (Mesa llvmpipe) for a 2,000-node primitive graph and a 50,000-node graph opened
# collapsed, each as opened, fitted to the window and zoomed to 60%. Prints the machine's
# load first: the machine is shared, and llvmpipe's rasterizing is most of a frame.
#   tests/gui/bench/frame_time.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, /tmp/lathe-frame-time)
# The 50,000-node graph (--demo 5000) folds into ~5,000 boxes; dot lays them out in seconds.
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
out=${2:-/tmp/lathe-frame-time}
mkdir -p "$out"
lathe="$build/lathe"
uptime
"$lathe" script "$here/wide_graph.lua" "$out/wide.lathe" 40 50
echo "== 2,000-node primitive graph (40 columns x 50 rows)"
xvfb-run -a "$lathe" gui "$out/wide.lathe" --level primitive --script "$here/frame_time.lua" \
  --screenshot "$out/wide_end.png" --frames 3 | grep -v '^lathe gui: wrote'
echo "== 50,000-node graph opened collapsed (demo MLP, 5000 layers)"
xvfb-run -a "$lathe" gui --demo 5000 --script "$here/frame_time.lua" \
  --screenshot "$out/demo5000_end.png" --frames 3 | grep -v '^lathe gui: wrote'
uptime
