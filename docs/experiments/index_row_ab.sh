#!/usr/bin/env bash
# index_row_ab.sh - on the device: a change to index_decode's templates,
# A/B by anchors row. For each ROW (the start of its line in
# generator/suites.lua, e.g. 'index_decode("bf16", 1, 131072'), a copy of
# each side's generator/ and templates/ keeping only that index_decode row,
# then a full tune of the row in its own process with SPARSETUNE_HOME at
# the copy, A then B (alternating, so drift hits both); prints each side's
# best single and best split variant. With TRACE=MATCH it tunes only the
# variants matching MATCH, under kernel_trace.c (CUPTI), and prints
# trace_pairs.py's main / merge kernel times instead.
#   docs/experiments/index_row_ab.sh A_DIR B_DIR ROW [ROW ...]
# A_DIR, B_DIR: folders holding generator/ and templates/, made here
# before the device call, e.g.
#   git archive main generator templates | tar -x -C build/ab/home_old
# (carry them). About 10 s a tune. (index_decode v6, thirty-third session.)
set -u
a=$1 b=$2
shift 2
out=${OUT:-out}
mkdir -p "$out"
if [ -n "${TRACE:-}" ]; then . docs/experiments/kernel_trace_build.sh; fi
home_of() { # DIR ROW: a copy of DIR keeping only that index_decode row
  local home
  home=$(mktemp -d /tmp/row_ab_XXXX)
  cp -r "$1/generator" "$1/templates" "$home/"
  python3 - "$home/generator/suites.lua" "$2" <<'PY' || { rm -rf "$home"; return 1; }
import sys
path, keep = sys.argv[1], sys.argv[2]
lines = open(path).read().split('\n')
if not any(l.strip().startswith(keep) for l in lines):
    sys.exit(f"index_row_ab: no line of {path} starts with {keep}")
kept = [l for l in lines if not (l.strip().startswith('index_decode("') and not l.strip().startswith(keep))]
open(path, 'w').write('\n'.join(kept))
PY
  echo "$home"
}
best() { # the best ok median per algorithm in `show run` output
  python3 -c '
import sys
best = {}
for line in sys.stdin.read().split("\n")[2:]:
    f = line.split()
    if len(f) < 4 or f[2] != "ok": continue
    algo = "single" if ".single/" in f[0] else "split"
    if algo not in best or float(f[3]) < best[algo][0]: best[algo] = (float(f[3]), f[0])
print("  ".join(f"{k} {u:.2f} {n}" for k, (u, n) in sorted(best.items())))'
}
for row in "$@"; do
  echo "== $row"
  for side in "$a" "$b"; do
    home=$(home_of "$side" "$row") || exit 2
    db=$(mktemp -u /tmp/row_ab_XXXX.db)
    if [ -n "${TRACE:-}" ]; then
      rm -f /tmp/row_ab_trace.csv*
      SPARSETUNE_HOME=$home KT_FORK=1 KT_OUT=/tmp/row_ab_trace.csv KT_MATCH=st_ LD_PRELOAD="$out/kt.so" \
        LD_LIBRARY_PATH="$cupti" build/tuner/sparsetune tune --suite anchors --op index_decode --match "$TRACE" \
        --db "$db" >/dev/null 2>&1
      echo "$side: $(python3 docs/experiments/trace_pairs.py /tmp/row_ab_trace.csv.* | sed 's/^[^:]*: //')"
    else
      SPARSETUNE_HOME=$home timeout 100 build/tuner/sparsetune tune --suite anchors --op index_decode --db "$db" \
        >/dev/null 2>&1
      echo "$side: $(build/tuner/sparsetune show run 1 --db "$db" 2>&1 | best)"
    fi
    rm -rf "$home" "$db"*
  done
done
