#include "search_model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/case_inputs.h"

typedef struct tried {
  char id[40];
  double us; /* ok: the time; else 0 */
  int ok;    /* 0: stopped by the probe, wrong or failed */
} tried;

typedef struct shape_hist {
  st_shape shape;   /* as tried */
  st_params fields; /* what distances are measured on (features()) */
  tried *t;
  int n, cap, sorted;
  double best; /* the least ok time, 0 while there is none */
} shape_hist;

struct st_search_model {
  st_search_opts o;
  shape_hist *s;
  int n, cap;
  /* The neighbours of the last shape asked about, nearest first, while
   * the history has not grown since. */
  char query[sizeof(((st_shape *)0)->key)];
  int query_seen; /* total measurements when computed */
  int total;
  int *order;
  double *dist;
  int norder;
};

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

st_search_model *st_search_model_new(const st_search_opts *o) {
  st_search_model *m = calloc(1, sizeof *m);
  if (m) m->o = *o;
  return m;
}

void st_search_model_free(st_search_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n; i++) free(m->s[i].t);
  free(m->s);
  free(m->order);
  free(m->dist);
  free(m);
}

static shape_hist *hist_of(st_search_model *m, const st_shape *shape) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->s[i].shape.key, shape->key) == 0) return &m->s[i];
  if (m->n == m->cap) {
    const int cap = m->cap ? 2 * m->cap : 16;
    shape_hist *s = realloc(m->s, sizeof *s * (size_t)cap);
    if (!s) return NULL;
    m->s = s;
    m->cap = cap;
  }
  shape_hist *h = &m->s[m->n++];
  memset(h, 0, sizeof *h);
  h->shape = *shape;
  features(shape, &h->fields);
  return h;
}

int st_search_model_add(st_search_model *m, const st_shape *shape, const char *variant_id, const char *status,
                        double us) {
  shape_hist *h = hist_of(m, shape);
  if (!h) return -1;
  if (h->n == h->cap) {
    const int cap = h->cap ? 2 * h->cap : 64;
    tried *t = realloc(h->t, sizeof *t * (size_t)cap);
    if (!t) return -1;
    h->t = t;
    h->cap = cap;
  }
  tried *t = &h->t[h->n++];
  memset(t, 0, sizeof *t);
  snprintf(t->id, sizeof t->id, "%s", variant_id);
  t->ok = strcmp(status, "ok") == 0 && us > 0;
  t->us = t->ok ? us : 0;
  if (t->ok && (h->best <= 0 || us < h->best)) h->best = us;
  h->sorted = 0;
  m->total++;
  return 0;
}

static int by_id(const void *a, const void *b) { return strcmp(((const tried *)a)->id, ((const tried *)b)->id); }

static const tried *find(shape_hist *h, const char *id) {
  if (!h->sorted) {
    qsort(h->t, (size_t)h->n, sizeof *h->t, by_id);
    h->sorted = 1;
  }
  tried key;
  memset(&key, 0, sizeof key);
  snprintf(key.id, sizeof key.id, "%s", id);
  return bsearch(&key, h->t, (size_t)h->n, sizeof *h->t, by_id);
}

/* m->order: the other shapes of the op within the radius, nearest first. */
static int neighbours_of(st_search_model *m, const st_shape *shape) {
  if (m->order && m->query_seen == m->total && strcmp(m->query, shape->key) == 0) return 0;
  int *order = calloc((size_t)m->n + 1, sizeof *order);
  double *dist = calloc((size_t)m->n + 1, sizeof *dist);
  if (!order || !dist) {
    free(order);
    free(dist);
    return -1;
  }
  free(m->order);
  free(m->dist);
  m->order = order;
  m->dist = dist;
  m->norder = 0;
  st_params f;
  features(shape, &f);
  int n = 0;
  for (int i = 0; i < m->n; i++) {
    const shape_hist *h = &m->s[i];
    if (strcmp(h->shape.op, shape->op) || strcmp(h->shape.key, shape->key) == 0 || h->best <= 0) continue;
    const double d = params_distance(&f, &h->fields);
    if (d > m->o.radius) continue;
    int j = n++;
    for (; j > 0 && dist[j - 1] > d; j--) { /* insertion: stable, nearest first */
      dist[j] = dist[j - 1];
      order[j] = order[j - 1];
    }
    dist[j] = d;
    order[j] = i;
  }
  m->norder = n;
  m->query_seen = m->total;
  snprintf(m->query, sizeof m->query, "%s", shape->key);
  return 0;
}

int st_search_model_skip(st_search_model *m, const st_shape *shape, const char *variant_id, char *why,
                         size_t cap) {
  if (why && cap) why[0] = '\0';
  if (m->o.neighbours < 1 || neighbours_of(m, shape) != 0) return 0;
  int seen = 0;
  size_t used = 0;
  for (int k = 0; k < m->norder && seen < m->o.neighbours; k++) {
    shape_hist *h = &m->s[m->order[k]];
    const tried *t = find(h, variant_id);
    if (!t) continue;
    const double ratio = t->ok ? t->us / h->best : INFINITY;
    if (ratio < m->o.threshold) return 0;
    if (why && used < cap) {
      const int w = isinf(ratio) ? snprintf(why + used, cap - used, "%sstopped or wrong at distance %.2f",
                                            seen ? ", " : "", m->dist[k])
                                 : snprintf(why + used, cap - used, "%s%.2fx the best at distance %.2f",
                                            seen ? ", " : "", ratio, m->dist[k]);
      if (w > 0) used += (size_t)w;
    }
    seen++;
  }
  return seen == m->o.neighbours;
}

int st_search_replay(const st_search_opts *o, const st_shape *shapes, int nshapes, const st_search_pair *pairs,
                     int npairs, st_search_replayed *out) {
  st_search_model *m = st_search_model_new(o);
  char *kept = calloc((size_t)npairs + 1, 1);
  int rc = m && kept ? 0 : -1;
  for (int i = 0; i < nshapes && rc == 0; i++) {
    st_search_replayed *r = &out[i];
    memset(r, 0, sizeof *r);
    for (int j = 0; j < npairs; j++) {
      const st_search_pair *p = &pairs[j];
      if (p->shape != i) continue;
      r->pairs++;
      kept[j] = p->is_default || !st_search_model_skip(m, &shapes[i], p->variant_id, NULL, 0);
      if (!kept[j]) r->left_out++;
      if (strcmp(p->status, "ok") || p->us <= 0) continue;
      if (r->best_us <= 0 || p->us < r->best_us) r->best_us = p->us;
      if (kept[j] && (r->kept_us <= 0 || p->us < r->kept_us)) r->kept_us = p->us;
    }
    /* The model learns only what would have run. */
    for (int j = 0; j < npairs && rc == 0; j++)
      if (pairs[j].shape == i && kept[j] && st_search_model_add(m, &shapes[i], pairs[j].variant_id, pairs[j].status,
                                                                pairs[j].us) != 0)
        rc = -1;
  }
  free(kept);
  st_search_model_free(m);
  return rc;
}

