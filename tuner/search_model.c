/* search_model.c - the search model's history and rules (search_model.h). */
#include "search_model.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pooling levels, in the order their rules are asked. */
enum { BY_STRUCT, BY_FAMILY, NLEVELS };

/* st_variant_row's name, and so any key made from one. */
#define KEY_MAX 160

/* A struct's or family's time on one shape. */
typedef struct timed {
  char key[KEY_MAX];
  double us; /* the least ok time of its members; with none ok, the least other */
  int ok;    /* 0: none of its members ran correctly there */
} timed;

/* Sorted by key, one entry a key: found by bisection. */
typedef struct timed_set {
  timed *t;
  int n, cap;
} timed_set;

typedef struct shape_hist {
  st_shape shape; /* as measured */
  timed_set level[NLEVELS];
  double best; /* the least ok time, 0 while there is none: no evidence */
} shape_hist;

/* A shape measured before the one begun, as that one sees it. */
typedef struct neighbour {
  int hist; /* index into the model's history */
  double dist;
  double ref[NLEVELS]; /* the least ok time there of the keys that apply to the shape begun; 0: none */
} neighbour;

struct st_search_model {
  st_search_opts o;
  shape_hist *s; /* in the order first measured: ties in distance go to the earlier */
  int n, cap, last;
  int total; /* measurements added */
  int begun;
  st_shape shape;             /* the shape begun */
  timed_set applies[NLEVELS]; /* its structs and families (times unused) */
  neighbour *near;            /* nearest first, valid while near_total == total */
  int nnear, near_total;
};

st_search_opts st_search_default_opts(void) {
  return (st_search_opts){
      .by_struct = {ST_SEARCH_STRUCT_THRESHOLD, ST_SEARCH_STRUCT_NEIGHBOURS, ST_SEARCH_STRUCT_RADIUS},
      .by_family = {ST_SEARCH_FAMILY_THRESHOLD, ST_SEARCH_FAMILY_NEIGHBOURS, ST_SEARCH_FAMILY_RADIUS}};
}

/* The family: the name less its launch suffix. */
static void family_key(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%.*s", (int)strcspn(name, "/"), name);
}

static int is_kq_token(const char *t, size_t len) {
  if (len < 2 || (t[0] != 'k' && t[0] != 'q')) return 0;
  for (size_t i = 1; i < len; i++)
    if (!isdigit((unsigned char)t[i])) return 0;
  return 1;
}

/* The struct: the family less its kN and qN tokens. A family is made for
 * one topk capacity and one query count, so most are met on a shape or
 * two; their structs carry evidence across k and q. */
static void struct_key(const char *name, char *out, size_t cap) {
  char fam[KEY_MAX];
  family_key(name, fam, sizeof fam);
  size_t used = 0;
  int first = 1;
  out[0] = '\0';
  for (const char *t = fam;; t++) {
    const size_t len = strcspn(t, ".");
    if (!is_kq_token(t, len) && used < cap) {
      const int w = snprintf(out + used, cap - used, "%s%.*s", first ? "" : ".", (int)len, t);
      if (w > 0) used += (size_t)w;
      first = 0;
    }
    t += len;
    if (!*t) break;
  }
}

/* The index of `key` in `s`, else -1 - where it would go. */
static int set_find(const timed_set *s, const char *key) {
  int lo = 0, hi = s->n;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    const int c = strcmp(s->t[mid].key, key);
    if (c == 0) return mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1 - lo;
}

/* Keeps for `key` the better of what it has and (us, ok): an ok time
 * before any other, then the least. Returns 0, or -1 out of memory. */
static int set_put(timed_set *s, const char *key, double us, int ok) {
  int i = set_find(s, key);
  if (i >= 0) {
    timed *t = &s->t[i];
    if ((ok && !t->ok) || (ok == t->ok && us < t->us)) {
      t->us = us;
      t->ok = ok;
    }
    return 0;
  }
  if (s->n == s->cap) {
    const int cap = s->cap ? 2 * s->cap : 64;
    timed *t = realloc(s->t, sizeof *t * (size_t)cap);
    if (!t) return -1;
    s->t = t;
    s->cap = cap;
  }
  i = -1 - i;
  memmove(&s->t[i + 1], &s->t[i], sizeof *s->t * (size_t)(s->n - i));
  s->n++;
  timed *t = &s->t[i];
  snprintf(t->key, sizeof t->key, "%s", key);
  t->us = us;
  t->ok = ok;
  return 0;
}

st_search_model *st_search_model_new(const st_search_opts *o) {
  st_search_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->o = *o;
  m->near_total = -1;
  return m;
}

void st_search_model_free(st_search_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n; i++)
    for (int l = 0; l < NLEVELS; l++) free(m->s[i].level[l].t);
  for (int l = 0; l < NLEVELS; l++) free(m->applies[l].t);
  free(m->s);
  free(m->near);
  free(m);
}

static shape_hist *hist_of(st_search_model *m, const st_shape *shape) {
  if (m->last < m->n && strcmp(m->s[m->last].shape.key, shape->key) == 0) return &m->s[m->last];
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->s[i].shape.key, shape->key) == 0) return &m->s[m->last = i];
  if (m->n == m->cap) {
    const int cap = m->cap ? 2 * m->cap : 16;
    shape_hist *s = realloc(m->s, sizeof *s * (size_t)cap);
    if (!s) return NULL;
    m->s = s;
    m->cap = cap;
  }
  shape_hist *h = &m->s[m->last = m->n++];
  memset(h, 0, sizeof *h);
  h->shape = *shape;
  return h;
}

