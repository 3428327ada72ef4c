/* step_graph.h - one decode step timed as an engine's graph runs it (bench).
 *
 * decode_step.h adds an indexer row's time and an attention row's, as the
 * anchors measured the peer: each op in a graph of its own. An engine
 * captures both in one graph on one stream, where the attention waits for
 * the indexer; there programmatic dependent launch (the args' `pdl`,
 * sparsetune.h) can place the attention's CTAs during the indexer's tail.
 * This times that graph through the runtime's dispatch, plain and with pdl
 * on both launches. Each op reads its own case's inputs (the attention its
 * own topk_idx, of the same size as the indexer's output), so the bytes are
 * those of the two rows; the order is the graph's edge either way. */
#ifndef ST_STEP_GRAPH_H
#define ST_STEP_GRAPH_H

#include <stdint.h>

#include "cuda_driver.h"
#include "device_info.h"
#include "error.h"
#include "generator.h"
#include "sparsetune.h"

typedef struct st_step_graph {
  double plain_us, plain_spread; /* median of the replays, (max - min) / median */
  double pdl_us, pdl_spread;
} st_step_graph;

/* Times index_decode on `index` then sparse_attn_decode on `attn` in one
 * CUDA graph on `stream`, launched through `rt` (both cases verified first,
 * each alone): CUDA-graph replays, median of 5 x 40 after >= 200 ms of
 * warm-up, as bench times a row. */
st_status st_step_graph_time(const st_cu *cu, const st_device_info *dev, st_handle *rt, CUstream stream,
                             const st_shape *index, const st_shape *attn, uint64_t seed, int threads,
                             st_step_graph *out, st_err *err);

#endif
