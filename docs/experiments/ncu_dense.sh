#!/usr/bin/env bash
# ncu_dense.sh - on the device: Nsight Compute of the dense kernel
# (st_sparse_attn_dense) at a 4096:0 row: its first launch (the
# verification of MATCH, default c2/q3072.ov.b8.dn, in SUITE, default
# anchors; `fp8.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov.b8.dn m3-prefill`
# takes the fp8 row), clocks not locked.
set -u
m=${1:-c2/q3072.ov.b8.dn}
suite=${2:-anchors}
out=${OUT:-out}
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$ncu" ] || { echo "no ncu on the PATH or in /usr/local/cuda/bin" >&2; exit 1; }
file=$out/ncu_dense_$suite.txt
timeout 200 "$ncu" --target-processes all --clock-control none -k regex:st_sparse_attn_dense --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy \
  --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum" \
  build/tuner/sparsetune tune --suite "$suite" --op sparse_attn --match "$m" --db "$(mktemp -u /tmp/ncu_XXXX.db)" \
  >"$file" 2>&1
echo "rc=$?"
grep -E "Duration|Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc|Executed Instructions|stalled|tensor|gmma|Pipe" "$file" | head -70
