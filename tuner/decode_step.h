/* decode_step.h - one decode step of the anchors (indexer plus attention)
 * from bench rows: the figure compared with the peer is the geometric
 * mean, over the decode rows, of the peer's two kernels' time over ours
 * (docs/method.md).
 *
 * An index_decode row pairs with the first sparse_attn_decode row of the
 * same dtype, batch B, topk, qlen and lens (the attention rows hold at any
 * context, so one attention row may serve several indexer rows). Rows that
 * failed take no part; a pair whose rows lack a peer time (none known, or
 * one measured on another device) is a step without a speed-up. */
#ifndef ST_DECODE_STEP_H
#define ST_DECODE_STEP_H

#include <stdio.h>

#include "generator.h"

typedef struct st_step_row {
  const st_shape *shape; /* op and shape parameters */
  double us, peer_us;    /* ours and the peer's; <= 0: not measured (here) */
} st_step_row;

typedef struct st_step_pair {
  int index_row, attn_row; /* positions in the rows given */
  double us, peer_us;      /* the two rows added; peer_us 0: no peer time */
  double speedup;          /* peer_us / us; 0: no peer time */
} st_step_pair;

/* Fills up to `cap` pairs in index-row order; returns how many there are
 * (which may exceed cap). */
int st_decode_steps(const st_step_row *rows, int n, st_step_pair *pairs, int cap);

/* The geometric mean of the speed-ups of the pairs that have one; 0 for
 * none. *counted (if not NULL) is how many had one. */
double st_decode_step_geomean(const st_step_pair *pairs, int n, int *counted);

/* Writes the pairs and their geometric mean: a table, or (json) one line
 * {"decode_step":{"geomean":..,"pairs":[{"index":key,"attention":key,"us",
 * "peer_us","speedup"}, ..]}}. Nothing for no pairs. */
void st_decode_step_print(FILE *f, const st_step_row *rows, const st_step_pair *pairs, int np, int json);

#endif
