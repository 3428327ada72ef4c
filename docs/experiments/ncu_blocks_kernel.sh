#!/usr/bin/env bash
# ncu_blocks_kernel.sh - on the device: Nsight Compute sections and stall
# reasons of one blocks kernel (st_sparse_attn_main) launch of each MATCH,
# from an experiment branch prepared by prepare_branch.sh (its home1 keeps
# one anchors row, 4096:0 by default; the 4th launch is chunk 1 of a
# two-chunk launch). Written in the sixteenth session to find why `.x2`'s
# blocks kernel is 26% slower than the two-CTA kernel; run in the
# seventeenth (docs/kernels/sparse_attn.md: 11.7% alone, ~17% more
# instructions).
#   docs/experiments/ncu_blocks_kernel.sh NAME MATCH...
# e.g. ncu_blocks_kernel.sh x2 .x2/q3072.ov t8.s1.wg2.pbf16.c2/q3072.ov
# Writes $OUT/ncu_*.txt (with the instruction counts and the source
# counters' most-stalled SASS lines) and prints their key lines.
set -u
name=$1
shift
alt=$PWD/build/alt/$name out=${OUT:-out}
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$ncu" ] || { echo "no ncu on the PATH or in /usr/local/cuda/bin" >&2; exit 1; }
for m in "$@"; do
  file=$out/ncu_$(echo "$m" | tr -c 'a-zA-Z0-9\n' '_').txt
  SPARSETUNE_HOME=$alt/home1 timeout 150 "$ncu" --target-processes all -k regex:st_sparse_attn_main \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$alt/sparsetune" tune --suite anchors --op sparse_attn --match "$m" --db "$(mktemp -u /tmp/ncu_XXXX.db)" \
    > "$file" 2>&1
  echo "$m rc=$?"
  grep -E "Duration|Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc|Executed Instructions|stalled" \
    "$file" | head -60
done
