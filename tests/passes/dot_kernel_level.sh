#!/bin/sh
# dot_kernel_level.sh LATHE SRCDIR — `lathe dot --level kernel` draws the kernels `lathe
# kernels` lists: the same kernels with the same node counts, one edge per buffer a kernel
# reads (none from shared constants, none twice, none that no buffer carries). It used to
# group nodes by their first kernel, drawing k0 -> k7 twice and k7 -> k9 on the GPT-2 block.
set -u
LATHE=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
for f in 01-mlp 02-convnet 05-attention 06-gpt2-block; do
  g="$SRC/samples/$f.lathe"
  "$LATHE" dot "$g" --level kernel > "$T/k.dot" || { echo "FAIL: lathe dot $f"; fail=1; continue; }
  "$LATHE" kernels "$g" --show none > "$T/k.txt" || { echo "FAIL: lathe kernels $f"; fail=1; continue; }
  # no edge twice
  dups=$(grep -- ' -> ' "$T/k.dot" | sed 's/ \[.*//' | sort | uniq -d)
  [ -z "$dups" ] || { echo "FAIL: $f: edges drawn twice: $dups"; fail=1; }
  # per kernel: name, kind and node count as `lathe kernels` says; in-edges = buffers read
  i=0
  grep '^## ' "$T/k.txt" > "$T/heads"
  grep '^   writes' "$T/k.txt" > "$T/reads"
  n=$(wc -l < "$T/heads")
  [ "$n" -gt 0 ] || { echo "FAIL: $f: no kernels listed"; fail=1; }
  while [ $i -lt "$n" ]; do
    line=$((i + 1))
    head=$(sed -n "${line}p" "$T/heads")
    name=$(printf '%s\n' "$head" | sed 's/^## \([^ ]*\).*/\1/')
    kind=$(printf '%s\n' "$head" | sed 's/^## [^ ]*  (\([a-z]*\), \([0-9]*\) nodes*.*/\1 · \2 node/')
    grep -q "^  k$i \[label=\"$name\\\\n$kind" "$T/k.dot" || {
      echo "FAIL: $f: kernel $i is not drawn as '$name / $kind…'"; grep "^  k$i " "$T/k.dot"; fail=1; }
    reads=$(sed -n "${line}p" "$T/reads" | sed 's/.*; reads //' | grep -o ':[a-z0-9]*\[' | wc -l)
    drawn=$(grep -c -- " -> k$i \[" "$T/k.dot")
    [ "$reads" -eq "$drawn" ] || { echo "FAIL: $f: kernel $i ($name) reads $reads buffers, drawn with $drawn in-edges"; fail=1; }
    i=$((i + 1))
  done
  echo "$f: $n kernels, $(grep -c -- ' -> ' "$T/k.dot") edges checked"
done
exit $fail
