#include "reference/dsa_index_topk.h"

#include <stdio.h>
#include <stdlib.h>

#include "reference/block_select.h"

void st_ref_dsa_index_topk_range(const st_ref_dsa_index_topk *in, int i, int *lo, int *hi) {
  int a = in->ks[i], b = in->ke[i];
  a = a < 0 ? 0 : a > in->s_kv ? in->s_kv : a;
  b = b < 0 ? 0 : b > in->s_kv ? in->s_kv : b;
  *lo = a;
  *hi = b > a ? b : a;
}

/* A range as the block selection's row (reference/block_select.h): each
 * "block" there is one position of the range here, counted from its start,
 * none forced; its logits widened into s[0..n). */
static st_ref_row_plan row_plan(const st_ref_dsa_index_topk *in, int i, double *s, int *lo) {
  int hi;
  st_ref_dsa_index_topk_range(in, i, lo, &hi);
  const int n = hi - *lo;
  const float *row = in->logits + (int64_t)i * in->logit_stride + *lo;
  for (int j = 0; j < n; j++) s[j] = row[j];
  return (st_ref_row_plan){.nb = n, .lo = 0, .hi = n, .want = in->topk < n ? in->topk : n};
}

int st_ref_dsa_index_topk_select(const st_ref_dsa_index_topk *in, int32_t *topk_idx) {
  double *s = malloc(sizeof(double) * ((size_t)in->s_kv + 1));
  if (!s) return -1;
  for (int i = 0; i < in->s_q; i++) {
    int lo;
    const st_ref_row_plan p = row_plan(in, i, s, &lo);
    int32_t *out = topk_idx + (int64_t)i * in->topk;
    if (p.nb <= in->topk) { /* the whole range, in order, without a selection */
      for (int j = 0; j < in->topk; j++) out[j] = j < p.nb ? lo + j : -1;
      continue;
    }
    st_ref_block_select_row(&p, s, in->topk, out);
    for (int j = 0; j < in->topk; j++)
      if (out[j] >= 0) out[j] += lo;
  }
  free(s);
  return 0;
}

/* Row i's ids in rel[0..topk) counted from the range's start, after the
 * checks the shared row check cannot word as positions: every id -1 or
 * inside the range, the ids first and the -1s after them, and a short
 * range in order. Returns 0, or 1 with the reason in msg. */
static int check_positions(const st_ref_dsa_index_topk *in, const st_ref_row_plan *p, int lo, const int32_t *g,
                           int32_t *rel, char *msg, size_t msg_cap) {
  for (int j = 0; j < in->topk; j++) {
    if (g[j] != -1 && (g[j] < lo || g[j] >= lo + p->nb)) {
      snprintf(msg, msg_cap, "slot %d holds %d, neither -1 nor a position of the range %d..%d", j, g[j], lo,
               lo + p->nb - 1);
      return 1;
    }
    if ((j < p->want) != (g[j] != -1)) {
      snprintf(msg, msg_cap, "slot %d holds %d: the first %d slots hold positions, the rest -1", j, g[j], p->want);
      return 1;
    }
    if (p->nb <= in->topk && j < p->nb && g[j] != lo + j) {
      snprintf(msg, msg_cap, "slot %d holds %d: a range of %d <= topk positions is written in order from %d", j, g[j],
               p->nb, lo);
      return 1;
    }
    rel[j] = g[j] == -1 ? -1 : g[j] - lo;
  }
  return 0;
}

int st_ref_dsa_index_topk_verify(const st_ref_dsa_index_topk *in, const int32_t *got, int64_t got_stride_row, char *msg,
                                 size_t msg_cap) {
  double *s = malloc(sizeof(double) * ((size_t)in->s_kv + 1));
  unsigned char *chosen = malloc((size_t)in->s_kv + 1);
  int32_t *rel = malloc(sizeof(int32_t) * (size_t)in->topk);
  int bad = 0;
  if (!s || !chosen || !rel) {
    snprintf(msg, msg_cap, "out of host memory");
    bad = -1;
    goto cleanup;
  }
  for (int i = 0; i < in->s_q; i++) {
    int lo;
    const st_ref_row_plan p = row_plan(in, i, s, &lo);
    const int32_t *g = got + (int64_t)i * got_stride_row;
    char why[256];
    double excess = 0;
    /* Exact: the logits are the op's input, no rounding between. */
    int failed = check_positions(in, &p, lo, g, rel, why, sizeof why);
    if (!failed) failed = st_ref_block_verify_row(&p, s, rel, in->topk, 0.0, chosen, &excess, why, sizeof why);
    if (!failed) continue;
    /* The shared row check says "block" for a position counted from the
     * range's start. */
    if (!bad)
      snprintf(msg, msg_cap, "row %d (range %d..%d, %d positions; a block here is a position minus %d): %s", i, lo,
               lo + p.nb, p.nb, lo, why);
    bad++;
  }
cleanup:
  free(s);
  free(chosen);
  free(rel);
  return bad;
}
