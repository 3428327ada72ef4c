// mla_sparse_decode.cu - DeepSeek-V3.2 token-sparse MLA attention, decode.
//
// B requests of qlen query tokens (row = b*qlen + t) over a paged cache:
// a row's entries are physical token slots page * page_size + offset, bf16
// rows of 576 or DeepSeek-V3.2's 656-byte fp8 rows. The kernels are the
// token-sparse MLA attention's (common/mla_sparse_attend.cuh: grid, steps,
// bytes and FLOPs), which mla_sparse_prefill.cu shares; this file gives
// them a variant's constants and their names.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/mla_sparse_decode.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEADS = ST_P_HEADS_PER_CTA; // q heads a CTA computes
constexpr int TILE = ST_P_TILE_TOKENS;    // cache rows staged at once
constexpr int THREADS = ST_P_THREADS;
constexpr int MMA = ST_P_MMA; // 0: CUDA cores; 1: tensor cores (mma.sync); 2: wgmma
// 1: the next tile's raw rows are copied by cp.async into a staging buffer
// while the current tile is scored and weighed (then widened from shared
// memory); 0: each tile's rows are read and widened before its math.
constexpr int PIPE = ST_P_PIPE;
// Slots are page * page_size + offset.
constexpr int KV_PAGED = 1;
// No max_logits output (decode has none).
constexpr int MAX_LOGITS = 0;

#include "params/mla_sparse_decode.h"
#include "common/params_gate.cuh"
#include "common/mla_sparse_attend.cuh"

ST_PARAMS_GATE(st_mla_sparse_decode_params)

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    st_mla_sparse_decode_main(const st_mla_sparse_decode_params p) {
  st_mla_sparse_attend_main(p);
}

extern "C" __global__ void __launch_bounds__(DIM_THREADS)
    st_mla_sparse_decode_merge(const st_mla_sparse_decode_params p) {
  st_mla_sparse_attend_merge(p);
}
