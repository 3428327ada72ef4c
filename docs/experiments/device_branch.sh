#!/usr/bin/env bash
# device_branch.sh - on the device: an experiment branch prepared by
# prepare_branch.sh, against this checkout's build, on sparse_attn:
#   1. the branch's test_sparse_attn_gpu (every variant on the edge shapes);
#   2. the branch's `tune --match MATCH` and this build's `tune --match
#      MAIN_MATCH` (default MATCH) on the anchors rows (fresh databases;
#      each variant verified, then timed), and their measurements (`show
#      run`);
#   3. a kernel timeline of the branch's TRACE_MATCH variant on the row
#      prepare_branch.sh kept (trace_sparse_attn.sh); TRACE_MATCH "-": none.
#   [MAIN_MATCH=TEXT] [SUITE=S] docs/experiments/device_branch.sh NAME MATCH TRACE_MATCH
# SUITE (default anchors) is the tunes' suite, e.g. m3-prefill for fp8 rows;
# ST_TEST_MATCH limits step 1 to the variants whose names contain it.
# The "main" side renders this checkout's templates (the device copies the
# working tree): check main out before the call, or both sides are the branch.
# e.g. MAIN_MATCH=t8.s1.wg2.pbf16.c2/q device_branch.sh x2 .x2/q .x2/q3072.ov
# Writes $OUT/NAME/. Roughly 4-6 minutes; keep to one branch a call.
set -u
name=$1 match=$2 trace=$3 main_match=${MAIN_MATCH:-$2} suite=${SUITE:-anchors}
alt=$PWD/build/alt/$name out=${OUT:-out}/$name
mkdir -p "$out"
LD_LIBRARY_PATH=$PWD/build/lib SPARSETUNE_HOME=$alt/home timeout 300 "$alt/test_sparse_attn_gpu" > "$out/test.log" 2>&1
echo "test rc=$?: $(grep -h 'verified' "$out/test.log")"
for side in branch main; do
  db=$(mktemp -u /tmp/branch_XXXX.db)
  if [ $side = branch ]; then
    SPARSETUNE_HOME=$alt/home timeout 240 "$alt/sparsetune" tune --suite "$suite" --op sparse_attn --match "$match" \
      --db "$db" > "$out/tune_$side.log" 2>&1
  else
    timeout 240 build/tuner/sparsetune tune --suite "$suite" --op sparse_attn --match "$main_match" --db "$db" \
      > "$out/tune_$side.log" 2>&1
  fi
  echo "tune $side rc=$?"
  build/tuner/sparsetune show run 1 --db "$db" > "$out/run_$side.txt" 2>&1
  grep -E "sparse_attn" "$out/run_$side.txt" | head -40
  rm -f "$db"*
done
[ "$trace" = - ] && exit 0
ST_BIN=$alt/sparsetune OUT=$out/trace timeout 200 bash docs/experiments/trace_sparse_attn.sh "$trace" "$alt/home1" \
  > "$out/trace_summary.txt" 2>&1
echo "trace of $trace rc=$?"
tail -14 "$out/trace_summary.txt"
gzip -f "$out"/trace/trace.csv* 2>/dev/null; rm -f "$out/trace/kt.so"
