#!/usr/bin/env bash
# A/B of the tensor-mode K scale change on the fp8 prefill winners: each
# MATCH tuned alone (both m3-prefill fp8 shapes) by the old build
# (build/old, as tensor_k_scale_check.sh) and the new one, in the order
# old new new old, so that a drift over the call does not favour either.
set -u
out=${OUT:-out}
mkdir -p "$out"
for which in old new new old; do
  bin=build/tuner/sparsetune home=
  [ $which = old ] && bin=build/old/sparsetune home=build/old/home
  for match in "$@"; do
    db="$out/ab.db"
    rm -f "$db" "$db-wal" "$db-shm"
    SPARSETUNE_HOME=$home "$bin" tune --suite m3-prefill --op sparse_attn --match "$match" --db "$db" >"$out/ab.log" 2>&1
    grep -E "^B=.*fp8" "$out/ab.log" | sed "s/^/$which /" | awk '{print $1, $(NF-3), $(NF-2), $2}' | sed 's/,D=.*scale=/ /; s/,sel=.*//'
  done
done
rm -f "$out/ab.db" "$out/ab.db-wal" "$out/ab.db-shm" "$out/ab.log"
