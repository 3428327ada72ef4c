#!/usr/bin/env bash
# Builds attn_phase_probe binaries (see attn_phase_probe.cu) into
# build/ap_<tag>_<CUT> and writes build/ap_run.sh, which runs them all and
# prints one table. Renders the anchors suite's sparse_attn_decode sources
# with the current templates, adds the cut markers (#ifdef CUT_*) at fixed
# anchor texts (each asserted, so a template change fails here, not as a
# silently wrong probe) and compiles with nvcc, two at a time.
#
# Variants (tag: rendered name), all run B = 1 with the launcher's auto
# splits (16 on an H100: one selected block per CTA):
#   bf16c16:  w4.s1.single.c16, the B = 1 bf16 winner (cluster merge);
#   bf16c1:   the same kernel unclustered (workspace, counter, last CTA merges);
#   fp8kvr16: w4.s1.kvr.single.c16, the fp8 B = 1 winner (k_regs 2: K and V
#             read raw into the mma fragments; the anchors' scalar scales).
# (Anchors renewed for the template of the twenty-fifth session.)
# AP_SET=large builds instead the winners of the rows that miss ">= 90% of
# copy", at their batch and the splits the twenty-fifth session's one-row
# tunes chose:
#   bf16b32:  w4.s2.single, B = 32, 1 split (64 CTAs);
#   fp8b32:   w4.s1.kvr.single.c16, B = 32, 4 splits (cluster merge);
#   fp8b128:  w4.s2.kvr.single, B = 128, 1 split;
#   fp8b128s1: w4.s1.kvr.single, B = 128, 1 split (the twenty-sixth
#             session's winner).
# Cuts, each removing more of the kernel than the one before (so adjacent
# differences price one stage):
#   FULL        the kernel as rendered;
#   SKIP_MERGE  returns after the CTA's combine (its own (O, m, l) per q head);
#   SKIP_MATH   returns after the K/V copy has landed (fp8: and was widened);
#   SKIP_COPY   returns after the front end (block list, pages, q in smem);
#   EMPTY       returns at entry (same grid, cluster dims, block, smem).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# AP_OUT (a folder, relative to the current one) puts it all in one place, e.g.
# build/ap: one path to carry to the GPU machine.
out="${AP_OUT:-$root/build}"
nvcc=/usr/local/cuda/bin/nvcc
# tag, rendered name, batch, splits (0: the launcher's auto)
if [ "${AP_SET:-b1}" = large ]; then
  table="bf16b32 sparse_attn_decode.bf16.d128.g16.w4.s2.single/auto 32 1
fp8b32 sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.single.c16/auto 32 4
fp8b128 sparse_attn_decode.fp8.d128.g16.w4.s2.kvr.single/auto 128 1
fp8b128s1 sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.single/auto 128 1"
else
  table="bf16c16 sparse_attn_decode.bf16.d128.g16.w4.s1.single.c16/auto 1 0
bf16c1 sparse_attn_decode.bf16.d128.g16.w4.s1.single/auto 1 0
fp8kvr16 sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.single.c16/auto 1 0"
fi
tags=$(echo "$table" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 }')
cuts="${AP_CUTS:-FULL SKIP_MERGE SKIP_MATH SKIP_COPY EMPTY}" # AP_CUTS: a subset, e.g. FULL for an A/B
mkdir -p "$out/ap_src"
out=$(cd "$out" && pwd)
src="$out/ap_src"
"$root/build/tuner/sparsetune" generate --suite anchors --op sparse_attn_decode --db "$src/g.db" --print >"$src/gen.txt"
rm -f "$src/g.db"
python3 - "$src" "$root/docs/experiments" "$table" <<'PY'
import sys
src = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from probe_source import extract, apply_marks

def cut(name, body):
    return '#ifdef CUT_%s\n%s#endif\n' % (name, body)

# The cuts' one data-dependent store: 4 bytes of o in the CTA's item, at its
# split's slot (a cut kernel writes garbage into o; only FULL is checked).
KEEP = '''// attn_phase_probe: keeps a cut kernel's work alive (see make_attn_phase_probes.sh).
__device__ __forceinline__ void ap_keep(const st_sparse_attn_decode_params &p, const st_item &it, int split,
                                        uint32_t v) {
  uint32_t *o = (uint32_t *)((uint16_t *)p.o + (int64_t)it.row * p.o_stride_row +
                             (int64_t)(it.g * GROUP) * p.o_stride_head);
  o[split] = v;
}

'''

