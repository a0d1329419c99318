#!/bin/sh
# tune_mpi.sh LATHE SRC WORKDIR MPIEXEC — `mpirun -n 3 lathe tune` on one machine (see
# CMakeLists.txt): the same records as one process, and a rank that dies or hangs after
# its first job is survived (its candidates go to the other rank) with the same records,
# and when rank 0 dies the others leave instead of waiting forever; with --measure time the
# ranks time the candidates (c backend) and rank 0 writes a timed record per kernel, also
# when a rank dies.
set -u
L=$1; SRC=$2; W=$3; MPIEXEC=$4
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
# as root in a container: Open MPI refuses root unless told, and 3 ranks may exceed the cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# containers often forbid the cross-process reads of the shared-memory transport (CMA)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
G=$SRC/samples/01-mlp.lathe
ARGS="--measure model --trials 4"
"$L" tune "$G" $ARGS --records "$W/one.jsonl" > "$W/one.out" 2>&1 || fail "one process: $(cat "$W/one.out")"
n=$(wc -l < "$W/one.jsonl")
[ "$n" -ge 2 ] || fail "expected records of 2+ kernels: $(cat "$W/one.jsonl")"
run3() {  # run3 NAME [mpirun options]: 3 ranks, records in $W/NAME.jsonl, output in $W/NAME.out
  name=$1; shift
  timeout 120 "$MPIEXEC" --oversubscribe "$@" -n 3 "$L" tune "$G" $ARGS --rank-timeout 0.1 --records "$W/$name.jsonl" \
    > "$W/$name.out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || fail "$name: mpirun exited $rc: $(cat "$W/$name.out")"
  cmp -s "$W/one.jsonl" "$W/$name.jsonl" || fail "$name: records differ from one process:
$(cat "$W/one.jsonl")
---
$(cat "$W/$name.jsonl")
--- output:
$(cat "$W/$name.out")"
}
# the plain run: both ranks measured candidates
run3 three
grep -q "rank 0 searches, 2 ranks measure" "$W/three.out" || fail "no pool line: $(cat "$W/three.out")"
grep -q "rank 1.*: [1-9][0-9]* candidate" "$W/three.out" || fail "rank 1 measured nothing: $(cat "$W/three.out")"
grep -q "rank 2.*: [1-9][0-9]* candidate" "$W/three.out" || fail "rank 2 measured nothing: $(cat "$W/three.out")"
# rank 2 dies on its second job: its candidates go elsewhere, the search finishes
LATHE_TUNE_TEST_RANK_FAIL=2:exit run3 died --enable-recovery
grep -q "rank 2.*did not answer" "$W/died.out" || fail "died: no note of rank 2: $(cat "$W/died.out")"
grep -q "rank 2.*lost" "$W/died.out" || fail "died: rank 2 not reported lost: $(cat "$W/died.out")"
# rank 2 hangs on its second job (and its watchdog ends it later)
LATHE_TUNE_TEST_RANK_FAIL=2:hang run3 hung --enable-recovery
grep -q "rank 2.*did not answer" "$W/hung.out" || fail "hung: no note of rank 2: $(cat "$W/hung.out")"
# rank 0 dies (with --enable-recovery the job goes on): the other ranks leave, nothing hangs
LATHE_TUNE_TEST_RANK_FAIL=0:exit timeout 100 "$MPIEXEC" --oversubscribe --enable-recovery -n 3 "$L" tune "$G" $ARGS \
  --rank-timeout 0.1 --records "$W/r0.jsonl" > "$W/r0.out" 2>&1
[ $? != 124 ] || fail "rank 0 died: the job hung: $(cat "$W/r0.out")"
[ "$(grep -c 'no word from rank 0' "$W/r0.out")" = 2 ] || fail "rank 0 died: ranks 1 and 2 did not leave: $(cat "$W/r0.out")"
# --measure time (the c backend: no LLVM needed): ranks 1 and 2 compile and time the
# candidates; rank 0 writes one timed record per kernel (the hashes the model run wrote),
# and a rank that dies mid-search leaves its candidates to the other
hashes() { sed 's/.*"hash":"\([0-9a-f]*\)".*/\1/' "$1" | sort; }
timed() {  # timed NAME [env/mpirun options]
  name=$1; shift
  timeout 200 "$MPIEXEC" --oversubscribe "$@" -n 3 "$L" tune "$G" --measure time --backend c --trials 6 \
    --rank-timeout 2 --records "$W/$name.jsonl" > "$W/$name.out" 2>&1
  rc=$?
  [ "$rc" = 0 ] || fail "$name: mpirun exited $rc: $(cat "$W/$name.out")"
  [ "$(hashes "$W/$name.jsonl")" = "$(hashes "$W/one.jsonl")" ] || fail "$name: not one record per kernel:
$(cat "$W/$name.jsonl")"
  [ "$(grep -c '"measure":"time"' "$W/$name.jsonl")" = "$n" ] || fail "$name: not timed records: $(cat "$W/$name.jsonl")"
  grep -q '"ms":0[,}]\|"baseline_ms":0[,}]\|"ms":-' "$W/$name.jsonl" && fail "$name: a record without times: $(cat "$W/$name.jsonl")"
  grep -q "rank 0 searches, 2 ranks measure" "$W/$name.out" || fail "$name: no pool line: $(cat "$W/$name.out")"
  "$L" kernels "$G" --backend c --tuned "$W/$name.jsonl" --show none > "$W/$name.apply" 2>&1 ||
    fail "$name: the records do not apply: $(cat "$W/$name.apply")"
}
timed time
grep -q "rank 1.*: [1-9][0-9]* candidate" "$W/time.out" || fail "time: rank 1 measured nothing: $(cat "$W/time.out")"
grep -q "rank 2.*: [1-9][0-9]* candidate" "$W/time.out" || fail "time: rank 2 measured nothing: $(cat "$W/time.out")"
LATHE_TUNE_TEST_RANK_FAIL=2:exit timed time-died --enable-recovery
grep -q "rank 2.*lost" "$W/time-died.out" || fail "time-died: rank 2 not reported lost: $(cat "$W/time-died.out")"
echo ok
