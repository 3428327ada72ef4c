/* search_model.h - which variants a tune still tries on a shape, from what
 * the run measured on the shapes before it.
 *
 * Every variant of a shape is verified before it is timed, so the probe
 * that stops a slow variant's timing still pays for its verification: the
 * saving is in not running a variant at all. Most variants run on few
 * shapes (an index_decode family is made for one topk capacity kN and one
 * query count qN), so the evidence is pooled over like variants. A variant
 * v is left out of shape s when either rule finds it slow:
 *   by_struct: v's struct, its name less the launch suffix ("/s4") and
 *              less the dot-separated tokens kN and qN, on each of the
 *              `neighbours` shapes of the op nearest s (within `radius`,
 *              by st_search_distance) where the struct ran;
 *   by_family: v's family, its name less the launch suffix, likewise.
 * On such an earlier shape a struct's (family's) time is the least of its
 * members' times there, and it is slow when at least `threshold` times the
 * best of the structs (families) there that also apply to s, the
 * competition v meets on s, or when none of its members ran correctly
 * (stopped by the timing probe, wrong or failed). A faster struct that
 * cannot run on s does not make v look slow. Fewer such shapes than
 * `neighbours`, or one where it came within the threshold, and v is tried;
 * so is every default variant (the caller's rule). */
#ifndef ST_SEARCH_MODEL_H
#define ST_SEARCH_MODEL_H

#include <math.h>
#include <stddef.h>

#include "generator.h"

typedef struct st_search_model st_search_model;

/* One pooling level's rule. neighbours < 1 turns the rule off. */
typedef struct st_search_rule {
  double threshold; /* at least this many times the best there is slow */
  int neighbours;   /* the nearest shapes that must all find it slow   */
  double radius;    /* farther shapes are no neighbours (INFINITY: any) */
} st_search_rule;

typedef struct st_search_opts {
  st_search_rule by_struct; /* pooled over kN and qN: reaches variants new to the run */
  st_search_rule by_family; /* the family at any distance, by a wider margin */
} st_search_opts;

/* What `tune` uses (st_search_default_opts), chosen by replaying full
 * tunes of a decode suite in its order and shuffled: a lower struct
 * threshold, one neighbour or no radius left out more but lost more than
 * 2% on some shape. */
#define ST_SEARCH_STRUCT_THRESHOLD 1.15
#define ST_SEARCH_STRUCT_NEIGHBOURS 2
#define ST_SEARCH_STRUCT_RADIUS 8.0
#define ST_SEARCH_FAMILY_THRESHOLD 1.5
#define ST_SEARCH_FAMILY_NEIGHBOURS 2
#define ST_SEARCH_FAMILY_RADIUS INFINITY

st_search_opts st_search_default_opts(void);

/* NULL when out of memory. */
st_search_model *st_search_model_new(const st_search_opts *o);
void st_search_model_free(st_search_model *m);

/* One measurement of the run: the variant named `name` (st_variant_row's
 * name, "index_decode.bf16.d128.k16.h1.q2.t128.u1.b2.single/s4") on
 * `shape`, with the measurement's status ("ok": `us` is its time;
 * "pruned": the probe stopped it; anything else: wrong or failed).
 * Returns 0, or -1 out of memory. */
int st_search_model_add(st_search_model *m, const st_shape *shape, const char *name, const char *status, double us);

/* Starts deciding for `shape`: names[0 .. n) are every variant that
 * applies to it (defaults and those to be left out included), whose
 * structs and families are the competition an earlier shape's best is
 * taken among. Copies what it keeps. Returns 0, or -1 out of memory (then
 * no variant is left out until a shape begins). */
int st_search_model_begin_shape(st_search_model *m, const st_shape *shape, const char *const *names, int n);

/* 1 when the variant named `name` need not be tried on the shape begun
 * last, from the measurements added so far (why: the rule and the
 * neighbours' times, for the log), else 0. */
int st_search_model_skip(st_search_model *m, const char *name, char *why, size_t cap);

/* Replaying a run: what --search model would have left out of a run that
 * ran every variant, and what it would have cost. */
typedef struct st_search_pair {
  int shape;          /* index into the replay's shapes */
  const char *name;   /* the variant's */
  const char *status; /* the measurement's */
  double us;
  int is_default; /* never left out */
} st_search_pair;

typedef struct st_search_replayed {
  int pairs, left_out; /* the shape's measurements, and those the model leaves out */
  double best_us;      /* the least ok time of all of them (0: none)   */
  double kept_us;      /* the least ok time of those it keeps (0: none) */
} st_search_replayed;

/* Goes through shapes[0 .. nshapes) in order (the order the run tuned
 * them in), deciding for each of the shape's pairs whether the model,
 * fed only the kept pairs of the shapes before, leaves it out; the
 * variants that apply to a shape are those with a pair on it; out[i] for
 * shape i. Returns 0, or -1 out of memory. */
int st_search_replay(const st_search_opts *o, const st_shape *shapes, int nshapes, const st_search_pair *pairs,
                     int npairs, st_search_replayed *out);

/* How far apart two shapes of one op are: per field, |log2((a+1)/(b+1))|
 * for numbers, 1 for texts that differ or a field only one has; a prefill
 * batch's `reqs` counts as its requests, query tokens and longest context
 * (numbers). Shapes of different ops are infinitely far apart. */
double st_search_distance(const st_shape *a, const st_shape *b);

#endif
