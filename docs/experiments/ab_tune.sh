#!/usr/bin/env bash
# A/B of a template change on the device: each MATCH tuned alone on SUITE's
# sparse_attn shapes by the old build (build/old: a previous commit's
# binary and, in build/old/home, its generator and templates) and the new
# one, in the order old, new, new, old in one call, so that a drift over
# the call favours neither; prints the tune's result lines that match the
# extended regex ROWS, prefixed by the build.
#   docs/experiments/ab_tune.sh SUITE ROWS MATCH...
# e.g. ab_tune.sh anchors 'reqs=' bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov.b8
set -u
suite=$1 rows=$2
shift 2
out=${OUT:-out}
mkdir -p "$out"
for which in old new new old; do
  bin=build/tuner/sparsetune home=
  [ $which = old ] && bin=build/old/sparsetune home=build/old/home
  for match in "$@"; do
    db="$out/ab.db"
    rm -f "$db" "$db-wal" "$db-shm"
    SPARSETUNE_HOME=$home "$bin" tune --suite "$suite" --op sparse_attn --match "$match" --db "$db" >"$out/ab.log" 2>&1
    grep -E "^B=" "$out/ab.log" | grep -E "$rows" | grep -v "no correct variant" | sed "s/^/$which /" |
      awk '{print $1, $(NF-3), $(NF-2), $2}' | sed 's/,D=.*dtype=/ /; s/,layout=.*reqs=/ /; s/,sel=.*//'
  done
done
rm -f "$out/ab.db" "$out/ab.db-wal" "$out/ab.db-shm" "$out/ab.log"
