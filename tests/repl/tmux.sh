#!/bin/sh
# tmux.sh LATHE SRCDIR — drives `lathe repl` in a real terminal (a private tmux server,
# 120x40) and checks what a user sees: tab completion of `lathe.` and of a session's
# methods, history recall with the Up arrow, a multi-line function definition, and Ctrl-C
# at the idle prompt (drops the line), during a long Lua loop and during a long C++ loop
# (:profile) returning to the prompt with the state intact, and during :tune (keeps what was found). Exit 77 (skipped) without tmux. Generous timeouts: the machines
# that run this are often loaded.
set -u
LATHE=$1
SRC=$2
command -v tmux >/dev/null 2>&1 || { echo "tmux not found: skipped"; exit 77; }
T=$(mktemp -d)
SOCK="lathe-repl-test-$$"
tm() { tmux -L "$SOCK" "$@"; }
cleanup() { tm kill-server >/dev/null 2>&1; rm -rf "$T"; }
trap cleanup EXIT
cp "$SRC/graph.lua" "$SRC/rules.lua" "$T/"

screen() { tm capture-pane -p -t t; }
# wait_for REGEX [SECONDS]: polls the screen until a line matches (extended regex).
wait_for() {
  n=$(( ${2:-60} * 4 ))
  while [ $n -gt 0 ]; do
    screen | grep -Eq -- "$1" && return 0
    sleep 0.25
    n=$((n - 1))
  done
  echo "FAIL: timed out waiting for /$1/; the screen:"
  screen
  exit 1
}
# prompt_count: how many lines start with the prompt.
prompt_count() { screen | grep -c '^lathe>'; }
# wait_prompt N: until at least N prompts are on screen (the newest one idle).
wait_prompt() {
  n=$(( ${2:-60} * 4 ))
  while [ $n -gt 0 ]; do
    [ "$(prompt_count)" -ge "$1" ] && screen | tail -n 40 | grep -v '^$' | tail -n 1 | grep -Eq '^lathe> ?$' && return 0
    sleep 0.25
    n=$((n - 1))
  done
  echo "FAIL: timed out waiting for prompt #$1; the screen:"
  screen
  exit 1
}
typ() { tm send-keys -t t -l "$1"; }   # literal text (so "end" is not the End key)
key() { tm send-keys -t t "$@"; }
clear_screen() { tm send-keys -t t C-l; sleep 0.5; tm clear-history -t t; }

tm new-session -d -x 120 -y 40 -s t \
  "cd '$T' && XDG_STATE_HOME='$T/state' TERM=xterm '$LATHE' repl graph.lua; echo REPL-EXITED; sleep 600"
wait_prompt 1 120

# 1. completion of lathe.ran<Tab> -> lathe.randn
typ 'r = lathe.ran'; key Tab
wait_for '^lathe> r = lathe\.randn' 30
typ '({2, 3}, 1)'; key Enter
wait_prompt 2
typ 'r.shape'; key Enter
wait_for '^\{2, 3\}$' 30
wait_prompt 3

# 2. completion of a session's methods: s:his<Tab> -> s:history
typ ':rules rules.lua'; key Enter
wait_for '^ruleset mine: 4 rules' 60
wait_prompt 4
typ 's:his'; key Tab
wait_for '^lathe> s:history' 30
typ '()'; key Enter
wait_prompt 5

# 3. history recall: Up brings back the previous line
clear_screen
typ '40 + 2'; key Enter
wait_for '^42$' 30
wait_prompt 1
tm send-keys -t t Up
wait_for '^lathe> 40 \+ 2' 30
tm send-keys -t t Enter
wait_prompt 2
[ "$(screen | grep -c '^42$')" -ge 2 ] || { echo "FAIL: Up + Enter did not run 40 + 2 again"; screen; exit 1; }

# 4. a multi-line function: continuation prompts, then a call
clear_screen
typ 'function sq(v)'; key Enter
wait_for '^   \.\.\.' 30
typ '  return v * v'; key Enter
typ 'end'; key Enter
wait_prompt 1
typ 'sq(7)'; key Enter
wait_for '^49$' 30
wait_prompt 2

# 5. Ctrl-C during a long Lua loop: "interrupted", the prompt comes back, state intact
clear_screen
typ 'n = 0; while true do n = n + 1 end'; key Enter
sleep 3
tm send-keys -t t C-c
wait_for 'interrupted' 60
wait_prompt 2
typ 'tostring(n > 0) .. "/" .. s:current() .. "/" .. #g'; key Enter
wait_for '^true/0/12$' 30
wait_prompt 3

# 5b. Ctrl-C at the idle prompt drops the line being typed (and an unfinished chunk) and
# prompts again; the REPL and its state stay (it used to exit 130)
clear_screen
typ 'half typed line'
sleep 0.5
tm send-keys -t t C-c
wait_prompt 2
typ 'function h()'; key Enter
wait_for '^   \.\.\.' 30
tm send-keys -t t C-c
wait_prompt 3
tm send-keys -t t C-c
wait_prompt 4
screen | grep -q 'REPL-EXITED' && { echo "FAIL: Ctrl-C at the prompt ended the REPL"; screen; exit 1; }
typ 'tostring(n > 0) .. "/" .. s:current() .. "/" .. tostring(h)'; key Enter
wait_for '^true/0/nil$' 30
wait_prompt 5

# 6. Ctrl-C during a long C++ loop (:profile with many iterations; the c backend)
clear_screen
typ ':compile c'; key Enter
wait_for '^  1  ' 240
wait_prompt 1 60
typ ':profile 100000000'; key Enter
sleep 4
tm send-keys -t t C-c
wait_for '^interrupted: [0-9]+ iterations? measured' 120
wait_prompt 2
typ 'tostring(p ~= nil) .. "/" .. s:current()'; key Enter
wait_for '^true/0$' 30

# 6b. :tune shows a progress line; Ctrl-C keeps what was found (records written, p tuned)
clear_screen
typ ':tune 1000000 B=64 '"$T"'/t.jsonl'; key Enter
wait_for 'tuning \[1/1 k0_add\] trials [0-9]+/1000000' 240
tm send-keys -t t C-c
wait_for '^interrupted: 1 kernel tuned \(measured\), [01] applied to p; records in ' 240
wait_prompt 1 60
[ -s "$T/t.jsonl" ] || { echo "FAIL: :tune interrupted wrote no records"; screen; exit 1; }

# 7. Ctrl-D leaves; the history file was written
tm send-keys -t t C-d
wait_for 'REPL-EXITED' 30
grep -q 'sq(7)' "$T/state/lathe/history" || { echo "FAIL: history file not written"; exit 1; }
echo "tmux REPL test OK"
