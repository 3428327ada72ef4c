/* search_replay.c - a run that timed every variant, replayed through the
 * search model (search_model.h): what it would have left out, and at what
 * cost. */
#include <stdlib.h>
#include <string.h>

#include "search_model.h"

/* Shape i's pairs and what the model decides for them: begins the shape
 * with the names of its pairs (what applies to it), then asks for each. */
static int decide_shape(st_search_model *m, const st_shape *shape, int i, const st_search_pair *pairs, int npairs,
                        const char **names, char *kept, st_search_replayed *r) {
  int n = 0;
  for (int j = 0; j < npairs; j++)
    if (pairs[j].shape == i) names[n++] = pairs[j].name;
  if (st_search_model_begin_shape(m, shape, names, n) != 0) return -1;
  memset(r, 0, sizeof *r);
  for (int j = 0; j < npairs; j++) {
    const st_search_pair *p = &pairs[j];
    if (p->shape != i) continue;
    r->pairs++;
    kept[j] = p->is_default || !st_search_model_skip(m, p->name, NULL, 0);
    if (!kept[j]) r->left_out++;
    if (strcmp(p->status, "ok") || p->us <= 0) continue;
    if (r->best_us <= 0 || p->us < r->best_us) r->best_us = p->us;
    if (kept[j] && (r->kept_us <= 0 || p->us < r->kept_us)) r->kept_us = p->us;
  }
  return 0;
}

int st_search_replay(const st_search_opts *o, const st_shape *shapes, int nshapes, const st_search_pair *pairs,
                     int npairs, st_search_replayed *out) {
  st_search_model *m = st_search_model_new(o);
  char *kept = calloc((size_t)npairs + 1, 1);
  const char **names = calloc((size_t)npairs + 1, sizeof *names);
  int rc = m && kept && names ? 0 : -1;
  for (int i = 0; i < nshapes && rc == 0; i++) {
    rc = decide_shape(m, &shapes[i], i, pairs, npairs, names, kept, &out[i]);
    /* The model learns only what would have run. */
    for (int j = 0; j < npairs && rc == 0; j++)
      if (pairs[j].shape == i && kept[j] &&
          st_search_model_add(m, &shapes[i], pairs[j].name, pairs[j].status, pairs[j].us) != 0)
        rc = -1;
  }
  free(names);
  free(kept);
  st_search_model_free(m);
  return rc;
}
