#!/usr/bin/env bash
# prepare_branch.sh - here (no GPU needed): build an experiment branch's
# sparsetune and test_sparse_attn_gpu in a worktree of its own and put what
# the device needs under build/alt/NAME (carried with `build/alt`):
#   build/alt/NAME/sparsetune, build/alt/NAME/test_sparse_attn_gpu
#   build/alt/NAME/home      the branch's generator/ and templates/
#   build/alt/NAME/home1     the same, the anchors suite's sparse_attn rows
#                            cut to ROW (for a kernel timeline of one row)
#   docs/experiments/prepare_branch.sh BRANCH NAME [ROW]   (ROW: 4096:0)
# Then on the device: docs/experiments/device_branch.sh NAME MATCH.
set -eu
branch=$1 name=$2 row=${3:-4096:0}
root=$(git rev-parse --show-toplevel)
tree=${TMPDIR:-/tmp}/sparsetune-$name
if [ ! -d "$tree" ]; then git -C "$root" worktree add --detach "$tree" "$branch" >/dev/null; fi
git -C "$tree" checkout -q --detach "$branch"
cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$tree/build" -j"$(nproc)" --target sparsetune_cli test_sparse_attn_gpu > /dev/null
alt=$root/build/alt/$name
rm -rf "$alt" && mkdir -p "$alt/home" "$alt/home1"
cp "$tree/build/tuner/sparsetune" "$tree/build/tests/test_sparse_attn_gpu" "$alt/"
cp -r "$tree/generator" "$tree/templates" "$alt/home/"
cp -r "$tree/generator" "$tree/templates" "$alt/home1/"
# Every other sparse_attn row of the suites goes (anchors keeps ROW).
grep -q "sparse_attn(\"bf16\", \"$row\"" "$alt/home1/generator/suites.lua" || { echo "no sparse_attn row $row" >&2; exit 2; }
sed -i "/^ *sparse_attn(\"bf16\", \"/{/\"$row\"/!d}" "$alt/home1/generator/suites.lua"
echo "build/alt/$name: $(git -C "$tree" log --oneline -1)"
