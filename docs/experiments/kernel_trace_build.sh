# kernel_trace_build.sh - sourced by the scripts that run a process under
# kernel_trace.c (trace_sparse_attn.sh, trace_decode.sh): finds CUPTI in
# the toolkit (sets $cupti, for LD_LIBRARY_PATH) and builds the library
# into $out/kt.so (for LD_PRELOAD). Needs $out to exist.
cupti=$(dirname "$(find /usr/local/cuda/ -name 'libcupti.so*' 2>/dev/null | head -1)")
[ -n "$cupti" ] && [ "$cupti" != . ] || { echo "no libcupti under /usr/local/cuda" >&2; exit 1; }
gcc -O2 -shared -fPIC -o "$out/kt.so" docs/experiments/kernel_trace.c -I/usr/local/cuda/include -L"$cupti" -lcupti
