#!/bin/sh
# runaway_rewrite.sh LATHE SRCDIR — rewrites that never end stop early with one message:
# `lathe rewrite` on a 2-cycle (Mul(x, y) -> Mul(y, x)) stops when step 2 brings back step
# 0's graph (it printed 100,000 step lines first), on a growing rule (Exp2(x) -> x:exp())
# once the graph has grown past the limit (it ran for minutes), exit 1 both; the REPL's
# :run names the growing rule once (it printed it 64 times).
set -u
LATHE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$2" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
G="$SRC/samples/01-mlp.lathe"
cat > "$T/cyc.lua" <<'LUA'
return lathe.ruleset("cyc", { lathe.rule("swap", "Mul(x, y)", "Mul(y, x)") })
LUA
cat > "$T/grow.lua" <<'LUA'
return lathe.ruleset("grow", { lathe.rule("unexp", "Exp2(x)", function(m) return m.x:exp() end) })
LUA
fail=0
out=$(timeout 60 "$LATHE" rewrite "$G" --rules "$T/cyc.lua" 2>&1); rc=$?
lines=$(printf '%s\n' "$out" | grep -c '^#')
if [ $rc -ne 1 ] || [ "$lines" -gt 2 ] || ! printf '%s\n' "$out" | grep -q "rewrite cycle: step 2 (rule 'swap' on %[0-9]*) brings back the graph of step 0"; then
  echo "FAIL: cycle: exit $rc, $lines step lines:"; printf '%s\n' "$out" | tail -n 5; fail=1
else echo "ok: cycle stopped after $lines steps"; fi

out=$(timeout 60 "$LATHE" rewrite "$G" --rules "$T/grow.lua" 2>&1); rc=$?
lines=$(printf '%s\n' "$out" | grep -c '^#')
if [ $rc -ne 1 ] || [ "$lines" -gt 3000 ] || ! printf '%s\n' "$out" | grep -q "runaway rewrite: the graph grew from 32 to [0-9]* nodes in [0-9]* steps.*'unexp'"; then
  echo "FAIL: growth: exit $rc, $lines step lines:"; printf '%s\n' "$out" | tail -n 3; fail=1
else echo "ok: growth stopped after $lines steps"; fi

# with --steps N the user asked for N steps: no cycle stop
out=$("$LATHE" rewrite "$G" --rules "$T/cyc.lua" --steps 5 --no-final-check 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^#')" -eq 5 ] || { echo "FAIL: --steps 5: exit $rc"; printf '%s\n' "$out"; fail=1; }

out=$(printf ':rules grow.lua\n:run\n' | (cd "$T" && timeout 60 "$LATHE" repl "$G") 2>&1)
line=$(printf '%s\n' "$out" | grep 'runaway rewrite at step 1')
if [ -z "$line" ] || [ "$(printf '%s\n' "$line" | grep -o "'unexp'" | wc -l)" -ne 1 ]; then
  echo "FAIL: :run should name the rule once:"; printf '%s\n' "$out" | tail -n 2; fail=1
else echo "ok: $line"; fi
exit $fail
