#!/usr/bin/env bash
# sync_cuts.sh - on the device: which part of sparse_attn_decode's c16/s8
# kernel makes compute-sanitizer's synccheck stop it (an illegal address on
# the 7-request edge shape, 8 clusters of 16; docs/kernels/
# sparse_attn_decode.md, thirty-second session)? For each cut below, a copy
# of generator/ and templates/ under /tmp with that part of the template
# removed (each anchor text asserted, so a template change fails here, not
# as a silently uncut run), then the GPU test on that shape and kernel under
# synccheck with SPARSETUNE_HOME at the copy: the test reads its templates
# from $SPARSETUNE_HOME, else the build's source tree (ST_SOURCE_DIR in
# the environment moves nothing; the thirty-second session's first cuts
# ran the unchanged kernel for that reason). Cuts make results wrong; what
# each run says is whether the launch still dies with the address.
#   none        the kernel as it is (the control: stops)
#   noblocks    no block read or computed (nblk 0)
#   nopush      noblocks, and back right after the cluster wait: no pushes,
#               no merge (the armed receive barrier is then never waited on)
#   noq         nopush without q's cp.async
#   nocombine   nopush without the combine area's writes
#   nodyncheck  nopush without the dynamic shared memory check
#   norecv      nopush without arming the receive barrier
# Needs build/tests/test_sparse_attn_decode_gpu; about a minute a cut (the
# test compiles every variant). Writes $OUT/sync_<cut>.txt. SYNC_DRY=1
# (anywhere) only makes the copies and prints their paths, for compiling a
# cut kernel without a GPU (e.g. SPARSETUNE_HOME=<copy> sparsetune
# compile --suite smoke --op sparse_attn_decode --db /tmp/c.db).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-out}
mkdir -p "$out"
shape=${SYNC_SHAPE:-"bf16,none,pages2,random,D=128"}
for cut in ${SYNC_CUTS:-none noblocks nopush noq nocombine nodyncheck norecv}; do
  home=$(mktemp -d /tmp/sync_cut_XXXX)
  cp -r "$root/generator" "$root/templates" "$home/"
  python3 - "$home/templates/sparse_attn_decode.cu" "$cut" <<'PY'
import sys
path, cut = sys.argv[1], sys.argv[2]
s = open(path).read()
def edit(a, b):
    global s
    if s.count(a) != 1:
        sys.exit(f"sync_cuts: anchor of cut {cut} not found once: {a[:60]!r}")
    s = s.replace(a, b)
wait = "  if (cluster_merge) st_cluster_wait(); // every receive barrier of the cluster is initialized\n"
if cut != "none":
    edit("  const int nblk = s_nblk;\n", "  const int nblk = 0 * s_nblk; // CUT\n")
if cut not in ("none", "noblocks"):
    edit(wait, wait + "  if (cluster_merge) return; // CUT\n")
if cut == "noq":
    edit("      st_cp_async16(q_tile + (uint32_t)st_swizzle_offset<ROW_CHUNKS>(h, c),",
         "      if (false) st_cp_async16(q_tile + (uint32_t)st_swizzle_offset<ROW_CHUNKS>(h, c), // CUT")
if cut == "nocombine":
    edit("  st_softmax_finish_l(st);\n  st_softmax_finish_l(sd);\n",
         "  if (cluster_merge) { __syncthreads(); st_cluster_wait(); return; } // CUT\n"
         "  st_softmax_finish_l(st);\n  st_softmax_finish_l(sd);\n")
if cut == "nodyncheck":
    edit("    if (dyn < (unsigned)(raw_v ? SMEM_BYTES_RAW : SMEM_BYTES)) __trap();",
         "    if (dyn == 12345u) __trap(); // CUT")
if cut == "norecv":
    edit("      st_mbar_init(recv_bar, 1);\n      st_mbar_arrive_expect_tx(recv_bar, st_recv_bytes(p.splits));\n",
         "      // CUT: no receive barrier\n")
open(path, "w").write(s)
PY
  if [ -n "${SYNC_DRY:-}" ]; then
    echo "[$cut] $home"
    continue
  fi
  t0=$(date +%s)
  rc=0
  SPARSETUNE_HOME=$home ST_TEST_VERBOSE=1 ST_TEST_MATCH=.c16/s8 ST_TEST_SHAPE="$shape" timeout 150 \
    compute-sanitizer --tool synccheck --print-limit 5 "$root/build/tests/test_sparse_attn_decode_gpu" \
    >"$out/sync_$cut.txt" 2>&1 || rc=$?
  echo "[$cut] rc=$rc $(($(date +%s) - t0)) s: $(grep -c '^# pair' "$out/sync_$cut.txt") pairs;" \
    "$(grep -cE 'ILLEGAL_ADDRESS' "$out/sync_$cut.txt") illegal address;" \
    "$(grep -E 'ERROR SUMMARY' "$out/sync_$cut.txt" | tail -1)"
  rm -rf "$home"
done
