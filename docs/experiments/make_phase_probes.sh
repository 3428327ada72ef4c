#!/usr/bin/env bash
# Builds phase_probe binaries (see phase_probe.cu) for two bf16 variants into
# build/pp_<variant>_<marker>: renders the anchors suite's sources with the
# current templates, adds the SKIP_* markers and compiles with nvcc.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/build/tuner/sparsetune" generate --suite anchors --db "$tmp/g.db" --print >"$tmp/gen.txt"
python3 - "$tmp" "$root/docs/experiments" <<'PY'
import sys
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from probe_source import extract, apply_marks

# (anchor, expected count, rewrite). SKIP_SELECT (v5 on): the merge reads
# one key per thread from L2 (the round trip the selection starts with) and
# stores nothing that depends on a selection.
marks = [
    ('  if (!s_last) return;\n', 1, lambda a: a + '#ifdef SKIP_MERGE\n  return;\n#endif\n'),
    ('  const uint32_t *keys = p.block_keys + st_key_row(p, r, g * HEADS_PER_CTA, 0) * p.max_blocks;\n', 1,
     lambda a: a + '#ifdef SKIP_SELECT\n  {\n    const uint32_t v = (int)threadIdx.x < nb_all ? st_ld_l2_u32(keys + threadIdx.x) : 0u;\n'
     '    if (v == 0x12345678u) p.topk_idx[0] = (int32_t)v;\n    return;\n  }\n#endif\n'),
    ('  if (BULK_STAGES > 0) {\n    st_score_bulk(', 1, lambda a: '#ifndef SKIP_SCORE\n' + a),
    ('  __syncthreads();\n\n  // Forced blocks', 1, lambda a: '#endif\n' + a),
]
for tag, name in [('h2q1u2', 'index_decode.bf16.d128.k16.h2.q1.t256.u2.single/auto'),
                  ('h1q4u1', 'index_decode.bf16.d128.k16.h1.q4.t256.u1.single/auto')]:
    s = apply_marks(extract(tmp + '/gen.txt', name), marks, tag)
    open(f'{tmp}/k_{tag}.cuh', 'w').write(s)
PY
for tag in h2q1u2 h1q4u1; do
  for m in FULL SKIP_SELECT SKIP_MERGE SKIP_SCORE; do
    /usr/local/cuda/bin/nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I "$root/templates" -I "$tmp" \
      -DKERNEL="\"k_$tag.cuh\"" -D$m -o "$root/build/pp_${tag}_$m" "$root/docs/experiments/phase_probe.cu" &
  done
  wait
done
