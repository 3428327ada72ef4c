"""trace_pairs.py - main / merge kernel times of a two-kernel decode op
(index_decode's split variants: st_index_decode_main, then the merge
launched programmatically) from kernel_trace.c's CSV, one line a file:
medians over the last 400 (main, merge) pairs of the main kernel's time,
the gap to the merge's start, the merge's time and the replay period (us).
Pairs are found by order of start time, not by graph id. With no merge
after the main kernels (single variants), the main kernel's time and
period instead.
  python3 docs/experiments/trace_pairs.py TRACE.csv [TRACE.csv.PID ...]
(docs/experiments/index_row_ab.sh runs it on a traced tune: TRACE=MATCH.)"""
import csv
import statistics
import sys


def us(ns):
    return ns / 1e3


for path in sys.argv[1:]:
    rows = sorted(csv.DictReader(open(path)), key=lambda r: int(r["start_ns"]))
    t = lambda r, k: int(r[k])
    mains = [r for r in rows if "main" in r["name"]]
    pairs = [(a, b) for a, b in zip(rows, rows[1:]) if "main" in a["name"] and "merge" in b["name"]]
    if len(mains) < 50:
        print(f"{path}: {len(rows)} kernels, too few to time")
        continue
    if len(pairs) < 50:
        ms = mains[-400:]
        d = statistics.median(t(a, "end_ns") - t(a, "start_ns") for a in ms)
        per = statistics.median(t(b, "start_ns") - t(a, "start_ns") for a, b in zip(ms, ms[1:]))
        print(f"{path}: {len(rows)} kernels; main only {us(d):.2f} (grid {ms[-1]['grid_x']}x{ms[-1]['block_x']}), "
              f"period {us(per):.2f} us")
        continue
    pairs = pairs[-400:]
    main = statistics.median(t(a, "end_ns") - t(a, "start_ns") for a, b in pairs)
    gap = statistics.median(t(b, "start_ns") - t(a, "end_ns") for a, b in pairs)
    merge = statistics.median(t(b, "end_ns") - t(b, "start_ns") for a, b in pairs)
    per = statistics.median(t(q[0], "start_ns") - t(p[0], "start_ns") for p, q in zip(pairs, pairs[1:]))
    g = pairs[-1][0]
    print(f"{path}: {len(rows)} kernels, {len(pairs)} pairs; main {us(main):.2f} (grid {g['grid_x']}x{g['block_x']}), "
          f"gap {us(gap):.2f}, merge {us(merge):.2f}, period {us(per):.2f} us")
