#!/bin/sh
# session_roundtrip.sh LATHE SRCDIR — `:save FILE.lathe-session` in one process, then
# `lathe repl FILE.lathe-session` in a fresh one (with the rule file gone: the session
# carries its text) must show the same :history, :graph, :text, step and kernels. Also:
# a failed save leaves the previous file intact; :open of a bad file changes nothing.
set -u
LATHE=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp "$SRC/graph.lua" "$SRC/rules.lua" "$T/"
cd "$T" || exit 1
fail() { echo "FAIL: $*"; for f in a.out b.out c.out; do [ -f $f ] && { echo "--- $f"; cat $f; }; done; exit 1; }

cat > a.in <<'IN'
:rules rules.lua
:step 2
:run
:seek 2
:break recip2
:compile c
:profile 2
:save work.lathe-session
:history
:graph
:text
s:current()
:kernels
IN
"$LATHE" repl graph.lua < a.in > a.out 2>&1 || fail "first session"
grep -q '^wrote work.lathe-session (graph, rules .*rules.lua, step 2 of 3)$' a.out || fail "save line"
sed -n '/^wrote work.lathe-session/,$p' a.out | tail -n +2 > a.tail

rm rules.lua
printf ':history\n:graph\n:text\ns:current()\n:kernels\n' | "$LATHE" repl work.lathe-session > b.out 2>&1 || fail "reopen"
grep -q '^opened work.lathe-session: graph with 12 nodes$' b.out || fail "open summary"
grep -q '^ruleset mine (.*rules.lua): replayed 3 steps, at step 2 of 3$' b.out || fail "replay summary"
grep -q '^compiled with .* as p: [0-9]* kernels*$' b.out || fail "recompile"
grep -q '^saved profile (2 iterations)' b.out || fail "profile kept"
grep -q '^note:' b.out && fail "unexpected note"
sed -n '/^compiled with/,$p' b.out | tail -n +2 > b.tail
cmp -s a.tail b.tail || { diff a.tail b.tail; fail "history/graph/text differ after reopening"; }

# The breakpoint came back: :run stops before recip2 would fire (it does not fire again
# here, so the run reaches the fixpoint) and :profile last shows the saved table.
printf ':open work.lathe-session\n:profile last\n' | "$LATHE" repl > c.out 2>&1 || fail ":open"
grep -q '^Kernel  *Kind' c.out || fail ":profile last"

# A save that cannot complete leaves the old file as it was.
cp work.lathe-session before
chmod a-w .
printf ':open work.lathe-session\n:save work.lathe-session\n' | "$LATHE" repl > c.out 2>&1
chmod u+w .
grep -q '^cannot write work.lathe-session' c.out || [ "$(id -u)" = 0 ] || fail "save into a read-only dir should fail"
cmp -s before work.lathe-session || fail "the previous session file changed"

# Bad files: one located message, state unchanged.
echo '{"format": "something-else"}' > bad.lathe-session
echo 'not json' > worse.lathe-session
printf ':open bad.lathe-session\n:open worse.lathe-session\n:graph\n' | "$LATHE" repl graph.lua > c.out 2>&1 || fail "bad files"
grep -q "^bad.lathe-session: not a session file" c.out || fail "bad format message"
grep -q "^worse.lathe-session: not a session file (bad JSON" c.out || fail "bad JSON message"
grep -q "^graph: 12 nodes" c.out || fail "state kept after a failed :open"
# A file that names a step past its last one (hand-edited, or damaged) opens at the last
# step and says so, never silently.
sed 's/"step": 2,/"step": 7,/' work.lathe-session > far.lathe-session
grep -q '"step": 7,' far.lathe-session || fail "could not make far.lathe-session"
printf 's:current()\n' | "$LATHE" repl far.lathe-session > c.out 2>&1 || fail "far session"
grep -q '^note: the file asks for step 7 but records 3 steps; opened at step 3$' c.out || fail "step 7 of 3 must be noted"
echo "session round trip OK"
