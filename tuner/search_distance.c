/* search_distance.c - how far apart two shapes of one op are, for the
 * search model's neighbours (search_model.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/case_inputs.h"
#include "search_model.h"

/* A shape's fields with a prefill batch's `reqs` text replaced by its
 * numbers (requests, query tokens, longest context): two batches of
 * similar size are near, whatever their text. */
static void features(const st_shape *shape, st_params *out) {
  *out = (st_params){0};
  st_err err = {{0}};
  for (int i = 0; i < shape->params.n; i++) {
    const st_param *p = &shape->params.p[i];
    if (strcmp(p->key, "reqs") == 0) {
      int32_t *cu = NULL, *seq = NULL;
      int R = 0, total_q = 0, max_ctx = 0;
      const st_status s = st_case_requests(p->val, &cu, &seq, &R, &total_q, &max_ctx, &err);
      free(cu);
      free(seq);
      if (s == ST_OK && st_params_set_int(out, "reqs.requests", R, &err) == ST_OK &&
          st_params_set_int(out, "reqs.q", total_q, &err) == ST_OK &&
          st_params_set_int(out, "reqs.context", max_ctx, &err) == ST_OK)
        continue;
    }
    if (st_params_set(out, p->key, p->val, &err) != ST_OK) return; /* full: the rest counts as missing */
  }
}

static double field_distance(const char *a, const char *b) {
  long long x, y;
  if (st_params_whole_number(a, &x) && st_params_whole_number(b, &y) && x >= 0 && y >= 0)
    return fabs(log2(((double)x + 1.0) / ((double)y + 1.0)));
  return strcmp(a, b) ? 1.0 : 0.0;
}

static double params_distance(const st_params *a, const st_params *b) {
  double d = 0;
  for (int i = 0; i < a->n; i++) {
    const char *v = st_params_get(b, a->p[i].key);
    d += v ? field_distance(a->p[i].val, v) : 1.0;
  }
  for (int i = 0; i < b->n; i++)
    if (!st_params_get(a, b->p[i].key)) d += 1.0;
  return d;
}

double st_search_distance(const st_shape *a, const st_shape *b) {
  if (strcmp(a->op, b->op)) return INFINITY;
  st_params fa, fb;
  features(a, &fa);
  features(b, &fb);
  return params_distance(&fa, &fb);
}
