// dsa_index_topk.cu - DeepSeek-V3.2's indexer top-k for prefill: the
// positions of the topk largest logits of each query row's [ks, ke) range,
// over the logits dsa_index_logits writes.
//
// st_dsa_index_topk_main, grid (s_q), THREADS threads: CTA i selects row
// i. Its range is ks[i] <= j < ke[i], clamped to 0..s_kv (ke <= ks: none);
// n = its length. A row with n <= topk writes ks..ke-1 in order and -1
// after them without reading a logit. Otherwise the CTA runs the radix
// select of common/radix_topk_row.cuh (dsa_index_decode's merge, the same
// code) on the logits of the range: keys of common/score_key.cuh (NaN as
// -inf, -0 as +0), three passes of 12-, 10- and 10-bit digits, then every
// key above the k-th in any order and of the keys equal to it the lowest
// positions. A range of at most stage_cap logits is read once into
// shared memory; a longer one (FILTER) is read twice, its k-th key's
// 12-bit bin staged as candidates, or (no FILTER, or too many
// candidates) five times from L2.
//
// Bytes per row: the range's logits read 1 (staged), 2 (filtered) or 5
// times (4 bytes each; nothing for a row of n <= topk), ks and ke (8),
// topk_idx written once (4 x topk). No FLOPs to speak of: integer
// histograms and scans (docs/kernels/dsa_index_topk.md).
// CUDA-graph safe: the grid is s_q, host-known.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/dsa_index_topk.cuh"
constexpr int THREADS = ST_P_THREADS;
// 1: a range longer than stage_cap stages its candidates (the k-th key's
// first-digit bin) in shared memory after one pass; 0: every pass reads
// the row.
constexpr int FILTER = ST_P_FILTER;

#include "params/dsa_index_topk.h"
#include "common/params_gate.cuh"
#include "common/radix_topk_row.cuh"
#include "common/pdl.cuh"

ST_PARAMS_GATE(st_dsa_index_topk_params)

static_assert(THREADS % 32 == 0 && (THREADS & (THREADS - 1)) == 0, "whole warps, a power of two");
static_assert(THREADS >= 64 && THREADS <= 1024, "the selection's warp counts fit one warp's scan");

// Dynamic shared memory: the range's keys when it has at most stage_cap
// logits; else (FILTER) the candidates' keys and positions, cand_cap of
// each.
extern "C" __global__ void __launch_bounds__(THREADS, 1) st_dsa_index_topk_main(const st_dsa_index_topk_params p) {
  extern __shared__ __align__(16) uint32_t s_sel[];
  __shared__ st_radix_smem<THREADS> sm;
  const int row = blockIdx.x;
  st_pdl_wait(); // common/pdl.cuh: nothing global before this
  const int lo = min(max(p.ks[row], 0), p.s_kv);
  const int hi = min(max(p.ke[row], 0), p.s_kv);
  const int n = hi > lo ? hi - lo : 0; // positions this row considers
  int32_t *out = p.topk_idx + (int64_t)row * p.out_stride;
  if (n <= p.topk) {
    for (int i = threadIdx.x; i < p.topk; i += THREADS) out[i] = i < n ? lo + i : -1;
    return;
  }
  // dsa_index_logits (an earlier kernel) wrote the logits: the row reads
  // them from L2.
  st_radix_topk_row<THREADS, FILTER>(p.logits + (int64_t)row * p.logit_stride + lo, n, p.topk, p.stage_cap, p.cand_cap,
                                     out, lo, s_sel, sm);
}
