#!/bin/sh
# rules_not_a_ruleset.sh LATHE SRCDIR — `lathe rewrite --rules R.lua` where R.lua returns
# something that is not a ruleset (a number, a string, a list of numbers) must exit 1 with
# a message naming the file and what it returned; it used to abort (exit 134) in Lua's panic.
set -u
LATHE=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() {  # check 'LUA SOURCE' 'REGEX'
  printf '%s\n' "$1" > "$T/R.lua"
  out=$("$LATHE" rewrite "$SRC/samples/01-mlp.lathe" --rules "$T/R.lua" 2>&1)
  rc=$?
  if [ $rc -ne 1 ] || ! printf '%s\n' "$out" | grep -Eq -- "$2"; then
    echo "FAIL: '$1': exit $rc, output:"; printf '%s\n' "$out"; fail=1
  else
    echo "ok: '$1' -> $(printf '%s\n' "$out" | head -n 1)"
  fi
}
check 'return 42' 'R\.lua: a rule file must return a ruleset.*got a number \(42\)'
check 'return "simplify"' 'R\.lua: .*got a string .*lathe\.rules\.builtin\("simplify"\)'
check 'return {1, 2}' 'R\.lua: .*rule list entry 1 is a number'
check 'return { lathe.rule("a", "Neg(Neg(x))", "x"), true }' 'R\.lua: .*rule list entry 2 is a boolean'
check 'return function() end' 'R\.lua: .*got a function'
exit $fail
