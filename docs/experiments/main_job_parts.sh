#!/usr/bin/env bash
# main_job_parts.sh - on the device: the README's main job (`tune --suite
# m3-decode`, then `tune --suite m3-prefill`) timed in parts that each fit
# one device call (at most 10 minutes), each into a fresh database,
# compilation included. The parts add up to the job: together they tune
# every (variant, shape) pair of both suites once. Parts:
#   decode          tune --suite m3-decode
#   prefill-index   m3-prefill: index_topk, index_score, index_prefill
#   sa-bf16-t4      m3-prefill sparse_attn, variants .bf16.d128.g16.block.t4
#   sa-bf16-t8      the same, .bf16.d128.g16.block.t8
#   sa-bf16-rest    the same, .bf16.d128.g16.t (the non-block family)
#   sa-fp8          the same, .fp8.
# (The sparse_attn split is by variant name; docs/experiments/count_pairs.lua
# counts each part's pairs.) Prints one line a part: wall seconds, then
# the run's counts.
set -u
bin=${BIN:-build/tuner/sparsetune}
for part in "$@"; do
  db=$(mktemp -u /tmp/main_job_XXXX.db)
  case $part in
  decode) args=(--suite m3-decode) ;;
  prefill-index) args=(--suite m3-prefill --op index_topk,index_score,index_prefill) ;;
  sa-bf16-t4) args=(--suite m3-prefill --op sparse_attn --match .bf16.d128.g16.block.t4) ;;
  sa-bf16-t8) args=(--suite m3-prefill --op sparse_attn --match .bf16.d128.g16.block.t8) ;;
  sa-bf16-rest) args=(--suite m3-prefill --op sparse_attn --match .bf16.d128.g16.t) ;;
  sa-fp8) args=(--suite m3-prefill --op sparse_attn --match .fp8.) ;;
  *)
    echo "unknown part: $part" >&2
    exit 2
    ;;
  esac
  start=$(date +%s%N)
  "$bin" tune "${args[@]}" --db "$db" >"${OUT:-/tmp}/main_job_$part.log" 2>&1
  rc=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  printf '%s: %d.%d s (rc %d)\n' "$part" $((ms / 1000)) $((ms % 1000 / 100)) "$rc"
  "$bin" show runs --db "$db" | sed -n 2,3p
  rm -f "$db" "$db-wal" "$db-shm"
done
