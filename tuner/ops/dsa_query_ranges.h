/* ops/dsa_query_ranges.h - each query token's visible kv rows [ks, ke) of
 * a DeepSeek-V3.2 prefill batch "q_len:prefix;...", for the indexer's
 * prefill harnesses (dsa_index_logits, dsa_index_topk): query t of a
 * request sees its request's rows up to its own position (causal, after
 * the prefix), rows numbered over the whole batch. */
#ifndef ST_OPS_DSA_QUERY_RANGES_H
#define ST_OPS_DSA_QUERY_RANGES_H

#include <stdint.h>

#include "error.h"
#include "params.h"

/* With edge ranges, every ST_DSA_EDGE_RANGE_EVERY-th query gets one of six
 * edge ranges instead of its own: reversed, past both ends, empty, the last
 * row and beyond, from below 0, everything. */
#define ST_DSA_EDGE_RANGE_EVERY 7

/* Reads the shape's `reqs`, checks that they hold s_q query tokens and s_kv
 * rows, and allocates and fills *ks and *ke ([s_q] each; the caller frees
 * them, also on failure). */
st_status st_dsa_query_ranges(const st_params *shape, int s_q, int s_kv, int edge_ranges, int32_t **ks, int32_t **ke,
                              st_err *err);

#endif
