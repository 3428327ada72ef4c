#include "winners.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_entry(const void *a, const void *b, void *base) {
  const st_win_input *in = base;
  const st_win_input *x = &in[*(const int *)a], *y = &in[*(const int *)b];
  int c = strcmp(x->dispatch_key, y->dispatch_key);
  if (!c) c = strcmp(x->variant_id, y->variant_id);
  if (!c) c = strcmp(x->shape_key, y->shape_key);
  return c;
}

static int index_of(const char **names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], s)) return i;
  return -1;
}

/* Picks the winner of one key from entries idx[0..m), sorted by variant. */
static int pick_key(const st_win_input *in, const int *idx, int m, st_win_result *r) {
  const char **shapes = malloc(sizeof *shapes * (size_t)m);
  double *best = malloc(sizeof *best * (size_t)m);
  int *slot = malloc(sizeof *slot * (size_t)m); /* entry idx[i]'s shape: shapes[slot[i]] */
  if (!shapes || !best || !slot) {
    free(shapes);
    free(best);
    free(slot);
    return -1;
  }
  int ns = 0;
  for (int i = 0; i < m; i++) {
    const st_win_input *e = &in[idx[i]];
    int s = index_of(shapes, ns, e->shape_key);
    if (s < 0) {
      s = ns++;
      shapes[s] = e->shape_key;
      best[s] = 0;
    }
    slot[i] = s;
    if (e->us > 0 && (best[s] <= 0 || e->us < best[s])) best[s] = e->us;
  }
  memset(r, 0, sizeof *r);
  snprintf(r->dispatch_key, sizeof r->dispatch_key, "%s", in[idx[0]].dispatch_key);
  r->nshapes = ns;
  /* Walk the runs of one variant. */
  for (int i = 0; i < m;) {
    int j = i;
    int covered = 0, is_default = 0;
    double regret = 0, worst = 0;
    while (j < m && !strcmp(in[idx[j]].variant_id, in[idx[i]].variant_id)) {
      const st_win_input *e = &in[idx[j]];
      if (e->us > 0) {
        const int s = slot[j];
        covered++;
        if (e->us / best[s] > regret) regret = e->us / best[s];
        if (e->us > worst) worst = e->us;
      }
      is_default |= e->is_default;
      j++;
    }
    if (covered == ns) {
      const char *vid = in[idx[i]].variant_id;
      if (!r->variant_id[0] || regret < r->regret || (regret == r->regret && worst < r->worst_us)) {
        snprintf(r->variant_id, sizeof r->variant_id, "%s", vid);
        r->regret = regret;
        r->worst_us = worst;
      }
      if (is_default && (!r->default_id[0] || worst < r->default_worst_us)) {
        snprintf(r->default_id, sizeof r->default_id, "%s", vid);
        r->default_worst_us = worst;
      }
    }
    i = j;
  }
  free(shapes);
  free(best);
  free(slot);
  return 0;
}

int st_pick_winners(const st_win_input *in, int n, st_win_result **out, int *nout) {
  *out = NULL;
  *nout = 0;
  int *idx = malloc(sizeof *idx * (size_t)(n > 0 ? n : 1));
  st_win_result *res = calloc((size_t)(n > 0 ? n : 1), sizeof *res);
  if (!idx || !res) {
    free(idx);
    free(res);
    return -1;
  }
  for (int i = 0; i < n; i++) idx[i] = i;
  qsort_r(idx, (size_t)n, sizeof *idx, cmp_entry, (void *)in);
  int nres = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && !strcmp(in[idx[j]].dispatch_key, in[idx[i]].dispatch_key)) j++;
    st_win_result r;
    if (pick_key(in, idx + i, j - i, &r) != 0) {
      free(idx);
      free(res);
      return -1;
    }
    if (r.variant_id[0]) res[nres++] = r;
    i = j;
  }
  free(idx);
  *out = res;
  *nout = nres;
  return 0;
}
