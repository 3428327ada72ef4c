/* decode_step.c - see decode_step.h. */
#include "decode_step.h"

#include <math.h>
#include <string.h>

static int measured(const st_step_row *r) { return r->us > 0 && r->peer_us > 0; }

static int same_field(const st_shape *a, const st_shape *b, const char *key) {
  const char *x = st_params_get(&a->params, key), *y = st_params_get(&b->params, key);
  return x && y && strcmp(x, y) == 0;
}

/* The fields an indexer row and its attention row share (the attention's
 * context and heads are its own: "any" context in the anchors). */
static int same_step(const st_shape *index, const st_shape *attn) {
  static const char *const keys[] = {"dtype", "B", "topk", "qlen", "lens"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!same_field(index, attn, keys[i])) return 0;
  return 1;
}

int st_decode_steps(const st_step_row *rows, int n, st_step_pair *pairs, int cap) {
  int found = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(rows[i].shape->op, "index_decode") || !measured(&rows[i])) continue;
    for (int j = 0; j < n; j++) {
      if (strcmp(rows[j].shape->op, "sparse_attn_decode") || !measured(&rows[j]) ||
          !same_step(rows[i].shape, rows[j].shape))
        continue;
      if (found < cap) {
        st_step_pair *p = &pairs[found];
        p->index_row = i;
        p->attn_row = j;
        p->us = rows[i].us + rows[j].us;
        p->peer_us = rows[i].peer_us + rows[j].peer_us;
        p->speedup = p->peer_us / p->us;
      }
      found++;
      break;
    }
  }
  return found;
}

double st_decode_step_geomean(const st_step_pair *pairs, int n) {
  if (n <= 0) return 0;
  double log_sum = 0;
  for (int i = 0; i < n; i++) log_sum += log(pairs[i].speedup);
  return exp(log_sum / n);
}
