/* search_model.h - which variants a tune still tries on a shape, from what
 * the run measured on the shapes before it.
 *
 * Every variant of a shape is verified before it is timed, so the probe
 * that stops a slow variant's timing still pays for its verification: the
 * saving is in not running a variant at all. A variant v is left out of shape s when the run
 * already tried v on at least `neighbours` shapes of the op near s (within
 * `radius`, by st_search_distance) and v was slow on every one of the
 * `neighbours` nearest: at least `threshold` times that shape's best, or
 * stopped by the timing probe, wrong, or failed. Anything else is tried:
 * a variant with no history near s, one that came close anywhere near s,
 * and (the caller's rule) every default variant. */
#ifndef ST_SEARCH_MODEL_H
#define ST_SEARCH_MODEL_H

#include <stddef.h>

#include "generator.h"

typedef struct st_search_model st_search_model;

typedef struct st_search_opts {
  double threshold; /* a time this many times the shape's best is slow   */
  int neighbours;   /* nearest shapes that must all find the variant slow */
  double radius;    /* shapes farther than this are not neighbours       */
} st_search_opts;

/* What `tune` uses unless told otherwise. */
#define ST_SEARCH_THRESHOLD 1.3
#define ST_SEARCH_NEIGHBOURS 2
#define ST_SEARCH_RADIUS 3.0

/* NULL when out of memory. */
st_search_model *st_search_model_new(const st_search_opts *o);
void st_search_model_free(st_search_model *m);

/* One measurement of the run: variant `variant_id` on `shape` with the
 * measurement's status ("ok": `us` is its time; "pruned": the probe
 * stopped it; anything else: wrong or failed). Returns 0, or -1 out of
 * memory. */
int st_search_model_add(st_search_model *m, const st_shape *shape, const char *variant_id, const char *status,
                        double us);

/* 1 when `variant_id` need not be tried on `shape` (why: the neighbours'
 * times, for the log), else 0. */
int st_search_model_skip(st_search_model *m, const st_shape *shape, const char *variant_id, char *why,
                         size_t cap);

/* Replaying a run: what --search model would have left out of a run that
 * ran every variant, and what it would have cost. */
typedef struct st_search_pair {
  int shape;              /* index into the replay's shapes */
  const char *variant_id;
  const char *status;     /* the measurement's */
  double us;
  int is_default;         /* never left out */
} st_search_pair;

typedef struct st_search_replayed {
  int pairs, left_out; /* the shape's measurements, and those the model leaves out */
  double best_us;      /* the least ok time of all of them (0: none)   */
  double kept_us;      /* the least ok time of those it keeps (0: none) */
} st_search_replayed;

/* Goes through shapes[0 .. nshapes) in order (the order the run tuned
 * them in), deciding for each of the shape's pairs whether the model,
 * fed only the kept pairs of the shapes before, leaves it out; out[i] for
 * shape i. Returns 0, or -1 out of memory. */
int st_search_replay(const st_search_opts *o, const st_shape *shapes, int nshapes, const st_search_pair *pairs,
                     int npairs, st_search_replayed *out);

/* How far apart two shapes of one op are: per field, |log2((a+1)/(b+1))|
 * for numbers, 1 for texts that differ or a field only one has; a prefill
 * batch's `reqs` counts as its requests, query tokens and longest context
 * (numbers). Shapes of different ops are infinitely far apart. */
double st_search_distance(const st_shape *a, const st_shape *b);

#endif
