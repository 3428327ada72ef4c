/* perf_change_points.c - E-Divisive with means over a history of runs
 * (perf_stats.h), after Matteson & James (2014), distance exponent 1, the
 * second sample running to the segment's end (as MongoDB's change point
 * detection uses it).
 *
 * A segment x[0..m) split at tau into L = x[0..tau) and R = x[tau..m) has
 * the energy statistic
 *   q(tau) = tau (m - tau) / m * (2 B / (tau (m - tau))
 *                                 - WL / C(tau, 2) - WR / C(m - tau, 2))
 * where B sums |x_i - x_j| over the pairs across the split and WL, WR over
 * the pairs within each side: the mean distance across less the mean
 * distances within, 0 in expectation when both sides come from one
 * distribution and growing with any difference between them, of level or
 * of spread. The split is the tau of the largest q with at least min_size
 * runs on each side. Whether that q is more than noise is a permutation
 * test: with no change the runs are exchangeable, every order of them as
 * likely as the one observed, so p = (1 + shuffles whose largest q reaches
 * it) / (1 + shuffles). A significant split is kept and each side is cut
 * in turn (binary segmentation); then refine() places every change again
 * between its neighbours.
 *
 * The runs are one number each, so the distances from a run to those
 * before it come from a Fenwick tree over ranks (count and sum of the
 * values below): WL(tau) for every tau in one O(m log m) pass, instead of
 * the O(m^2) of a distance matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf_stats.h"

st_cp_opts st_cp_opts_default(void) {
  return (st_cp_opts){.min_size = 3, .alpha = 0.002, .permutations = 1999, .seed = 1};
}

/* splitmix64: small, fast, and its stream is a pure function of the seed. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* One run of the segment as the scan reads it; shuffled as a whole. */
typedef struct run {
  double v;    /* the value less the segment's mean */
  double dist; /* sum of |v - v_j| over the whole segment: the same in any order */
  size_t rank; /* of v in the segment (ties broken by position) */
} run;

/* A Fenwick tree node over ranks: count and sum of the values inserted. */
typedef struct fenwick_node {
  size_t count;
  double sum;
} fenwick_node;

/* Buffers for one segment of up to n runs, allocated once per call. */
typedef struct cp_work {
  run *runs;          /* the segment, permuted in place */
  fenwick_node *tree; /* 1-based, n + 1 nodes */
  size_t *order;      /* positions sorted by value, for ranks and distances */
  double within;      /* sum of the distances within the whole segment */
} cp_work;

typedef struct segment {
  size_t start, end;
} segment;

/* The split of runs[0..m) with the largest q (the first on a tie);
 * m >= 2 * min_size. One pass: WL(t), the distances within the first t
 * runs, grows by the new run's distances to those before it (from the
 * tree: count and sum of the values below its rank), and the distances
 * across follow from the whole-segment sums, since the runs before t have
 * sum(dist) = 2 WL + B; then WR = W - WL - B. */
static double best_split(cp_work *w, size_t m, size_t min_size, size_t *tau_out) {
  memset(w->tree, 0, (m + 1) * sizeof *w->tree);
  const double dm = (double)m;
  double best = -INFINITY, wl = 0, sum_v = 0, sum_dist = 0;
  size_t best_tau = min_size;
  for (size_t t = 0; t < m; t++) {
    if (t >= min_size && t + min_size <= m) {
      const double nl = (double)t, nr = dm - nl, across = sum_dist - 2 * wl, wr = w->within - wl - across;
      const double q = 2 * across / dm - 2 * nr * wl / (dm * (nl - 1)) - 2 * nl * wr / (dm * (nr - 1));
      if (q > best) {
        best = q;
        best_tau = t;
      }
    }
    const run *r = &w->runs[t];
    size_t below = 0;
    double sum_below = 0;
    for (size_t i = r->rank; i > 0; i -= i & (~i + 1)) {
      below += w->tree[i].count;
      sum_below += w->tree[i].sum;
    }
    wl += r->v * (double)below - sum_below + (sum_v - sum_below) - r->v * (double)(t - below);
    for (size_t i = r->rank + 1; i <= m; i += i & (~i + 1)) {
      w->tree[i].count++;
      w->tree[i].sum += r->v;
    }
    sum_v += r->v;
    sum_dist += r->dist;
  }
  *tau_out = best_tau;
  return best;
}