# (anchor, expected count, rewrite of the anchor)
marks = [
    # helper, ahead of the kernels
    ('// ---- the kernels ', 1, lambda a: KEEP + a),
    # EMPTY: first statement of the main kernel; nothing else runs (no smem
    # size check, no cluster barrier: no CTA of the cluster waits for one).
    ('    st_sparse_attn_decode_main(const st_sparse_attn_decode_params p) {\n', 1,
     lambda a: a + cut('EMPTY', '  return;\n')),
    # SKIP_COPY: right after the front end's barrier (seq_lens, topk_idx and
    # block_table read by warp 0, the block list in smem, q landed by
    # cp.async): no K/V byte is copied. Keeps a store of the block count,
    # the first page and a word of q.
    ('  const int nblk = s_nblk;\n', 1,
     lambda a: a + cut('SKIP_COPY', '  if (threadIdx.x == 0)\n'
                       '    ap_keep(p, it, split, (uint32_t)nblk + (uint32_t)s_page[0] + *(const uint32_t *)q_smem);\n'
                       '  if (cluster_merge) st_cluster_wait();\n'
                       '  return;\n')),
    # SKIP_MATH: q.K, the softmax and P.V removed from both block loops
    # (the fp8 loop with widening, and the bf16 / raw-V loop); the copies
    # are still issued and waited for (every wait and barrier stays; fp8
    # still widens where it does), then the CTA stores a word of K and of
    # V of its last stage and returns before the combine.
    ('      float s[NT][4];\n', 2, lambda a: '#ifndef CUT_SKIP_MATH\n' + a + '#endif\n'),
    # fp8 loop (k_regs 0 and 1; k_regs 2 in tensor mode): q.K from raw K
    ('      if (K_REGS) { // q.K from the raw rows while the others widen V\n'
     '        if (tensor)\n'
     '          st_block_qk_f16<true>(q_tile, wm * 16, st_kv::raw_k(region, buf), st_kv::k_scales(region, buf),\n'
     '                                wn * WARP_TOKENS, s);\n'
     '        else\n'
     '          st_block_qk_f16<false>(q_tile, wm * 16, st_kv::raw_k(region, buf), nullptr, wn * WARP_TOKENS, s);\n'
     '      }\n', 1, lambda a: '#ifndef CUT_SKIP_MATH\n' + a + '#else\n      (void)tensor;\n      (void)q_scale;\n#endif\n'),
    # fp8 loop: the softmax, the widened tiles' scores and the values
    ('      if (K_REGS) {\n'
     '        st_block_softmax(wn * WARP_TOKENS, lim, q_scale, st, s);\n', 1,
     lambda a: '#ifndef CUT_SKIP_MATH\n' + a),
    ('        st_block_values(st_kv::v_tile(region, buf), wn * WARP_TOKENS, s, st);\n'
     '      }\n'
     '      __syncthreads(); // every warp is done with the widened tiles\n', 1,
     lambda a: a.replace('      }\n      __syncthreads();',
                         '      }\n#else\n      (void)lim;\n#endif\n      __syncthreads();')),
    # bf16 / raw-V loop: the scores and softmax, then the values
    ('      if (IS_FP8) {\n'
     '        st_block_qk_f16<false>(q_tile, wm * 16, st_kv::raw_k(region, buf), nullptr, wn * WARP_TOKENS, s);\n'
     '        st_block_softmax(wn * WARP_TOKENS, lim, q_scale, st, s);\n'
     '      } else {\n'
     '        st_block_scores(q_tile, wm * 16, st_kv::k_tile(region, buf), nullptr, wn * WARP_TOKENS, lim, scale_log2, st,\n'
     '                        s);\n'
     '      }\n', 1, lambda a: '#ifndef CUT_SKIP_MATH\n' + a + '#else\n      (void)lim;\n      (void)q_scale;\n#endif\n'),
    ('      if (IS_FP8)\n'
     '        st_block_values_raw(st_kv::raw_k(region, buf) + BLOCK_TOKENS * HEAD_DIM, wn * WARP_TOKENS, s, st);\n'
     '      else\n'
     '        st_block_values(st_kv::v_tile(region, buf), wn * WARP_TOKENS, s, st);\n', 1,
     lambda a: '#ifndef CUT_SKIP_MATH\n' + a + '#endif\n'),
    ('  // Combine the WARPS_N warps of each m-tile (the tiles are free now).\n', 1,
     lambda a: cut('SKIP_MATH', '  if (threadIdx.x == 0) {\n'
                   '    const char *kt = region + (IS_FP8 && !raw_v ? STAGES * st_kv::STAGE_BYTES : 0);\n'
                   '    ap_keep(p, it, split, (uint32_t)nblk + *(const uint32_t *)kt +\n'
                   '                              *(const uint32_t *)(kt + st_kv::TILE_BYTES));\n'
                   '  }\n'
                   '  if (cluster_merge) st_cluster_wait();\n'
                   '  return;\n') + a),
    # SKIP_MERGE: in the combine loop, once the thread has its piece of the
    # CTA's combined (O, m, l), skip whatever follows (cluster: the smem
    # pushes; unclustered: the workspace partial write); after the loop,
    # return before the (m, l) pushes, the wait for the pushed pieces and
    # the merge, and before the counter / last-CTA merge. The piece feeds
    # a store that never happens (an exact NaN payload arithmetic cannot
    # produce), so the compiler keeps the combine.
    ('    if (direct) {\n      st_write_out(p, it, h, d, ml.x, ml.y, o);\n', 1,
     lambda a: cut('SKIP_MERGE', '    if (__float_as_uint(o.x + o.y + o.z + o.w + ml.x + ml.y) == 0x7fc0abcdu)\n'
                   '      ap_keep(p, it, split, 1u);\n'
                   '    continue;\n') + a),
    ("  // Each head's (m, l) to every owner: one (head, owner) pair per thread\n", 1,
     lambda a: cut('SKIP_MERGE', '  return;\n') + a),
]

