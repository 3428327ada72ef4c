/* reference/block_select.h - the per-row core of the indexer's block
 * selection, shared by the references of index_decode and index_topk.
 *
 * A row is one (index head, query token): its scores s[0..nb) over the blocks
 * it sees (a block is 128 tokens), of which blocks [0, lo) and [hi, nb) are
 * forced, and want = min(topk, nb) ids to pick. NaN scores count as -inf. */
#ifndef ST_REFERENCE_BLOCK_SELECT_H
#define ST_REFERENCE_BLOCK_SELECT_H

#include <stddef.h>
#include <stdint.h>

/* Visible blocks and forced range of one row: blocks [0, lo) and [hi, nb) are
 * forced, want = min(topk, nb). All zero for a row that sees nothing. */
typedef struct st_ref_row_plan {
  int nb, lo, hi, want;
} st_ref_row_plan;

/* The plan of a query token at absolute position pos (< 0: sees nothing):
 * nb = min(pos / 128 + 1, max_blocks). */
st_ref_row_plan st_ref_block_plan(int pos, int max_blocks, int topk, int init_blocks, int local_blocks);

/* The reference selection of one row into out[0..topk): the forced blocks in
 * increasing order, then the others by score descending (ties: lower index
 * first), then -1. s holds at least p->nb scores. Never writes more than topk
 * ids, even if the forced blocks alone would be more (an invalid request). */
void st_ref_block_select_row(const st_ref_row_plan *p, const double *s, int topk, int32_t *out);

/* Checks one row of a kernel's ids g[0..topk) against the scores s by the
 * contract's rule: every id -1 or a visible block, no id twice, want ids in
 * all, the forced blocks present, and no left-out block scoring above a
 * chosen one by more than rel_tol * the row's largest finite |score|.
 * chosen is scratch of at least p->nb bytes. Returns 0 if the row passes,
 * else 1 with the reason (without a row prefix) in msg. *excess gets the
 * worst (left-out - chosen - tolerance) relative to the row's scale, 0 when
 * the row has no free choice; negative when the row passes with room. */
int st_ref_block_verify_row(const st_ref_row_plan *p, const double *s, const int32_t *g, int topk, double rel_tol,
                            unsigned char *chosen, double *excess, char *msg, size_t msg_cap);

#endif
