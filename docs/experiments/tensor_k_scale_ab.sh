#!/usr/bin/env bash
# A/B of the tensor-mode K scale change on the fp8 prefill winners
# (eighteenth session): each MATCH tuned alone on both m3-prefill fp8
# shapes by the old build (build/old, as tensor_k_scale_check.sh) and the
# new one, in the order old new new old. Since the nineteenth session the
# general script does it (ab_tune.sh).
exec "$(dirname "$0")/ab_tune.sh" m3-prefill 'dtype=fp8' "$@"
