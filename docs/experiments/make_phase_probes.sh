#!/usr/bin/env bash
# Builds phase_probe binaries (see phase_probe.cu) for two bf16 variants into
# build/pp_<variant>_<marker>: renders the anchors suite's sources with the
# current templates, adds the SKIP_* markers and compiles with nvcc.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/build/tuner/sparsetune" generate --suite anchors --db "$tmp/g.db" --print >"$tmp/gen.txt"
python3 - "$tmp" <<'PY'
import sys
tmp = sys.argv[1]
g = open(tmp + '/gen.txt').read().split('\n')
def extract(name):
    for i, l in enumerate(g):
        if l.startswith('// ==== ' + name + ' '):
            j = i + 1
            while j < len(g) and not g[j].startswith('// ==== '):
                j += 1
            return '\n'.join(g[i + 1:j])
    raise SystemExit('no variant ' + name)
marks = [
    ('  if (!s_last) return;\n', lambda a: a + '#ifdef SKIP_MERGE\n  return;\n#endif\n'),
    ('    st_select_and_write(p, r, g, seq, c0, nc, buf, nb_all, nb_all, sm);\n',
     lambda a: '#ifdef SKIP_SELECT\n    if (threadIdx.x == 0) p.topk_idx[c0] = buf[0];\n    __syncthreads();\n    continue;\n#endif\n' + a),
    ('  const int nunits = nloc * TILES_PER_BLOCK;\n', lambda a: '#ifndef SKIP_SCORE\n' + a),
    ('  __syncthreads();\n\n  // Forced blocks', lambda a: '#endif\n' + a),
]
for tag, name in [('h2q1u2', 'index_decode.bf16.d128.k16.h2.q1.t256.u2.single/auto'),
                  ('h1q4u1', 'index_decode.bf16.d128.k16.h1.q4.t256.u1.single/auto')]:
    s = extract(name)
    for anchor, f in marks:
        assert anchor in s, anchor
        s = s.replace(anchor, f(anchor))
    open(f'{tmp}/k_{tag}.cuh', 'w').write(s)
PY
for tag in h2q1u2 h1q4u1; do
  for m in FULL SKIP_SELECT SKIP_MERGE SKIP_SCORE; do
    /usr/local/cuda/bin/nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I "$root/templates" -I "$tmp" \
      -DKERNEL="\"k_$tag.cuh\"" -D$m -o "$root/build/pp_${tag}_$m" "$root/docs/experiments/phase_probe.cu" &
  done
  wait
done
