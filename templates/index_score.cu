// index_score.cu - the prefill indexer's block scores with Hopper wgmma.
//
// score[h][i][j] = scale * max over the positions pos <= p_i of block j of
// dot(q[i][h], k[pos]), for the visible blocks j < nb(p_i) of query token i
// (p_i its absolute position); entries past nb are not written. The loop
// (tiles, chunks, the copying warp, the warpgroups' products and row
// maxima) is common/score_tile.cuh; this kernel stores each max.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/index_score.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int ROWS = ST_P_ROWS;
constexpr int WARPGROUPS = ST_P_WARPGROUPS;
constexpr int STAGES = ST_P_STAGES;

// The argument block first: it brings the fixed-width integer types the
// common headers use under NVRTC (no C library there).
#include "params/index_score.h"
#include "common/params_gate.cuh"
#include "common/score_tile.cuh"

ST_PARAMS_GATE(st_index_score_params)

extern "C" __global__ void __launch_bounds__(THREADS, 1) st_index_score_main(const __grid_constant__ st_index_score_params p) {
  extern __shared__ uint8_t s_raw[];
  st_score_tile t = {}; // set by st_score_blocks before any store
  auto store = [&](int tok, int h, int, int j, float mx) {
    p.score[(int64_t)h * p.score_stride_head + (int64_t)(t.start + tok) * p.score_stride_row + j] = mx * p.scale;
  };
  st_score_blocks(p, s_raw, &t, store);
}
