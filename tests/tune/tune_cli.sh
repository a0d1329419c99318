#!/bin/sh
# tune_cli.sh LATHE SRC WORKDIR — `lathe tune` from the command line (see CMakeLists.txt).
set -u
L=$1; SRC=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
expect_rc() {  # expect_rc CODE NEEDLE CMD… : exit code CODE and NEEDLE in its output
  want=$1; needle=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $out"
  [ -z "$needle" ] || echo "$out" | grep -qF -- "$needle" || fail "'$*' did not say '$needle': $out"
}
G=$SRC/samples/03-softmax.lathe
expect_rc 0 "--time-budget" "$L" tune --help
expect_rc 0 "lathe tune" "$L" help tune
expect_rc 2 "give FILE" "$L" tune
expect_rc 2 "measure" "$L" tune "$G" --measure guess
expect_rc 2 "trials" "$L" tune "$G" --trials 0
expect_rc 1 "no kernel 'k99'" "$L" tune "$G" --measure model --kernels k99 --records "$W/r.jsonl"
expect_rc 1 "interp" "$L" tune "$G" --backend interp --records "$W/r.jsonl"
expect_rc 1 "" "$L" tune "$W/missing.lathe" --measure model
# a model-only run: deterministic records, applied by kernels/run
expect_rc 0 "1 kernel tuned" "$L" tune "$G" --measure model --trials 4 --records "$W/a.jsonl"
expect_rc 0 "1 kernel tuned" "$L" tune "$G" --measure model --trials 4 --records "$W/b.jsonl"
cmp -s "$W/a.jsonl" "$W/b.jsonl" || fail "--measure model is not deterministic: $(cat "$W/a.jsonl" "$W/b.jsonl")"
grep -q '"hash":"[0-9a-f]\{32\}".*"target":.*"schedule":\[.*"ms":.*"baseline_ms":.*"trials":' "$W/a.jsonl" || fail "record fields: $(cat "$W/a.jsonl")"
expect_rc 0 "" "$L" run "$G" --tuned "$W/a.jsonl"
# another target's record is ignored with a note
sed 's/"target":"[a-z]*/"target":"elsewhere/' "$W/a.jsonl" > "$W/other.jsonl"
expect_rc 0 "ignored: it was measured on 'elsewhere" "$L" kernels "$G" --tuned "$W/other.jsonl" --show none
# the same file edited (another shape): its record is noted as made before the change
cp "$G" "$W/s.lathe"
expect_rc 0 "1 kernel tuned" "$L" tune "$W/s.lathe" --measure model --trials 2 --records "$W/s.jsonl"
sed 's/64, 1000/64, 999/g; s/64, 1\]/64, 1]/' "$W/s.lathe" > "$W/s2.lathe" && mv "$W/s2.lathe" "$W/s.lathe"
expect_rc 0 "has changed since it was tuned" "$L" kernels "$W/s.lathe" --tuned "$W/s.jsonl" --show none
# a broken records file names the line
printf '{"hash":1}\n' > "$W/bad.jsonl"
expect_rc 1 "bad.jsonl:1:" "$L" run "$G" --tuned "$W/bad.jsonl"
# the default records file (the cache dir's) is written and applied
expect_rc 0 "tuned.jsonl" "$L" tune "$G" --measure model --trials 2
[ -s "$LATHE_CACHE_DIR/tuned.jsonl" ] || fail "no default records file in $LATHE_CACHE_DIR"
echo ok