int st_search_model_add(st_search_model *m, const st_shape *shape, const char *name, const char *status, double us) {
  shape_hist *h = hist_of(m, shape);
  if (!h) return -1;
  const int ok = strcmp(status, "ok") == 0 && us > 0;
  char key[KEY_MAX];
  struct_key(name, key, sizeof key);
  if (set_put(&h->level[BY_STRUCT], key, us, ok) != 0) return -1;
  family_key(name, key, sizeof key);
  if (set_put(&h->level[BY_FAMILY], key, us, ok) != 0) return -1;
  if (ok && (h->best <= 0 || us < h->best)) h->best = us;
  m->total++;
  return 0;
}

int st_search_model_begin_shape(st_search_model *m, const st_shape *shape, const char *const *names, int n) {
  m->begun = 0;
  m->near_total = -1;
  m->shape = *shape;
  for (int l = 0; l < NLEVELS; l++) m->applies[l].n = 0;
  char key[KEY_MAX];
  for (int i = 0; i < n; i++) {
    struct_key(names[i], key, sizeof key);
    if (set_put(&m->applies[BY_STRUCT], key, 0, 0) != 0) return -1;
    family_key(names[i], key, sizeof key);
    if (set_put(&m->applies[BY_FAMILY], key, 0, 0) != 0) return -1;
  }
  m->begun = 1;
  return 0;
}

/* The least ok time in `there` of a key that is also in `applies`; 0: none. */
static double best_applying(const timed_set *there, const timed_set *applies) {
  double best = 0;
  for (int i = 0; i < there->n; i++) {
    const timed *t = &there->t[i];
    if (t->ok && (best <= 0 || t->us < best) && set_find(applies, t->key) >= 0) best = t->us;
  }
  return best;
}

/* m->near: the other shapes of the op with a correct time, nearest to the
 * shape begun first, each with its best among what applies to that shape. */
static int find_neighbours(st_search_model *m) {
  if (m->near_total == m->total) return 0;
  neighbour *near = realloc(m->near, sizeof *near * (size_t)(m->n + 1));
  if (!near) return -1;
  m->near = near;
  m->nnear = 0;
  for (int i = 0; i < m->n; i++) {
    const shape_hist *h = &m->s[i];
    if (h->best <= 0 || strcmp(h->shape.op, m->shape.op) || strcmp(h->shape.key, m->shape.key) == 0) continue;
    neighbour x = {.hist = i, .dist = st_search_distance(&m->shape, &h->shape)};
    for (int l = 0; l < NLEVELS; l++) x.ref[l] = best_applying(&h->level[l], &m->applies[l]);
    int j = m->nnear++;
    for (; j > 0 && near[j - 1].dist > x.dist; j--) near[j] = near[j - 1]; /* insertion: stable */
    near[j] = x;
  }
  m->near_total = m->total;
  return 0;
}

static size_t say(char *why, size_t cap, size_t used, const char *fmt, ...) {
  if (!why || used >= cap) return used;
  va_list ap;
  va_start(ap, fmt);
  const int w = vsnprintf(why + used, cap - used, fmt, ap);
  va_end(ap);
  return w > 0 ? used + (size_t)w : used;
}

/* 1 when `key` (a struct or a family) was slow on each of the rule's
 * nearest shapes where it ran, against what applies to the shape begun. */
static int slow_by(const st_search_model *m, int level, const char *key, char *why, size_t cap) {
  const st_search_rule *r = level == BY_STRUCT ? &m->o.by_struct : &m->o.by_family;
  if (r->neighbours < 1) return 0;
  size_t used = say(why, cap, 0, "%s %s:", level == BY_STRUCT ? "struct" : "family", key);
  int seen = 0;
  for (int k = 0; k < m->nnear; k++) {
    const neighbour *x = &m->near[k];
    if (x->dist > r->radius) break;
    const timed_set *there = &m->s[x->hist].level[level];
    const int i = set_find(there, key);
    if (i < 0 || x->ref[level] <= 0) continue;
    const timed *t = &there->t[i];
    const double ratio = t->ok ? t->us / x->ref[level] : INFINITY;
    if (ratio < r->threshold) return 0;
    used = t->ok ? say(why, cap, used, "%s %.2fx the best at distance %.2f", seen ? "," : "", ratio, x->dist)
                 : say(why, cap, used, "%s stopped or wrong at distance %.2f", seen ? "," : "", x->dist);
    if (++seen == r->neighbours) return 1;
  }
  return 0;
}

int st_search_model_skip(st_search_model *m, const char *name, char *why, size_t cap) {
  if (why && cap) why[0] = '\0';
  if (!m->begun || find_neighbours(m) != 0) return 0;
  char key[KEY_MAX];
  struct_key(name, key, sizeof key);
  if (slow_by(m, BY_STRUCT, key, why, cap)) return 1;
  family_key(name, key, sizeof key);
  if (slow_by(m, BY_FAMILY, key, why, cap)) return 1;
  if (why && cap) why[0] = '\0';
  return 0;
}
