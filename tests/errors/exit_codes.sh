#!/bin/sh
# exit_codes.sh LATHE — failures exit non-zero with a message: a mistyped command (2), a
# FILE that does not load as `lathe FILE` or `lathe repl FILE` (1). They all exited 0.
# (`lathe gui --screenshot` with a bad FILE: tests/gui, gui_malformed_file.)
set -u
LATHE=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf 'graph {\n  bogus\n' > "$T/bad.lathe"
fail=0
check() {  # check WANT_RC REGEX ARGS…  (stdin empty, no display)
  want=$1; re=$2; shift 2
  out=$(env -u DISPLAY "$LATHE" "$@" </dev/null 2>&1)
  rc=$?
  if [ $rc -ne "$want" ] || ! printf '%s\n' "$out" | grep -Eq -- "$re"; then
    echo "FAIL: lathe $*: exit $rc (want $want), output:"; printf '%s\n' "$out"; fail=1
  else
    echo "ok: lathe $* -> $rc: $(printf '%s\n' "$out" | head -n 1)"
  fi
}
check 2 "'frobnicate' is neither a command nor a file" frobnicate
check 1 'bad\.lathe:2:' "$T/bad.lathe"
check 1 'cannot open /nonexistent\.lathe' /nonexistent.lathe
check 1 'cannot open /nonexistent\.lathe' repl /nonexistent.lathe
check 1 'bad\.lathe:2:' repl "$T/bad.lathe"
check 1 'cannot open' repl "$T/missing.lathe-session"
exit $fail
