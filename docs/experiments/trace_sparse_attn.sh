#!/usr/bin/env bash
# trace_sparse_attn.sh - on the device: a kernel timeline of one sparse_attn
# variant's tune (verification launches and graph replays), and how much of
# each blocks kernel (st_sparse_attn_main) ran beside a merge-kernel launch
# of another stream (docs/kernels/sparse_attn.md, "Next, counted").
#   docs/experiments/trace_sparse_attn.sh MATCH [SPARSETUNE_HOME]
# MATCH picks the variant (`tune --match`), e.g. t8.s1.wg2.pbf16.c2/q3072.ov;
# an alternative home (a copy of generator/ and templates/ whose anchors
# suite keeps one sparse_attn row) limits it to that row. Writes
# $OUT/trace.csv* (kernel_trace.c's columns) and prints their summaries.
# ST_BIN names another sparsetune binary (an experiment branch's build).
set -eu
match=$1
[ $# -ge 2 ] && export SPARSETUNE_HOME=$2
out=${OUT:-out}
mkdir -p "$out"
. docs/experiments/kernel_trace_build.sh
db=$(mktemp -u /tmp/trace_XXXX.db)
# The tune times in forked workers (KT_FORK: each writes trace.csv.PID);
# the bench replays the winner through the dispatch library in its own
# process (trace.csv).
KT_OUT="$out/trace.csv" KT_FORK=1 KT_MATCH=st_sparse_attn LD_PRELOAD="$out/kt.so" LD_LIBRARY_PATH="$cupti" \
  "${ST_BIN:-build/tuner/sparsetune}" tune --suite anchors --op sparse_attn --match "$match" --db "$db" > "$out/trace_tune.log" 2>&1
KT_OUT="$out/trace.csv" KT_MATCH=st_sparse_attn LD_PRELOAD="$out/kt.so" LD_LIBRARY_PATH="$cupti" \
  "${ST_BIN:-build/tuner/sparsetune}" bench --suite anchors --op sparse_attn --db "$db" > "$out/trace_bench.log" 2>&1
rm -f "$db"*
for f in "$out"/trace.csv*; do
echo "== $f"
python3 - "$f" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    r["s"], r["e"] = int(r["start_ns"]), int(r["end_ns"])
mains = [r for r in rows if r["name"].startswith("st_sparse_attn_main")]
merges = [r for r in rows if r["name"].startswith("st_sparse_attn_merge")]
def beside(m):  # ns of m's interval that some merge-kernel launch of another stream shares
    spans = sorted((max(m["s"], x["s"]), min(m["e"], x["e"])) for x in merges
                   if x["stream"] != m["stream"] and x["s"] < m["e"] and x["e"] > m["s"])
    total, cur_s, cur_e = 0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)
print(f"{len(rows)} kernels, {len(mains)} blocks kernels, {len(merges)} merge-kernel launches")
print("last 12 blocks kernels: start us, duration us, us beside a merge launch of another stream")
for m in mains[-12:]:
    print(f"  {m['s'] / 1e3:12.1f} {(m['e'] - m['s']) / 1e3:8.1f} {beside(m) / 1e3:8.1f}  stream {m['stream']} graph {m['graph']}")
print("last 12 kernels of any kind: start us, end us, stream, grid, name")
for r in rows[-12:]:
    print(f"  {r['s'] / 1e3:12.1f} {r['e'] / 1e3:12.1f}  stream {r['stream']:>4} grid {r['grid_x']:>6}  {r['name'][:40]}")
PY
done