static int cmp_by_value(const void *pa, const void *pb, void *ctx) {
  const run *runs = ctx;
  const size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  if (runs[a].v != runs[b].v) return (runs[a].v > runs[b].v) - (runs[a].v < runs[b].v);
  return (a > b) - (a < b);
}

/* Copies series[start..end) into the work buffers: centred, so that the
 * sums of values times counts less sums cancel no large common level (a
 * time in ns with 1% of noise keeps its digits), with ranks and each run's
 * distances to the whole segment. */
static void load_segment(cp_work *w, const double *series, segment seg) {
  const size_t m = seg.end - seg.start;
  double mean = 0;
  for (size_t i = 0; i < m; i++) mean += series[seg.start + i];
  mean /= (double)m;
  for (size_t i = 0; i < m; i++) {
    w->runs[i].v = series[seg.start + i] - mean;
    w->order[i] = i;
  }
  qsort_r(w->order, m, sizeof *w->order, cmp_by_value, w->runs);
  double total = 0, below = 0;
  for (size_t i = 0; i < m; i++) total += w->runs[i].v;
  w->within = 0;
  for (size_t k = 0; k < m; k++) {
    run *r = &w->runs[w->order[k]];
    r->rank = k;
    r->dist = r->v * (double)k - below + (total - below - r->v) - r->v * (double)(m - 1 - k);
    w->within += 0.5 * r->dist;
    below += r->v;
  }
}

/* Fisher-Yates: the last of the first k runs swaps with any of them. */
static void shuffle(cp_work *w, size_t m, uint64_t *rng) {
  for (size_t k = m; k > 1; k--) {
    /* The modulo's bias is below k / 2^64: nothing a test can see. */
    const size_t j = (size_t)(next_random(rng) % (uint64_t)k);
    const run r = w->runs[k - 1];
    w->runs[k - 1] = w->runs[j];
    w->runs[j] = r;
  }
}

/* Tests the best split of one segment; 1 with *found filled when the
 * permutation test rejects at opts->alpha. */
static int test_segment(cp_work *w, const double *series, segment seg, const st_cp_opts *opts, st_change_point *found) {
  const size_t m = seg.end - seg.start;
  if (m / 2 < opts->min_size) return 0; /* m < 2 min_size, without overflow */
  load_segment(w, series, seg);
  size_t tau;
  const double q = best_split(w, m, opts->min_size, &tau);
  /* Each segment draws from its own stream, so that its answer does not
   * depend on the order in which the segments are tested. */
  uint64_t rng = opts->seed ^ (0x9e3779b97f4a7c15ULL * (seg.start + 1)) ^ (0xc2b2ae3d27d4eb4fULL * (seg.end + 1));
  /* Significant means (1 + exceed) / (permutations + 1) <= alpha: stop at
   * the first exceedance past that (the slack absorbs alpha's rounding). */
  const double allowed = floor(opts->alpha * ((double)opts->permutations + 1) + 1e-9) - 1;
  /* A shuffle that reaches q up to rounding counts as reaching it. */
  const double reach = q - 1e-9 * fabs(q);
  int exceed = 0;
  for (int r = 0; r < opts->permutations; r++) {
    shuffle(w, m, &rng);
    size_t ignored;
    if (best_split(w, m, opts->min_size, &ignored) >= reach && ++exceed > allowed) return 0;
  }
  *found = (st_change_point){.index = seg.start + tau, .q = q, .p = (1.0 + exceed) / ((double)opts->permutations + 1)};
  return 1;
}

/* Binary segmentation places a change by the whole segment it was found
 * in. In a history with several changes that segment mixes levels, and
 * its best split can land off every change (a first split at 583 of
 * changes at 400 and 600: the change at 600 is then found in the
 * remainder, and 583 stays as a change that never happened). So each
 * change, in order, is tested again on the runs between its neighbours:
 * moved to that segment's best split, or dropped when the segment shows
 * no significant change. Until a pass changes nothing; a pass that only
 * moves changes is counted, and after MAX_MOVES of them the places stand
 * (removals end by themselves). points[] is sorted by index. */
