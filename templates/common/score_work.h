/* score_work.h - how many (tile, visible block) pairs the first tiles of one
 * request hold in the prefill indexer's scoring loop, in closed form.
 *
 * The balanced schedule of common/score_tile.cuh numbers every such pair of
 * a batch and gives each CTA an equal run of them; every CTA locates its run
 * by these sums, so they must cost O(1) per request, not a loop over tiles
 * (a 32K-token request has 256 of them). Plain C, compiled by NVRTC for the
 * kernels and by the host C compiler for the test that checks the sums
 * against a count (tests/test_index_score_launcher.c).
 *
 * A request's tiles are taken in position order: tile i holds its query
 * tokens [i * tokens, min((i + 1) * tokens, qlen)); the last token of a tile
 * at absolute position pos sees min(pos / 128 + 1, max_blocks) blocks. */
#ifndef ST_SCORE_WORK_H
#define ST_SCORE_WORK_H

#include "common/st_types.h"

#ifdef __CUDACC__
#define ST_SCORE_WORK_FN __host__ __device__ __forceinline__
#else
#define ST_SCORE_WORK_FN static inline
#endif

/* sum of floor(x / g) over x = 0 .. n - 1 (n >= 0, g >= 1): u whole groups
 * of g values 0 .. u - 1, then v values equal to u. */
ST_SCORE_WORK_FN int64_t st_floor_prefix(int64_t n, int64_t g) {
  const int64_t u = n / g, v = n % g;
  return g * (u * (u - 1) / 2) + v * u;
}

/* sum of floor((c + k * t) / 128) over k = 1 .. K, for c >= 0 and t a power
 * of two. With t < 128 (t divides 128): c = q t + r with r < t, and adding
 * r < t to a multiple of t never crosses a multiple of 128, so each term is
 * floor((q + k) / (128 / t)). */
ST_SCORE_WORK_FN int64_t st_floor_line_sum(int64_t c, int64_t t, int64_t K) {
  if (K <= 0) return 0;
  if (t >= 128) return K * (c / 128) + (t / 128) * (K * (K + 1) / 2);
  const int64_t g = 128 / t, q = c / t;
  return st_floor_prefix(q + K + 1, g) - st_floor_prefix(q + 1, g);
}

/* Pairs of the first m tiles (0 <= m <= ceil(qlen / tokens)) of a request
 * whose first query token sits at position pos0 >= 0. Tile i < the last
 * ends at pos0 + (i + 1) tokens - 1 and sees
 * min(floor((pos0 + 127 + (i + 1) tokens) / 128), max_blocks) blocks; the
 * clamp holds from the first k = i + 1 whose sum passes 128 max_blocks + 127. */
ST_SCORE_WORK_FN int64_t st_score_tiles_work(int64_t pos0, int64_t qlen, int64_t tokens, int64_t max_blocks,
                                             int64_t m) {
  if (qlen <= 0 || m <= 0 || pos0 < 0) return 0;
  const int64_t ntiles = (qlen + tokens - 1) / tokens;
  const int64_t full = m < ntiles ? m : ntiles - 1; /* tiles of `tokens` tokens, the last excluded */
  const int64_t c = pos0 + 127, room = 128 * max_blocks + 127 - c;
  int64_t unclamped = room < 0 ? 0 : room / tokens;
  if (unclamped > full) unclamped = full;
  int64_t w = st_floor_line_sum(c, tokens, unclamped) + (full - unclamped) * max_blocks;
  if (m >= ntiles) {
    const int64_t last = (pos0 + qlen - 1) / 128 + 1;
    w += last < max_blocks ? last : max_blocks;
  }
  return w;
}

#endif
