#!/usr/bin/env bash
# trace_decode.sh - on the device: how much of a decode row's replay time
# is its kernels' own time on the GPU. Tunes the anchors suite's decode ops
# into a fresh database, then runs `bench --suite anchors --op OPS` under
# kernel_trace.c (CUPTI records every kernel's start and end on the GPU's
# clock, graph replays included) and prints, for each CUDA graph the bench
# replayed (one row, or one decode step of both ops), in order of first
# launch: its kernels (name, grid), the replays seen, and medians of
#   busy    first kernel's start to last kernel's end within a replay;
#   period  one replay's first start to the next's;
#   idle    period - busy: the GPU waiting between replays (launch, and
#           whatever the replays' submission costs) -- what no kernel
#           change can remove from a row's time under the anchors' method.
#   docs/experiments/trace_decode.sh [OPS]   (default index_decode,sparse_attn_decode)
# Writes $OUT/bench.log and tune.log (the trace, /tmp/decode_trace.csv, is
# large: every warm-up replay is in it); about a minute.
set -eu
ops=${1:-index_decode,sparse_attn_decode}
out=${OUT:-out}
mkdir -p "$out"
. docs/experiments/kernel_trace_build.sh
db=$(mktemp -u /tmp/decode_trace_XXXX.db)
build/tuner/sparsetune tune --suite anchors --op "$ops" --db "$db" > "$out/tune.log" 2>&1
KT_OUT=/tmp/decode_trace.csv KT_MATCH=st_ LD_PRELOAD="$out/kt.so" LD_LIBRARY_PATH="$cupti" \
  build/tuner/sparsetune bench --suite anchors --op "$ops" --db "$db" > "$out/bench.log" 2>&1
rm -f "$db"* "$out/kt.so"
python3 - /tmp/decode_trace.csv <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
graphs = {}
for r in rows:
    if r["graph"] in ("0", ""):
        continue  # eager launches (verification, warm-up outside graphs)
    graphs.setdefault(r["graph"], []).append((int(r["start_ns"]), int(r["end_ns"]), r["name"], r["grid_x"]))
print(f"{len(rows)} kernels, {len(graphs)} graphs")
print(f"{'graph':>6} {'replays':>7} {'busy us':>8} {'period us':>9} {'idle us':>8}  kernels (name grid)")
for g, ks in sorted(graphs.items(), key=lambda kv: min(k[0] for k in kv[1])):
    ks.sort()
    nodes = len({(k[2], k[3]) for k in ks})
    reps = [ks[i:i + nodes] for i in range(0, len(ks) - nodes + 1, nodes)]
    if len(reps) < 3:
        continue
    busy = statistics.median(max(k[1] for k in rep) - rep[0][0] for rep in reps)
    period = statistics.median(b[0][0] - a[0][0] for a, b in zip(reps, reps[1:]))
    names = " + ".join(f"{k[2][:26]} {k[3]}" for k in reps[0])
    print(f"{g:>6} {len(reps):>7} {busy / 1e3:8.2f} {period / 1e3:9.2f} {(period - busy) / 1e3:8.2f}  {names}")
PY
