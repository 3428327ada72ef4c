#include "reference/block_select.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define BLOCK_TOKENS 128

st_ref_row_plan st_ref_block_plan(int pos, int max_blocks, int topk, int init_blocks, int local_blocks) {
  st_ref_row_plan p = {0, 0, 0, 0};
  if (pos < 0) return p;
  p.nb = pos / BLOCK_TOKENS + 1;
  if (p.nb > max_blocks) p.nb = max_blocks;
  p.lo = init_blocks < p.nb ? init_blocks : p.nb;
  p.hi = p.nb - local_blocks > p.lo ? p.nb - local_blocks : p.lo;
  p.want = topk < p.nb ? topk : p.nb;
  return p;
}

/* Is block a ranked before block b: higher score first, ties lower index.
 * A strict total order (NaN is -inf), so the top of it is unique. */
static int ranks_before(double sa, int a, double sb, int b) {
  if (isnan(sa)) sa = -INFINITY;
  if (isnan(sb)) sb = -INFINITY;
  return sa > sb || (sa == sb && a < b);
}

void st_ref_block_select_row(const st_ref_row_plan *p, const double *s, int topk, int32_t *out) {
  int n = 0;
  for (int j = 0; j < p->lo && n < topk; j++) out[n++] = j;
  for (int j = p->hi; j < p->nb && n < topk; j++) out[n++] = j;
  /* The free picks: out[n..n+kept) stays sorted best first, a newcomer is
   * inserted and the weakest dropped when full. Random scores insert rarely,
   * so a row costs about (hi - lo) comparisons. */
  const int free_want = (p->want < topk ? p->want : topk) - n;
  int32_t *top = out + n;
  int kept = 0;
  for (int j = p->lo; j < p->hi && free_want > 0; j++) {
    if (kept == free_want && !ranks_before(s[j], j, s[top[kept - 1]], top[kept - 1])) continue;
    int at = kept < free_want ? kept++ : free_want - 1;
    for (; at > 0 && ranks_before(s[j], j, s[top[at - 1]], top[at - 1]); at--) top[at] = top[at - 1];
    top[at] = j;
  }
  for (n += kept; n < topk; n++) out[n] = -1;
}

int st_ref_block_verify_row(const st_ref_row_plan *p, const double *s, const int32_t *g, int topk, double rel_tol,
                            unsigned char *chosen, double *excess, char *msg, size_t msg_cap) {
  *excess = 0;
  if (p->nb > 0) memset(chosen, 0, (size_t)p->nb);
  int count = 0, invalid = -2, dup = -2;
  for (int i = 0; i < topk; i++) {
    if (g[i] == -1) continue;
    if (g[i] < 0 || g[i] >= p->nb) {
      invalid = g[i];
      break;
    }
    if (chosen[g[i]]) dup = g[i];
    chosen[g[i]] = 1;
    count++;
  }
  if (invalid != -2) {
    snprintf(msg, msg_cap, "id %d is not a visible block (0..%d)", invalid, p->nb - 1);
    return 1;
  }
  if (dup != -2) {
    snprintf(msg, msg_cap, "block %d selected twice", dup);
    return 1;
  }
  if (count != p->want) {
    snprintf(msg, msg_cap, "%d ids, expected min(topk=%d, nb=%d)=%d", count, topk, p->nb, p->want);
    return 1;
  }
  int missing = -1;
  for (int j = 0; j < p->nb; j++)
    if ((j < p->lo || j >= p->hi) && !chosen[j]) missing = j;
  if (missing >= 0) {
    snprintf(msg, msg_cap, "forced block %d missing", missing);
    return 1;
  }
  /* No left-out block may beat a chosen one beyond rounding. */
  double scale = 0, min_in = INFINITY, max_out = -INFINITY;
  for (int j = 0; j < p->nb; j++) {
    const double v = isnan(s[j]) ? -INFINITY : s[j];
    if (isfinite(v) && fabs(v) > scale) scale = fabs(v);
    if (j < p->lo || j >= p->hi) continue;
    if (chosen[j] && v < min_in) min_in = v;
    if (!chosen[j] && v > max_out) max_out = v;
  }
  if (min_in == INFINITY || max_out == -INFINITY) return 0; /* nothing chosen or nothing left out */
  const double unit = scale > 0 ? scale : 1.0, tol = rel_tol * unit;
  *excess = (max_out - min_in - tol) / unit;
  if (max_out > min_in + tol) {
    snprintf(msg, msg_cap, "a left-out block scores %.9g, above a chosen one at %.9g (tolerance %.3g)", max_out, min_in,
             tol);
    return 1;
  }
  return 0;
}
