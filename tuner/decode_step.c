/* decode_step.c - see decode_step.h. */
#include "decode_step.h"

#include <math.h>
#include <string.h>

#include "report.h"

static int measured(const st_step_row *r) { return r->us > 0; }

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
        /* Both peer times, or no comparison: half a peer step is no step. */
        const int peer = rows[i].peer_us > 0 && rows[j].peer_us > 0;
        p->peer_us = peer ? rows[i].peer_us + rows[j].peer_us : 0;
        p->speedup = peer ? p->peer_us / p->us : 0;
      }
      found++;
      break;
    }
  }
  return found;
}

double st_decode_step_geomean(const st_step_pair *pairs, int n, int *counted) {
  double log_sum = 0;
  int c = 0;
  for (int i = 0; i < n; i++) {
    if (pairs[i].speedup <= 0) continue;
    log_sum += log(pairs[i].speedup);
    c++;
  }
  if (counted) *counted = c;
  return c ? exp(log_sum / c) : 0;
}

void st_decode_step_print(FILE *f, const st_step_row *rows, const st_step_pair *pairs, int np, int json) {
  if (np <= 0) return;
  int counted = 0;
  const double g = st_decode_step_geomean(pairs, np, &counted);
  if (json) {
    fprintf(f, "{\"decode_step\":{\"geomean\":%.4f,\"pairs\":[", g);
    for (int k = 0; k < np; k++) {
      const st_step_pair *p = &pairs[k];
      fprintf(f, "%s{\"index\":", k ? "," : "");
      st_json_str(f, rows[p->index_row].shape->key);
      fprintf(f, ",\"attention\":");
      st_json_str(f, rows[p->attn_row].shape->key);
      fprintf(f, ",\"us\":%.3f,\"peer_us\":%.2f,\"speedup\":%.3f}", p->us, p->peer_us, p->speedup);
    }
    fprintf(f, "]}}\n");
    return;
  }
  fprintf(f, "one decode step (index_decode + sparse_attn_decode rows of the same dtype, B, topk, qlen and lens):\n");
  for (int k = 0; k < np; k++) {
    const st_step_pair *p = &pairs[k];
    const st_params *ps = &rows[p->index_row].shape->params;
    const char *dtype = st_params_get(ps, "dtype"), *B = st_params_get(ps, "B"), *ctx = st_params_get(ps, "ctx");
    fprintf(f, "  %-4s B=%-4s ctx=%-7s %9.2f us (%.2f + %.2f)", dtype, B, ctx ? ctx : "-", p->us,
            rows[p->index_row].us, rows[p->attn_row].us);
    if (p->speedup > 0)
      fprintf(f, "  peer %8.1f  %.2fx\n", p->peer_us, p->speedup);
    else
      fprintf(f, "  (no peer time on this device)\n");
  }
  if (counted)
    fprintf(f, "  geometric mean over %d rows: %.2fx the peer\n", counted, g);
  else
    fprintf(f, "  no speed-up: the peer was not timed on this device\n");
}
