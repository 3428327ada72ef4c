#!/usr/bin/env bash
# dense_cut_probe.sh - on the device: where the fp8 dense kernel's time
# goes (v2.38, docs/kernels/sparse_attn.md). For each cut, a copy of
# generator/ and templates/ whose sparse_attn_dense.cuh leaves one stage
# out, then Nsight Compute's duration of the kernel's first launch at fp8
# 4096:0 (docs/experiments/ncu_dense.sh, with SPARSETUNE_HOME at the copy).
# A cut kernel computes garbage: the tune's check fails it after ncu has
# timed the launch, which is all this wants. Cuts:
#   full       the kernel as it is;
#   no_widen   the producer warps do not widen (the consumers read raw rows);
#   no_copy    the producer warp issues no K/V copy (the stage's barrier
#              gets a plain arrival; the consumers read stale rows);
#   no_math    the consumers skip scores, softmax and P V (barriers kept).
# Adjacent differences then price the widening, the copies' latency and
# the math; a cut that does not move the time is not the limit.
#   docs/experiments/dense_cut_probe.sh [CUT...]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-out}
mkdir -p "$out"
match=fp8.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov.b8.dn
cuts=${*:-full no_widen no_copy no_math}
for cut in $cuts; do
  home=$(mktemp -d /tmp/dense_cut_XXXX)
  cp -r generator templates "$home/"
  python3 - "$home/templates/sparse_attn_dense.cuh" "$cut" <<'PY' || exit 1
import sys
path, cut = sys.argv[1], sys.argv[2]
src = open(path).read()
cuts = {
    'full': [],
    'no_widen': [('  st_widen_in_place<TENSOR, 128>(p, kv0 + s * DENSE_KV_BYTES, ntok, threadIdx.x - DENSE_CONSUMERS);\n', '')],
    'no_copy': [('        st_copy_kv_block(p, g, page, k_tile, k_tile + DENSE_TILE_BYTES, bar);\n',
                 '        st_mbar_arrive(bar);\n')],
    'no_math': [('      st_attend_next_block_wg<D, DENSE_ROWS, TENSOR, RAW_IN_PLACE && !TENSOR>(',
                 '      if (false) st_attend_next_block_wg<D, DENSE_ROWS, TENSOR, RAW_IN_PLACE && !TENSOR>(')],
}
if cut not in cuts:
    sys.exit('unknown cut: ' + cut)
for anchor, repl in cuts[cut]:
    n = src.count(anchor)
    if n != 1:
        sys.exit('%s: anchor found %d times (the template changed): %r' % (cut, n, anchor[:60]))
    src = src.replace(anchor, repl)
open(path, 'w').write(src)
PY
  SPARSETUNE_HOME=$home OUT=$out/$cut timeout 200 bash docs/experiments/ncu_dense.sh "$match" m3-prefill >/dev/null 2>&1
  printf '%-9s ' "$cut"
  grep -E "^\s+Duration" "$out/$cut/ncu_dense_m3-prefill.txt" | head -1 | sed 's/  */ /g'
  rm -rf "$home"
done
