/* perf_stats.h - the statistics behind regression tracking: is the head
 * run slower than the base run, and where in a history of runs did the
 * performance change?
 *
 * Timings are not normal: a repetition disturbed by something outside the
 * op is slower by 10-30% (docs/method.md), so the two-run comparison is a
 * rank test (Mann-Whitney U) with a rank-based size of the change
 * (Hodges-Lehmann), and the history is cut by a distribution-free
 * statistic (E-Divisive with means, Matteson & James 2014). Pure C, no
 * database: the caller brings the numbers.
 *
 * perf_stats.c holds the two-sample test and the verdict,
 * perf_change_points.c the change points. Every function returns ST_OK or
 * ST_ERR_INVALID_ARG (a NULL pointer, a non-finite value, too few values,
 * an option out of range; the message names it) or ST_ERR_NOMEM, with the
 * message in `err` when it is not NULL; `out` is unspecified on failure. */
#ifndef ST_PERF_STATS_H
#define ST_PERF_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* ---- two samples: Mann-Whitney U and Hodges-Lehmann ------------------- */

/* Up to this many values in each sample the p-value is exact: the share of
 * the splits of the pooled values (midranks for ties, so ties too) whose U
 * is as far from its mean as the observed; with more, the normal
 * approximation with tie and continuity corrections. */
#define ST_MW_EXACT_MAX 8

typedef struct st_mw_result {
  size_t na, nb;
  /* Pairs (i, j) with b[j] > a[i], a tie counting one half: 0 .. na*nb,
   * na*nb/2 when neither sample tends larger. */
  double u;
  /* (U - na*nb/2) over its standard deviation under the null, with the tie
   * correction and 0.5 of continuity correction toward 0: > 0 when b tends
   * larger. Always the normal approximation's, even when p is exact. */
  double z;
  double p;  /* two-sided */
  int exact; /* 1: p is exact (ties or not); 0: p is the normal approximation of z */
  /* Hodges-Lehmann estimate of the shift b - a: the median of the na*nb
   * differences b[j] - a[i]; the relative effect is shift / |median(a)|
   * (NaN when median(a) is 0). */
  double shift, median_a, relative;
} st_mw_result;

/* Two-sided Mann-Whitney U test of a[0..na) against b[0..nb). Both samples
 * need at least 2 values, all finite. Memory: na*nb doubles, freed before
 * return. */
st_status st_mann_whitney(const double *a, size_t na, const double *b, size_t nb, st_mw_result *out, st_err *err);

/* ---- the verdict on one (variant, shape) between two runs ------------- */

typedef enum st_verdict { ST_SAME = 0, ST_SLOWER = 1, ST_FASTER = 2 } st_verdict;

/* Defaults for two runs: a change must be at least 3% (two benches of one
 * variant differ by up to about 1%, docs/benchmarks.md) and significant
 * at 1%. */
#define ST_VERDICT_MIN_EFFECT 0.03
#define ST_VERDICT_ALPHA 0.01

typedef struct st_regression_result {
  st_verdict verdict;
  st_mw_result test; /* a = base, b = head: relative > 0 means head slower */
  double min_effect, alpha;
} st_regression_result;

/* Compares the repetitions of a head run with those of a base run (times,
 * all > 0): ST_SLOWER when the test rejects (p <= alpha) and the head is
 * slower by at least min_effect (test.relative >= min_effect), ST_FASTER
 * when it rejects and test.relative <= -min_effect, ST_SAME otherwise.
 * min_effect >= 0, 0 < alpha < 1. Few repetitions limit what can be
 * shown: with the 5 a side that `tune` keeps, p <= 0.01 needs every head
 * repetition slower than every base one (exact p = 2 / C(10, 5) = 0.008,
 * ties within a side or not);
 * with 4 a side, p is never below 2 / C(8, 4) = 0.029. */
st_status st_regression_verdict(const double *base, size_t nbase, const double *head, size_t nhead, double min_effect,
                                double alpha, st_regression_result *out, st_err *err);

/* "same", "slower", "faster". */
const char *st_verdict_name(st_verdict v);

/* ---- a history of runs: E-Divisive change points ---------------------- */

typedef struct st_cp_opts {
  size_t min_size;  /* fewest runs between two changes, and before the first and after the last; >= 2 */
  double alpha;     /* significance level of each permutation test, 0 < alpha < 1 */
  int permutations; /* per test; alpha * (permutations + 1) >= 1, else no change could be significant */
  uint64_t seed;    /* of the permutations: the same series and options give the same answer */
} st_cp_opts;

/* min_size 3, alpha 0.002, 1999 permutations, seed 1. Over pure noise a
 * test rejects at its level, so 0.2% of histories with no change show
 * one. 1999 shuffles make p <= 0.002 mean at most 3 of them reach the
 * observed statistic: with 999 at 0.001, where none may, a test whose
 * true p is 0.0002 fails one time in five by the luck of the shuffles (an
 * 8% rise and fall back under 2% noise, 30 runs each, went unseen in 3.4%
 * of histories). docs/method.md has the measured rates. */
st_cp_opts st_cp_opts_default(void);

typedef struct st_change_point {
  size_t index; /* the first run after the change */
  double q;     /* the energy statistic of the split (>= 0; in the series' units) */
  double p;     /* its permutation p-value, (1 + exceedances) / (permutations + 1) */
} st_change_point;

/* The change points of series[0..n) (all finite; any n, a series shorter
 * than 2 * min_size has none), found by binary segmentation: the split of
 * a segment that maximizes the energy statistic, kept when a permutation
 * test of the segment rejects, then each side in turn; then each change is
 * tested again between its neighbours, moved to their segment's best split
 * or dropped (a first split of a segment with several changes can land
 * between them). Writes the first `cap` change points by index into out
 * (out may be NULL when cap is 0) and their number into *count, which may
 * exceed cap. opts: st_cp_opts_default() or the caller's.
 *
 * Cost: one scan of a segment of m runs takes O(m log m) (one value per
 * run: the sums of distances come from a Fenwick tree over ranks, not a
 * distance matrix); a test takes up to permutations + 1 scans, and stops
 * at the first shuffle that rules significance out, which with no change
 * comes after a handful. So a history with k changes costs
 * O(k * permutations * n log n) at worst (each change's segment shuffled
 * in full, during the cut and again during the refinement), one with none
 * a few scans. Memory O(n). */
st_status st_change_points(const double *series, size_t n, const st_cp_opts *opts, st_change_point *out, size_t cap,
                           size_t *count, st_err *err);

#endif
