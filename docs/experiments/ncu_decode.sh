#!/usr/bin/env bash
# ncu_decode.sh - on the device: Nsight Compute of one sparse_attn_decode
# variant on one anchors row, warm (no cache flush between passes, clocks
# not locked), as the bench's replays run it: `tune --match MATCH` under
# ncu with the anchors suite cut to that row (decode_row_home.sh),
# profiling the LAUNCH-th launch of the kernel (default 40: past the
# verification and into the timing's warm-up replays).
#   docs/experiments/ncu_decode.sh DTYPE B MATCH [TOPK]
# e.g. ncu_decode.sh fp8 32 fp8.d128.g16.w2.s1.kvr.single.c8/s4
# Writes $OUT/ncu_decode_DTYPE_B.txt and prints its key lines.
set -u
dtype=$1 b=$2 match=$3 topk=${4:-}
out=${OUT:-out}
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$ncu" ] || { echo "no ncu on the PATH or in /usr/local/cuda/bin" >&2; exit 1; }
home=$(bash docs/experiments/decode_row_home.sh "$dtype" "$b" $topk) || exit 2
file=$out/ncu_decode_${dtype}_$b${topk:+_k$topk}.txt
SPARSETUNE_HOME=$home timeout 200 "$ncu" --target-processes all --clock-control none --cache-control none \
  -k regex:st_sparse_attn_decode_main --launch-skip "${LAUNCH:-40}" --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats --section InstructionStats --section SourceCounters \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,lts__t_sector_hit_rate.pct,dram__bytes_read.sum" \
  build/tuner/sparsetune tune --suite anchors --op sparse_attn_decode --match "$match" \
  --db "$(mktemp -u /tmp/ncu_XXXX.db)" >"$file" 2>&1
echo "rc=$?"
rm -rf "$home"
grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|lts__t_sector_hit|dram__bytes|Registers Per|Achieved Occupancy|Theoretical Occ|Warp Cycles Per Issued|Executed Ipc A|Executed Instructions  |Grid Size|Block Size|Eligible Warps|No Eligible" "$file" | head -30
grep -E "stalled_.*ratio" "$file" | sort -k3 -g -r | head -8
