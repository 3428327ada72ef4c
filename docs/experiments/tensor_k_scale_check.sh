#!/usr/bin/env bash
# Device check of the tensor-mode K scale change (eighteenth session): the
# two seeds that failed before it, replayed, then sparse_attn's fp8 variants
# tuned on m3-prefill by the new build and by the old one (build/old:
# sparsetune and its templates from the commit before), each run's
# measurements dumped as CSV (variant, shape, status, median, spread).
set -u
out=${OUT:-out}
mkdir -p "$out"
ST_TEST_SEED=5048382270700 build/tests/test_sparse_attn_decode_gpu >"$out/replay_decode.log" 2>&1
echo "replay decode rc=$?"; grep -E "verified|WRONG" "$out/replay_decode.log" | head -3
ST_TEST_SEED=7539463302431 build/tests/test_sparse_attn_gpu >"$out/replay_prefill.log" 2>&1
echo "replay prefill rc=$?"; grep -E "verified|WRONG" "$out/replay_prefill.log" | head -3
limit=${LIMIT:-170}
for which in new old; do
  bin=build/tuner/sparsetune home=
  [ $which = old ] && bin=build/old/sparsetune home=build/old/home
  SPARSETUNE_HOME=$home timeout -s INT "$limit" "$bin" tune --suite m3-prefill --op sparse_attn --match fp8 \
    --db "$out/$which.db" >"$out/tune_$which.log" 2>&1
  echo "tune $which rc=$?"; tail -4 "$out/tune_$which.log"
  python3 - "$out/$which.db" >"$out/$which.csv" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for row in c.execute("select v.name, m.shape_key, m.status, m.median_us, m.spread from measurements m "
                     "join variants v on v.id = m.variant_id order by 2, 1"):
    print(",".join(str(x) for x in row))
PY
  rm -f "$out/$which.db" "$out/$which.db-wal" "$out/$which.db-shm"
done
