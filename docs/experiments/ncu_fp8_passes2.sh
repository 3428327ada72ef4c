#!/usr/bin/env bash
# v2.31 (nineteenth session): Nsight Compute of the two-pass blocks kernel
# (st_sparse_attn_main), fp8 against bf16, at 4096:0 in chunks of 3072 +
# 1024: the 4th launch of each tune is chunk 1 of its shape's second run.
# fp8 from m3-prefill (its first fp8 shape is 4096:0, scalar scales), bf16
# from the anchors suite (its first sparse_attn row). Writes $OUT/ncu_*.txt
# and prints their key lines.
set -u
out=${OUT:-out}
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$ncu" ] || { echo "no ncu on the PATH or in /usr/local/cuda/bin" >&2; exit 1; }
for pair in "m3-prefill fp8.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov.b8" \
  "anchors bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov.b8"; do
  set -- $pair
  file=$out/ncu_${2%%.*}.txt
  timeout 200 "$ncu" --target-processes all -k regex:st_sparse_attn_main --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section InstructionStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    build/tuner/sparsetune tune --suite "$1" --op sparse_attn --match "$2" --db "$(mktemp -u /tmp/ncu_XXXX.db)" \
    >"$file" 2>&1
  echo "== $2 rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc A|Executed Instructions  |stalled_(barrier|long|short|mio|wait|math|lg|no_inst|dispatch|sleeping|membar|branch)" \
    "$file" | head -40
done