for line in sys.argv[3].splitlines():
    tag, name = line.split()[:2]
    s = apply_marks(extract(src + '/gen.txt', name), marks, tag)
    open(f'{src}/k_{tag}.cuh', 'w').write(s)
PY
rm -f "$src/gen.txt"
echo "$table" | while read -r tag name b splits; do
  for c in $cuts; do echo "$tag $c $b $splits"; done
done | xargs -P 2 -L 1 sh -c '
  "$0" -O3 -gencode=arch=compute_90a,code=sm_90a -I "$1/templates" -I "$2" -I "$1/docs/experiments" \
    -DKERNEL="\"k_$4.cuh\"" -DAP_TAG="\"$4\"" -DAP_CUT="\"$5\"" -DCUT_$5 -DAP_B=$6 -DAP_SPLITS=$7 \
    -o "$3/ap_$4_$5" "$1/docs/experiments/attn_phase_probe.cu" && echo "built ap_$4_$5"' \
  "$nvcc" "$root" "$src" "$out"

# The runner: every binary once, a table of microseconds per (variant, cut),
# the stage prices (adjacent differences) and FULL's check against the host
# reference. Paths are relative to its own folder (build/).
cat >"$out/ap_run.sh" <<EOF
#!/usr/bin/env bash
# Written by docs/experiments/make_attn_phase_probes.sh: runs every
# attn_phase_probe binary and prints microseconds per graph replay.
cd "\$(dirname "\$0")"
tags="$tags"
cuts="$cuts"
EOF
cat >>"$out/ap_run.sh" <<'EOF'
fail=0
log=$(mktemp)
for t in $tags; do
  for c in $cuts; do
    ./ap_${t}_$c >>"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "ap_${t}_$c FAILED (rc $rc)" >>"$log"
      fail=1
    fi
  done
done
cat "$log"
echo
awk -v tags="$tags" -v cuts="$cuts" '
  $1 == "ap" { us[$2, $3] = $4 }
  END {
    nt = split(tags, T, " "); nc = split(cuts, C, " ")
    printf "%-8s", "us"; for (j = 1; j <= nc; j++) printf " %10s", C[j]; print ""
    for (i = 1; i <= nt; i++) {
      printf "%-8s", T[i]
      for (j = 1; j <= nc; j++) printf " %10s", ((T[i], C[j]) in us) ? us[T[i], C[j]] : "-"
      print ""
    }
    print ""
    printf "%-8s %10s %10s %10s %10s %10s\n", "stage", "merge", "math+comb", "copy", "front", "launch"
    for (i = 1; i <= nt; i++) {
      printf "%-8s", T[i]
      for (j = 1; j <= nc; j++) {
        a = us[T[i], C[j]]; b = (j < nc) ? us[T[i], C[j + 1]] : 0
        if (a == "" || b == "") printf " %10s", "-"; else printf " %10.2f", a - b
      }
      print ""
    }
  }' "$log"
rm -f "$log"
exit $fail
EOF
chmod +x "$out/ap_run.sh"
echo "wrote $out/ap_run.sh"
