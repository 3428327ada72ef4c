#!/usr/bin/env bash
# Runs the GPU steps on a machine with a GPU, from the build folder BUILD
# (default build; it may have been made on another machine from the same
# checkout path): GPU tests and, on request, the tuner and the benchmark.
# Logs go under $OUT (or ./out).
#   .ci/device.sh test            ctest -L gpu
#   .ci/device.sh tune [SUITE]    sparsetune tune into $OUT/sparsetune.db
#   .ci/device.sh bench           sparsetune bench --suite anchors on that db
#   .ci/device.sh builtin         sparsetune bench --builtin --suite anchors:
#                                 no database, each op's built-in variants
#                                 compiled at first use (an empty disk
#                                 cache under $OUT)
#   .ci/device.sh bench-cold      the same with the paged caches cold in L2
#                                 (--cold, tuner/cold.h)
#   .ci/device.sh decode          the anchors' decode rows only: tune both
#                                 decode ops into $OUT/decode.db (~2 min
#                                 on an H200), then bench them, with the
#                                 decode steps as one graph, plain and pdl
#   .ci/device.sh sanitize        compute-sanitizer over the GPU tests
#   .ci/device.sh repeat [N]      the two decode GPU tests N times (default 2),
#                                 each with a fresh seed: a failure that
#                                 comes and goes shows here (186 wrong pairs
#                                 that one seed's inputs alone produced were
#                                 fixed by v2.30, 2026-11-26;
#                                 docs/kernels/sparse_attn_decode.md)
# Several steps may be given in order: `.ci/device.sh test tune bench`.
set -u -o pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${OUT:-out}
mkdir -p "$out"
db="$out/sparsetune.db"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
status=0
while [ $# -gt 0 ]; do
  step=$1
  shift
  case $step in
  test)
    ctest --test-dir "$build" -L gpu --output-on-failure 2>&1 | tee "$out/ctest_gpu.log" || status=1
    ;;
  tune)
    suite=m3-decode
    if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && [ "$1" != test ] && [ "$1" != bench ] && [ "$1" != bench-cold ] && [ "$1" != builtin ] &&
      [ "$1" != decode ] &&
      [ "$1" != sanitize ] &&
      [ "$1" != repeat ]; then
      suite=$1
      shift
    fi
    /usr/bin/time -v "$build/tuner/sparsetune" tune --suite "$suite" --db "$db" 2>&1 | tee "$out/tune_$suite.log" || status=1
    ;;
  bench)
    "$build/tuner/sparsetune" bench --suite anchors --db "$db" 2>&1 | tee "$out/bench.log" || status=1
    ;;
  decode)
    ops=index_decode,sparse_attn_decode
    "$build/tuner/sparsetune" tune --suite anchors --op $ops --db "$out/decode.db" >"$out/tune_decode.log" 2>&1 ||
      status=1
    tail -1 "$out/tune_decode.log"
    "$build/tuner/sparsetune" bench --suite anchors --op $ops --db "$out/decode.db" 2>&1 |
      tee "$out/bench_decode.log" || status=1
    ;;
  builtin)
    SPARSETUNE_CACHE_DIR="$out/builtin-cache" "$build/tuner/sparsetune" bench --builtin --suite anchors 2>&1 |
      tee "$out/bench_builtin.log" || status=1
    ;;
  bench-cold)
    "$build/tuner/sparsetune" bench --suite anchors --cold --db "$db" 2>&1 | tee "$out/bench_cold.log" || status=1
    ;;
  sanitize)
    # memcheck and racecheck over the runtime end-to-end tests, memcheck
    # over every 12th variant of each op's edge-case matrix (every kernel
    # shape is covered).
    for t in test_runtime_gpu_e2e test_runtime_gpu_sparse_attn_decode; do
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tests/$t" >"$out/sanitize_${tool}_$t.log" 2>&1 || status=1
        tail -3 "$out/sanitize_${tool}_$t.log"
      done
    done
    for t in test_index_decode_gpu test_sparse_attn_decode_gpu test_sparse_attn_gpu test_index_topk_gpu \
      test_index_score_gpu test_index_prefill_gpu; do
      ST_TEST_STRIDE=12 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/$t" \
        >"$out/sanitize_memcheck_$t.log" 2>&1 || status=1
      grep -E "verified|ERROR SUMMARY|WRONG" "$out/sanitize_memcheck_$t.log" | head
    done
    ;;
  repeat)
    n=2
    if [ $# -gt 0 ] && [ "$1" -eq "$1" ] 2>/dev/null; then
      n=$1
      shift
    fi
    for i in $(seq 1 "$n"); do
      for t in test_index_decode_gpu test_sparse_attn_decode_gpu; do
        "$build/tests/$t" >"$out/repeat_${i}_$t.log" 2>&1 || status=1
        echo "run $i $t: $(grep -h "verified" "$out/repeat_${i}_$t.log")"
      done
    done
    ;;
  *)
    echo "unknown step $step" >&2
    exit 2
    ;;
  esac
done
exit $status
