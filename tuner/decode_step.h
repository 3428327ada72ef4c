/* decode_step.h - one decode step of the anchors (indexer plus attention)
 * from bench rows: the target of issue #3 and ../shared/anchors.md is the
 * geometric mean, over the decode rows, of the peer's two kernels' time
 * over ours.
 *
 * An index_decode row pairs with the first sparse_attn_decode row of the
 * same dtype, batch B, topk, qlen and lens (the attention rows hold at any
 * context, so one attention row may serve several indexer rows). Rows that
 * failed or have no peer time take no part. */
#ifndef ST_DECODE_STEP_H
#define ST_DECODE_STEP_H

#include <stdio.h>

#include "generator.h"

typedef struct st_step_row {
  const st_shape *shape; /* op and shape parameters */
  double us, peer_us;    /* ours and the peer's; <= 0: not measured */
} st_step_row;

typedef struct st_step_pair {
  int index_row, attn_row; /* positions in the rows given */
  double us, peer_us;      /* the two rows added */
  double speedup;          /* peer_us / us */
} st_step_pair;

/* Fills up to `cap` pairs in index-row order; returns how many there are
 * (which may exceed cap). */
int st_decode_steps(const st_step_row *rows, int n, st_step_pair *pairs, int cap);

/* The geometric mean of the pairs' speed-ups; 0 for none. */
double st_decode_step_geomean(const st_step_pair *pairs, int n);

/* Writes the pairs and their geometric mean: a table, or (json) one line
 * {"decode_step":{"geomean":..,"pairs":[{"index":key,"attention":key,"us",
 * "peer_us","speedup"}, ..]}}. Nothing for no pairs. */
void st_decode_step_print(FILE *f, const st_step_row *rows, const st_step_pair *pairs, int np, int json);

#endif
