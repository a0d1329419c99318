#!/bin/sh
# readme_example.sh LATHE SRCDIR — runs the README's hand-schedule example (the first
# ```lua block under "### Compiled programs and hand schedules from Lua") exactly as
# written, from the source root, and checks that the schedule it asks for was applied.
set -u
LATHE=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
awk '/^### Compiled programs and hand schedules from Lua/ { sec = 1; next }
     sec && /^### / { exit }
     sec && !inb && /^```lua$/ { inb = 1; next }
     inb && /^```$/ { exit }
     inb { print }' "$SRC/README.md" > "$T/example.lua"
[ -s "$T/example.lua" ] || { echo "FAIL: no lua block found in the README section"; exit 1; }
cat "$T/example.lua"
cd "$SRC" || exit 1
out=$("$LATHE" script "$T/example.lua" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "FAIL: the README example exits $rc"; exit 1; }
printf '%s\n' "$out" | grep -q '# schedule: split i1 by 16 -> i1_o, i1_i' || { echo "FAIL: the split is not in p:loop(1)"; exit 1; }
printf '%s\n' "$out" | grep -q 'parallel for i0' || { echo "FAIL: i0 is not parallel"; exit 1; }
echo "README example OK"
