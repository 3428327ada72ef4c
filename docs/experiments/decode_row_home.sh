#!/usr/bin/env bash
# decode_row_home.sh - a copy of generator/ and templates/ (in a new folder
# under /tmp, whose path is printed) whose anchors suite keeps one
# sparse_attn_decode row: B = B, dtype DTYPE, topk TOPK (default the
# anchors' 16). With SPARSETUNE_HOME at it, `tune --suite anchors --op
# sparse_attn_decode --match M` times variant M on that row alone (every
# launch of it: splits, clusters), e.g. for ncu_decode.sh.
#   docs/experiments/decode_row_home.sh DTYPE B [TOPK]
set -eu
dtype=$1 b=$2 topk=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
home=$(mktemp -d /tmp/decode_row_XXXX)
cp -r "$root/generator" "$root/templates" "$home/"
row="sparse_attn_decode(\"$dtype\", $b, 32768, {"
if [ -n "$topk" ]; then row="$row topk = $topk,"; else row="$row peer_us"; fi
grep -qF "$row" "$home/generator/suites.lua" || { echo "no anchors row starting $row" >&2; exit 2; }
# The other sparse_attn_decode rows go (anchors' and other suites' one-line rows).
python3 - "$home/generator/suites.lua" "$row" <<'PY'
import sys
path, keep = sys.argv[1], sys.argv[2]
lines = open(path).read().split('\n')
out = [l for l in lines if not (l.strip().startswith('sparse_attn_decode("') and l.strip().endswith('}),')
                                and not l.strip().startswith(keep))]
open(path, 'w').write('\n'.join(out))
PY
echo "$home"
