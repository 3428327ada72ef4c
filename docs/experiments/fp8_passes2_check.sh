#!/usr/bin/env bash
# v2.31 (docs/kernels/sparse_attn.md, nineteenth session): the fp8
# two-pass kernels on the GPU. First the GPU test over the variants whose
# names hold TEST_MATCH (default wg2: every two-pass kernel, bf16 and fp8,
# over every edge shape); then, if it passed, each MATCH tuned alone on
# m3-prefill's sparse_attn shapes into a fresh database, its fp8 rows
# printed. Logs under $OUT.
set -u
out=${OUT:-out}
mkdir -p "$out"
ST_TEST_MATCH=${TEST_MATCH:-wg2} build/tests/test_sparse_attn_gpu >"$out/test_match.log" 2>&1
rc=$?
grep -iE "verified|wrong|passed|failed|skip" "$out/test_match.log" | tail -8
[ $rc -eq 0 ] || exit $rc
for match in "$@"; do
  db="$out/tune.db"
  rm -f "$db" "$db-wal" "$db-shm"
  log="$out/tune_$(echo "$match" | tr -c 'A-Za-z0-9.\n' _).log"
  build/tuner/sparsetune tune --suite m3-prefill --op sparse_attn --match "$match" --db "$db" >"$log" 2>&1
  echo "== $match"
  grep -E "^B=.*fp8" "$log"
done
rm -f "$out/tune.db" "$out/tune.db-wal" "$out/tune.db-shm"
