#!/usr/bin/env bash
# make_timeline_probe.sh - builds timeline_probe.cu for index_decode
# variants: renders the anchors suite's sources with the current templates,
# adds the ST_TL marks (at anchor texts that must occur exactly as often as
# expected) and compiles build/tl_<n> for the n-th NAME given.
#   docs/experiments/make_timeline_probe.sh NAME...
# e.g. make_timeline_probe.sh index_decode.fp8.d128.k16.h2.q1.t128.u1.b2.split/s2
# (the name of the source as --print heads it: any split count of the kernel).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/build/tuner/sparsetune" generate --suite anchors --op index_decode --db "$tmp/g.db" --print >"$tmp/gen.txt"
n=0
for name in "$@"; do
  python3 - "$tmp" "$root/docs/experiments" "$name" <<'PY'
import sys
tmp, name = sys.argv[1], sys.argv[3]
sys.path.insert(0, sys.argv[2])
from probe_source import extract, apply_marks
marks = [
    ('  const int split = blockIdx.x, r = blockIdx.y, g = blockIdx.z;\n', 1, lambda a: a + '  ST_TL(0);\n  ST_TL_SMID();\n'),
    ('  const int seq = p.seq_lens[r];\n  if (seq <= 0) {\n    if (!ALGO_SPLIT', 1,
     lambda a: a.replace('  if (seq <= 0) {', '  if (seq != 0x7fffffff) ST_TL(1);\n  if (seq <= 0) {')),
    ('  __syncthreads();\n\n  if (BULK_STAGES > 0) {\n', 1, lambda a: a.replace('  if (BULK', '  ST_TL(2);\n  if (BULK')),
    ('    st_mbar_wait(st_smem_addr(&full[st]), parity);\n', 1, lambda a: a + '    if (i < 4) ST_TL(3 + i);\n'),
    ('  if (ALGO_SPLIT) return;\n', 1, lambda a: '  ST_TL(7);\n' + a),
    ('  const int r = blockIdx.x, g = blockIdx.y;\n', 1, lambda a: a + '  ST_TLM(0);\n'),
    ('  const int seq = p.seq_lens[r];\n  if (seq <= 0) {\n    st_write_padding(p, r, g);', 1,
     lambda a: a.replace('  if (seq <= 0) {', '  if (seq != 0x7fffffff) ST_TLM(1);\n  if (seq <= 0) {')),
    ('  st_merge_from_workspace(p, r, g, seq, s_dyn, s_sel);\n}', 1, lambda a: a.replace('\n}', '\n  ST_TLM(2);\n}')),
]
open(tmp + '/k.cuh', 'w').write(apply_marks(extract(tmp + '/gen.txt', name), marks, name))
PY
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I "$root/templates" -I "$tmp" \
    -I "$root/docs/experiments" -DKERNEL='"k.cuh"' -o "$root/build/tl_$n" "$root/docs/experiments/timeline_probe.cu"
  echo "build/tl_$n: $name"
  n=$((n + 1))
done
