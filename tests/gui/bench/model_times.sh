#!/bin/sh
# model_times.sh — the desktop app at real-model scale (issue 13): for each model, the
# seconds from asking to a complete picture for opening (load included), the primitive
# level, compile + kernel level, expanding / collapsing one scope, and the median frame
# while panning at each level, under Xvfb (Mesa llvmpipe); each line says whether the
# issue's bound is met. Screenshots per model go to OUT_DIR/NAME/. Last, the profile bound
# (gui.profile against lathe run --profile on the GPT-2 block sample, profile_agree.sh;
# NO_PROFILE=1 skips it).
#   tests/gui/bench/model_times.sh [BUILD_DIR] [OUT_DIR] [MODEL…]
# MODEL is a .lua / .lathe / .onnx file or a model directory holding model.onnx; by
# default the 12-layer GPT-2 in Lua and, where present, /work/models/full/{gpt2_small,
# bert_base,resnet50}. NO_COMPILE=1 skips compiling. The machine is shared: the load is
# printed before and after; repeat and take the minimum.
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
out=${2:-/tmp/lathe-model-times}
shift 2 2>/dev/null || shift $#
models="$*"
if [ -z "$models" ]; then
  models="$here/../models/gpt2_12.lua"
  for m in gpt2_small bert_base resnet50; do
    [ -f "/work/models/full/$m/model.onnx" ] && models="$models /work/models/full/$m/model.onnx"
  done
fi
mkdir -p "$out"
script="$out/model_times.lua"
{ [ -n "$NO_COMPILE" ] && echo 'local COMPILE = false'; cat "$here/model_times.lua"; } > "$script"
uptime
for m in $models; do
  [ -d "$m" ] && m="$m/model.onnx"
  name=$(basename "$(dirname "$m")")
  case "$m" in *.lua|*.lathe) name=$(basename "$m" | sed 's/\.[a-z]*$//') ;; esac
  mkdir -p "$out/$name"
  echo "== $m"
  xvfb-run -a "$build/lathe" gui "$m" --size 1600x1000 --script "$script" --screenshot "$out/$name/end.png" \
    --frames 2 2>&1 | grep -v '^lathe gui: wrote' || true
done
uptime
if [ -z "$NO_PROFILE" ]; then
  echo "== gui.profile against lathe run --profile (samples/06-gpt2-block.lua)"
  "$here/profile_agree.sh" "$build" "$here/../../../samples/06-gpt2-block.lua" 3
fi
