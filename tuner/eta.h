/* eta.h - the tune's time left, shape by shape and op by op.
 *
 * A (variant, shape) pair of one op can cost a hundred times one of
 * another (a prefill attention pair times millisecond launches and checks
 * millions of outputs; a decode pair neither), and a large shape several
 * times a small one of the same op. One rate over all pairs done misled:
 * the main job's prefill tune said 4m42s with 7.5 min to go, because its
 * first 900 pairs were the index ops'. So the running shape's pairs left
 * go at that shape's rate (from its second pair on: its first carries the
 * shape's inputs and reference), every other shape's at its op's rate so
 * far, and an op not yet started at the rate of all pairs so far. */
#ifndef ST_ETA_H
#define ST_ETA_H

#define ST_ETA_MAX_OPS 16

typedef struct st_eta_op {
  char op[32];
  int total, done;
  double spent; /* seconds charged to this op's pairs */
} st_eta_op;

typedef struct st_eta {
  st_eta_op ops[ST_ETA_MAX_OPS];
  int n;
  double mark;        /* when the last pair was done (or the clock started) */
  int shape_op;       /* the running shape: its op's slot (-1: none), */
  int shape_total;    /* pairs, */
  int shape_done;     /* pairs done, */
  double shape_first; /* and when its first pair was done */
} st_eta;

/* Counts `jobs` more pairs of `op` in the plan (ops past ST_ETA_MAX_OPS
 * share the last slot: an estimate, not an error). */
void st_eta_plan(st_eta *e, const char *op, int jobs);

/* The clock starts at `now` (seconds on any monotonic clock), with the
 * plan complete. Time between pairs (a shape's inputs and reference) is
 * charged to the next pair done, so to the op of the shape it was spent on. */
void st_eta_start(st_eta *e, double now);

/* A shape of `op` with `jobs` pairs (of those planned) begins. */
void st_eta_shape(st_eta *e, const char *op, int jobs);

/* One pair of the running shape is done at `now`. */
void st_eta_done(st_eta *e, double now);

/* Seconds left; -1 before any pair is done. */
double st_eta_left(const st_eta *e);

#endif
