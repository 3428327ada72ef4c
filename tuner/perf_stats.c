/* perf_stats.c - the two-run comparison: Mann-Whitney U with the
 * Hodges-Lehmann shift, and the verdict built on it (perf_stats.h). */
#include "perf_stats.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *pa, const void *pb) {
  const double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

/* Median of v[0..n), n >= 1; sorts v. */
static double median_sorting(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static st_status check_sample(const char *name, const double *x, size_t n, st_err *err) {
  if (!x) return st_fail(err, ST_ERR_INVALID_ARG, "%s is NULL", name);
  if (n < 2) return st_fail(err, ST_ERR_INVALID_ARG, "%s has %zu values; a rank test needs at least 2", name, n);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return st_fail(err, ST_ERR_INVALID_ARG, "%s[%zu]=%g is not a finite number", name, i, x[i]);
  return ST_OK;
}

typedef struct ranked {
  double v;
  int in_b;
} ranked;

static int cmp_ranked(const void *pa, const void *pb) {
  return cmp_double(&((const ranked *)pa)->v, &((const ranked *)pb)->v);
}

/* U (pairs with b > a, ties one half) from the sum of b's midranks, and
 * the ties' sum of t^3 - t for the variance. */
static st_status u_statistic(const double *a, size_t na, const double *b, size_t nb, double *u, double *tie_sum,
                             st_err *err) {
  const size_t n = na + nb;
  ranked *r = malloc(n * sizeof *r);
  if (!r) return st_fail(err, ST_ERR_NOMEM, "out of memory ranking %zu values", n);
  for (size_t i = 0; i < na; i++) r[i] = (ranked){a[i], 0};
  for (size_t j = 0; j < nb; j++) r[na + j] = (ranked){b[j], 1};
  qsort(r, n, sizeof *r, cmp_ranked);
  double rank_sum_b = 0, ties = 0;
  for (size_t i = 0; i < n;) {
    size_t k = i;
    size_t in_b = 0;
    while (k < n && r[k].v == r[i].v) in_b += (size_t)r[k++].in_b;
    const double t = (double)(k - i), midrank = 0.5 * (double)(i + 1 + k); /* ranks i+1 .. k */
    rank_sum_b += midrank * (double)in_b;
    ties += t * t * t - t;
    i = k;
  }
  free(r);
  *u = rank_sum_b - 0.5 * (double)nb * (double)(nb + 1);
  *tie_sum = ties;
  return ST_OK;
}

/* Two-sided exact p of the rank test for samples of na and nb values (na,
 * nb <= ST_MW_EXACT_MAX): under the null every split of the pooled values
 * into na and nb is equally likely, so p is the share of the C(n, nb)
 * splits whose sum of b's midranks lies at least as far from its mean as
 * the observed one. Midranks make it exact with ties too (the conditional
 * test): timings quantized to the timer's resolution tie often, and within
 * a sample ties change nothing. At most C(16, 8) = 12870 splits, found
 * among 2^16 bit masks. */
static st_status exact_p(const double *a, size_t na, const double *b, size_t nb, double *p, st_err *err) {
  static_assert(2 * ST_MW_EXACT_MAX <= 16, "the splits are enumerated as 16-bit masks");
  const size_t n = na + nb;
  ranked r[2 * ST_MW_EXACT_MAX];
  double rank[2 * ST_MW_EXACT_MAX]; /* in sorted order */
  for (size_t i = 0; i < na; i++) r[i] = (ranked){a[i], 0};
  for (size_t j = 0; j < nb; j++) r[na + j] = (ranked){b[j], 1};
  qsort(r, n, sizeof *r, cmp_ranked);
  double observed = 0;
  for (size_t i = 0; i < n;) {
    size_t k = i;
    while (k < n && r[k].v == r[i].v) k++;
    for (size_t m = i; m < k; m++) {
      rank[m] = 0.5 * (double)(i + 1 + k);
      if (r[m].in_b) observed += rank[m];
    }
    i = k;
  }
  const double mean = 0.5 * (double)nb * (double)(n + 1), dev = fabs(observed - mean) - 1e-9;
  double total = 0, extreme = 0;
  for (unsigned mask = 0; mask < (1u << n); mask++) {
    if ((size_t)__builtin_popcount(mask) != nb) continue;
    double sum = 0;
    for (size_t m = 0; m < n; m++)
      if (mask >> m & 1u) sum += rank[m];
    total += 1;
    extreme += fabs(sum - mean) >= dev;
  }
  if (total == 0) return st_fail(err, ST_ERR_INVALID_ARG, "no split of %zu and %zu values", na, nb);
  *p = extreme / total;
  return ST_OK;
}

/* Median of the na*nb differences b[j] - a[i]. */
static st_status hodges_lehmann(const double *a, size_t na, const double *b, size_t nb, double *shift, st_err *err) {
  if (na > SIZE_MAX / sizeof(double) / nb)
    return st_fail(err, ST_ERR_INVALID_ARG, "na=%zu by nb=%zu differences do not fit in memory", na, nb);
  double *d = malloc(na * nb * sizeof *d);
  if (!d) return st_fail(err, ST_ERR_NOMEM, "out of memory for %zu x %zu differences", na, nb);
  for (size_t i = 0; i < na; i++)
    for (size_t j = 0; j < nb; j++) d[i * nb + j] = b[j] - a[i];
  *shift = median_sorting(d, na * nb);
  free(d);
  return ST_OK;
}

/* The test, with the samples named as the caller knows them in messages. */
static st_status mann_whitney(const char *name_a, const double *a, size_t na, const char *name_b, const double *b,
                              size_t nb, st_mw_result *out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "out is NULL");
  st_status s = check_sample(name_a, a, na, err);
  if (s == ST_OK) s = check_sample(name_b, b, nb, err);
  if (s != ST_OK) return s;
  memset(out, 0, sizeof *out);
  out->na = na;
  out->nb = nb;

  double ties = 0;
  if ((s = u_statistic(a, na, b, nb, &out->u, &ties, err)) != ST_OK) return s;
  const double n = (double)(na + nb), mean = 0.5 * (double)na * (double)nb;
  const double var = (double)na * (double)nb / 12.0 * ((n + 1) - ties / (n * (n - 1)));
  const double dev = out->u - mean, corrected = fmax(fabs(dev) - 0.5, 0);
  out->z = var > 0 ? copysign(corrected / sqrt(var), dev) : 0; /* var 0: every value equal */
  out->p = var > 0 ? erfc(fabs(out->z) / sqrt(2.0)) : 1;
  if (na <= ST_MW_EXACT_MAX && nb <= ST_MW_EXACT_MAX) {
    if ((s = exact_p(a, na, b, nb, &out->p, err)) != ST_OK) return s;
    out->exact = 1;
  }

  if ((s = hodges_lehmann(a, na, b, nb, &out->shift, err)) != ST_OK) return s;
  double *copy = malloc(na * sizeof *copy);
  if (!copy) return st_fail(err, ST_ERR_NOMEM, "out of memory copying %zu values", na);
  memcpy(copy, a, na * sizeof *copy);
  out->median_a = median_sorting(copy, na);
  free(copy);
  out->relative = out->median_a != 0 ? out->shift / fabs(out->median_a) : NAN;
  return ST_OK;
}

