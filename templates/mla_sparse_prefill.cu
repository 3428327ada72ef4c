// mla_sparse_prefill.cu - DeepSeek-V3.2 token-sparse MLA attention,
// prefill (FlashMLA's sparse prefill contract).
//
// s_q query tokens, each a row of its own (a one-token request: qlen 1),
// over kv [s_kv, 1, 576] bf16: a row's entries are kv rows, no pages. No
// causal mask: the indices say what a query sees. Besides o and lse the
// kernels write max_logits, the largest score of a row's valid entries.
// The kernels are the token-sparse MLA attention's
// (common/mla_sparse_attend.cuh: grid, steps, bytes and FLOPs), which
// mla_sparse_decode.cu shares; this file gives them a variant's constants
// and their names.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/mla_sparse_prefill.cuh"
constexpr int IS_FP8 = 0;                 // kv is bf16
constexpr int HEADS = ST_P_HEADS_PER_CTA; // q heads a CTA computes
constexpr int TILE = ST_P_TILE_TOKENS;    // kv rows staged at once
constexpr int THREADS = ST_P_THREADS;
constexpr int MMA = ST_P_MMA; // 0: CUDA cores; 1: tensor cores (mma.sync); 2: wgmma
// 1: the next tile's rows are copied by cp.async into a staging buffer
// while the current tile is scored and weighed; 0: each tile's rows are
// read before its math.
constexpr int PIPE = ST_P_PIPE;
// Slots are kv rows, kv_stride_page elements apart.
constexpr int KV_PAGED = 0;
// The max_logits output, where asked.
constexpr int MAX_LOGITS = 1;

#include "params/mla_sparse_prefill.h"
#include "common/params_gate.cuh"
#include "common/mla_sparse_attend.cuh"

ST_PARAMS_GATE(st_mla_sparse_prefill_params)

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    st_mla_sparse_prefill_main(const st_mla_sparse_prefill_params p) {
  st_mla_sparse_attend_main(p);
}

extern "C" __global__ void __launch_bounds__(DIM_THREADS)
    st_mla_sparse_prefill_merge(const st_mla_sparse_prefill_params p) {
  st_mla_sparse_attend_merge(p);
}
