#!/bin/sh
# help_topics.sh LATHE — every name `lathe help lua` lists (k:split, s:step, p:profile,
# gui.compile …), the listing's topics and the guides open their help everywhere: the CLI
# (`lathe help NAME`) and the REPL (`:help NAME`), outside the app too.
set -u
LATHE=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$LATHE" help lua > "$T/lua.txt" || fail "lathe help lua"
# the listing: "  SIGNATURE" lines, then "      doc" lines; a name is the signature up to '('
sed -n 's/^  \([^ ].*\)$/\1/p' "$T/lua.txt" | sed 's/[({ ].*//' | sort -u > "$T/names.txt"
n=$(wc -l < "$T/names.txt")
[ "$n" -gt 100 ] || fail "only $n names listed"
for must in k:split s:step p:profile gui.compile gui.load_rules lathe.randn x:softmax patterns; do
  [ "$must" = patterns ] || grep -qx "$must" "$T/names.txt" || fail "'$must' is not listed by lathe help lua"
  "$LATHE" help "$must" > /dev/null 2>&1 || fail "lathe help $must"
done
# every listed name, from the CLI
while read -r name; do
  "$LATHE" help "$name" > /dev/null 2>"$T/err" || fail "lathe help '$name': $(cat "$T/err")"
done < "$T/names.txt"
# and from the REPL, in one process
sed 's/^/:help /' "$T/names.txt" > "$T/repl.in"
echo ":help patterns" >> "$T/repl.in"
"$LATHE" repl < "$T/repl.in" > "$T/repl.out" 2>&1
if grep -q "no help for" "$T/repl.out"; then grep "no help for" "$T/repl.out" | head; fail "the REPL lacks topics"; fi
grep -q "Commutative ops" "$T/repl.out" || fail ":help patterns"
echo "help topics OK ($n names)"