st_status st_mann_whitney(const double *a, size_t na, const double *b, size_t nb, st_mw_result *out, st_err *err) {
  return mann_whitney("a", a, na, "b", b, nb, out, err);
}

st_status st_regression_verdict(const double *base, size_t nbase, const double *head, size_t nhead, double min_effect,
                                double alpha, st_regression_result *out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "out is NULL");
  if (!(min_effect >= 0) || !isfinite(min_effect))
    return st_fail(err, ST_ERR_INVALID_ARG, "min_effect=%g is not a finite number >= 0", min_effect);
  if (!(alpha > 0 && alpha < 1)) return st_fail(err, ST_ERR_INVALID_ARG, "alpha=%g is outside (0, 1)", alpha);
  /* A time is positive; 0 or less is a broken measurement, not a fast one. */
  for (size_t i = 0; base && i < nbase; i++)
    if (!(base[i] > 0)) return st_fail(err, ST_ERR_INVALID_ARG, "base[%zu]=%g is not a time > 0", i, base[i]);
  for (size_t i = 0; head && i < nhead; i++)
    if (!(head[i] > 0)) return st_fail(err, ST_ERR_INVALID_ARG, "head[%zu]=%g is not a time > 0", i, head[i]);
  st_status s = mann_whitney("base", base, nbase, "head", head, nhead, &out->test, err);
  if (s != ST_OK) return s;
  out->min_effect = min_effect;
  out->alpha = alpha;
  const int rejects = out->test.p <= alpha;
  if (rejects && out->test.relative >= min_effect)
    out->verdict = ST_SLOWER;
  else if (rejects && out->test.relative <= -min_effect)
    out->verdict = ST_FASTER;
  else
    out->verdict = ST_SAME;
  return ST_OK;
}

const char *st_verdict_name(st_verdict v) {
  switch (v) {
  case ST_SAME: return "same";
  case ST_SLOWER: return "slower";
  case ST_FASTER: return "faster";
  }
  return "?";
}
