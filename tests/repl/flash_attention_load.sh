#!/bin/sh
# flash_attention_load.sh LATHE MODEL_DIR — `lathe repl MODEL.onnx` (:load) runs what
# `lathe run` runs (app/load_model.h, scripting/attention_on_load.h): the small GPT-2's
# causal attention fused as a session s at its last step, compiled to as many kernels as
# `lathe kernels` lists, its outputs those `lathe run --output-dir` writes; :seek 0 undoes
# it; with LATHE_FLASH_ATTENTION=0 neither fuses and the outputs still agree.
set -u
LATHE=$1
M=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*.out; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

for flash in causal 0; do
  export LATHE_FLASH_ATTENTION=$flash
  "$LATHE" run "$M/model.onnx" --backend llvm --input tokens="$M/npy/in_tokens.npy" --output-dir "$T/run-$flash" \
    > "$T/run-$flash.out" 2>&1 || fail "lathe run ($flash)"
  kernels=$("$LATHE" kernels "$M/model.onnx" --backend llvm --show none | sed -n '1s/^# \([0-9]*\) kernels.*/\1/p')
  [ -n "$kernels" ] || fail "no kernel count from lathe kernels ($flash)"
  cat > "$T/in" <<IN
print("session", s ~= nil and s:current() or "none")
:compile llvm
print("kernels", #p:kernels())
got = p:run({tokens = lathe.npy.load("$M/npy/in_tokens.npy")})
print("matches run", lathe.allclose(got.logits, lathe.npy.load("$T/run-$flash/logits.npy"), 1e-5, 1e-5))
IN
  "$LATHE" repl "$M/model.onnx" --exit-status < "$T/in" > "$T/repl-$flash.out" 2>&1 || fail "lathe repl ($flash)"
  out="$T/repl-$flash.out"
  grep -q "^kernels	$kernels\$" "$out" || fail "the REPL compiled another kernel count than lathe kernels' $kernels ($flash)"
  grep -q "^matches run	true\$" "$out" || fail "the REPL's outputs differ from lathe run's ($flash)"
  if [ $flash = causal ]; then
    grep -q "^flash-attention: 2 attentions fused" "$out" || fail ":load did not say it fused the attention"
    grep -q "^session	1\$" "$out" || fail "no session s at step 1 after :load"
    fused=$kernels
  else
    grep -q "^session	none\$" "$out" || fail "LATHE_FLASH_ATTENTION=0 still started a session"
    grep -q "flash-attention" "$out" && fail "LATHE_FLASH_ATTENTION=0 still fused"
    [ "$kernels" -gt "$fused" ] || fail "unfused $kernels kernels, not more than fused $fused"
  fi
done
# :seek 0 undoes the fusion: the model as in the file, compiled as LATHE_FLASH_ATTENTION=0 does
unset LATHE_FLASH_ATTENTION
printf ':seek 0\n:compile llvm\nprint("kernels", #p:kernels())\n' > "$T/seek.in"
"$LATHE" repl "$M/model.onnx" --exit-status < "$T/seek.in" > "$T/seek.out" 2>&1 || fail "lathe repl (:seek 0)"
grep -q "^kernels	$kernels\$" "$T/seek.out" || fail ":seek 0 did not give the unfused model's $kernels kernels"
echo "ok: fused $fused kernels, unfused $kernels; REPL outputs match lathe run"