static void refine(cp_work *w, const double *series, size_t n, const st_cp_opts *opts, st_change_point *points,
                   size_t *found) {
  enum { MAX_MOVES = 8 };
  for (int moves = 0; moves < MAX_MOVES;) {
    int moved = 0, removed = 0;
    for (size_t i = 0; i < *found;) {
      const segment seg = {i ? points[i - 1].index : 0, i + 1 < *found ? points[i + 1].index : n};
      st_change_point cp;
      if (!test_segment(w, series, seg, opts, &cp)) {
        memmove(points + i, points + i + 1, (*found - i - 1) * sizeof *points);
        (*found)--;
        removed = 1;
        continue;
      }
      moved |= cp.index != points[i].index;
      points[i++] = cp;
    }
    if (!moved && !removed) return;
    if (!removed) moves++;
  }
}

static st_status check_inputs(const double *series, size_t n, const st_cp_opts *o, const st_change_point *out,
                              size_t cap, const size_t *count, st_err *err) {
  if (!series) return st_fail(err, ST_ERR_INVALID_ARG, "series is NULL");
  if (!count) return st_fail(err, ST_ERR_INVALID_ARG, "count is NULL");
  if (!out && cap > 0) return st_fail(err, ST_ERR_INVALID_ARG, "out is NULL with cap=%zu", cap);
  if (!o) return st_fail(err, ST_ERR_INVALID_ARG, "opts is NULL (st_cp_opts_default() gives the defaults)");
  if (o->min_size < 2)
    return st_fail(err, ST_ERR_INVALID_ARG, "min_size=%zu: a side needs 2 runs for a distance within it", o->min_size);
  if (!(o->alpha > 0 && o->alpha < 1)) return st_fail(err, ST_ERR_INVALID_ARG, "alpha=%g is outside (0, 1)", o->alpha);
  if (o->permutations < 1 || o->alpha * ((double)o->permutations + 1) + 1e-9 < 1)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "permutations=%d: p is at least 1 / (permutations + 1), so alpha=%g needs at least %.0f",
                   o->permutations, o->alpha, ceil(1 / o->alpha - 1 - 1e-9));
  if (n > SIZE_MAX / sizeof(run) - 1) return st_fail(err, ST_ERR_INVALID_ARG, "n=%zu runs do not fit in memory", n);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(series[i]))
      return st_fail(err, ST_ERR_INVALID_ARG, "series[%zu]=%g is not a finite number", i, series[i]);
  return ST_OK;
}

static int cmp_index(const void *pa, const void *pb) {
  const size_t a = ((const st_change_point *)pa)->index, b = ((const st_change_point *)pb)->index;
  return (a > b) - (a < b);
}

st_status st_change_points(const double *series, size_t n, const st_cp_opts *opts, st_change_point *out, size_t cap,
                           size_t *count, st_err *err) {
  st_status s = check_inputs(series, n, opts, out, cap, count, err);
  if (s != ST_OK) return s;
  *count = 0;
  if (n / 2 < opts->min_size) return ST_OK;

  /* At most n / min_size changes; the pending segments never outnumber
   * the changes found plus one. */
  const size_t max_points = n / opts->min_size + 1;
  cp_work w = {0};
  st_change_point *points = malloc(max_points * sizeof *points);
  segment *stack = malloc(max_points * sizeof *stack);
  w.runs = malloc(n * sizeof *w.runs);
  w.tree = malloc((n + 1) * sizeof *w.tree);
  w.order = malloc(n * sizeof *w.order);
  if (!points || !stack || !w.runs || !w.tree || !w.order) {
    s = st_fail(err, ST_ERR_NOMEM, "out of memory for a series of %zu runs", n);
    goto cleanup;
  }

  size_t found = 0, pending = 0;
  stack[pending++] = (segment){0, n};
  while (pending > 0) {
    const segment seg = stack[--pending];
    st_change_point cp;
    if (!test_segment(&w, series, seg, opts, &cp)) continue;
    points[found++] = cp;
    stack[pending++] = (segment){seg.start, cp.index};
    stack[pending++] = (segment){cp.index, seg.end};
  }
  qsort(points, found, sizeof *points, cmp_index);
  refine(&w, series, n, opts, points, &found);
  for (size_t i = 0; i < found && i < cap; i++) out[i] = points[i];
  *count = found;

cleanup:
  free(points);
  free(stack);
  free(w.runs);
  free(w.tree);
  free(w.order);
  return s;
}
