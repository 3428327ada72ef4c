// index_score.cu - the prefill indexer's block scores with Hopper wgmma.
//
// score[h][i][j] = scale * max over the positions pos <= p_i of block j of
// dot(q[i][h], k[pos]), for the visible blocks j < nb(p_i) of query token i
// (p_i its absolute position); entries past nb are not written. The loop
// (tiles, chunks, the copying warp, the warpgroups' products and row
// maxima) is common/score_tile.cuh; this kernel stores each max.

constexpr int IS_FP8 = ${is_fp8};
constexpr int HEAD_DIM = ${head_dim};
constexpr int ROWS = ${rows};
constexpr int WARPGROUPS = ${warpgroups};
constexpr int STAGES = ${stages};

// The argument block first: it brings the fixed-width integer types the
// common headers use under NVRTC (no C library there).
#include "params/index_score.h"
#include "common/score_tile.cuh"

extern "C" __global__ void __launch_bounds__(THREADS, 1) st_index_score_main(const __grid_constant__ st_index_score_params p) {
  extern __shared__ uint8_t s_raw[];
  st_score_tile t = {}; // set by st_score_blocks before any store
  auto store = [&](int tok, int h, int, int j, float mx) {
    p.score[(int64_t)h * p.score_stride_head + (int64_t)(t.start + tok) * p.score_stride_row + j] = mx * p.scale;
  };
  st_score_blocks(p, s_raw, &t, store);
}
