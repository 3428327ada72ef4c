#include "builtin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin_catalog.h"
#include "identity.h"

static st_status entry_params(const st_builtin_param *list, st_params *out, st_err *err) {
  out->n = 0;
  for (const st_builtin_param *p = list; p->key; p++) {
    st_status st = st_params_set(out, p->key, p->val, err);
    if (st != ST_OK) return st;
  }
  return ST_OK;
}

static st_status join_source(const st_builtin_entry *e, char **text, size_t *len, st_err *err) {
  if (e->part < 0 || e->part >= st_builtin_part_count)
    return st_fail(err, ST_ERR_INVALID_ARG, "built-in variant %s names template part %d of %d", e->name, e->part,
                   st_builtin_part_count);
  const st_builtin_part *part = &st_builtin_parts[e->part];
  const size_t prelude_len = strlen(e->prelude);
  const size_t n = part->head_len + prelude_len + part->tail_len;
  char *buf = malloc(n + 1);
  if (!buf) return st_fail(err, ST_ERR_NOMEM, "out of host memory for the %zu-byte source of %s", n, e->name);
  memcpy(buf, part->head, part->head_len);
  memcpy(buf + part->head_len, e->prelude, prelude_len);
  memcpy(buf + part->head_len + prelude_len, part->tail, part->tail_len);
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return ST_OK;
}

/* One catalog entry as a dispatch variant: its config, rank, source hash
 * and id. */
static st_status make_variant(const st_op_desc *d, int index, st_dispatch_variant *v, st_err *err) {
  const st_builtin_entry *e = &st_builtin_entries[index];
  st_params kernel, launch;
  st_err why;
  st_status st = entry_params(e->kernel, &kernel, &why);
  if (st == ST_OK) st = entry_params(e->launch, &launch, &why);
  int rank = 0;
  if (st == ST_OK) st = d->parse_config(&kernel, &launch, &v->cfg, &rank, &why);
  if (st != ST_OK) return st_fail(err, st, "built-in variant %s: %s", e->name, why.msg);
  if (e->part < 0 || e->part >= st_builtin_part_count)
    return st_fail(err, ST_ERR_INVALID_ARG, "built-in variant %s names template part %d of %d", e->name, e->part,
                   st_builtin_part_count);
  /* The joined source's hash, without joining it (st_open hashes every
   * built-in source). */
  const st_builtin_part *part = &st_builtin_parts[e->part];
  const void *const parts[3] = {part->head, e->prelude, part->tail};
  const size_t lens[3] = {part->head_len, strlen(e->prelude), part->tail_len};
  st_hash_hex_parts(parts, lens, 3, v->source_hash);
  if ((st = st_variant_id(e->op, &kernel, &launch, v->source_hash, v->id, err)) != ST_OK) return st;
  snprintf(v->name, sizeof v->name, "%s", e->name);
  v->rank = rank;
  v->builtin = index + 1;
  v->load_lo = e->load_lo;
  v->load_hi = e->load_hi;
  v->qlen_lo = e->qlen_lo;
  v->qlen_hi = e->qlen_hi;
  return ST_OK;
}

/* Dispatch order: rank, then the order of the op's defaults(). */
static int cmp_builtin(const void *pa, const void *pb) {
  const st_dispatch_variant *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return (a->builtin > b->builtin) - (a->builtin < b->builtin);
}

st_status st_builtin_variants(st_op_id op, st_dispatch_variant **out, size_t *n, st_err *err) {
  *out = NULL;
  *n = 0;
  const st_op_desc *d = st_op_desc_of(op);
  if (!d) return st_fail(err, ST_ERR_INVALID_ARG, "unknown op %d", (int)op);
  size_t count = 0;
  for (int i = 0; i < st_builtin_entry_count; i++) count += strcmp(st_builtin_entries[i].op, d->name) == 0;
  if (count == 0) return ST_OK;
  st_dispatch_variant *vs = calloc(count, sizeof *vs);
  if (!vs) return st_fail(err, ST_ERR_NOMEM, "out of host memory for %zu built-in variants", count);
  size_t k = 0;
  for (int i = 0; i < st_builtin_entry_count; i++) {
    if (strcmp(st_builtin_entries[i].op, d->name) != 0) continue;
    st_status st = make_variant(d, i, &vs[k++], err);
    if (st != ST_OK) {
      free(vs);
      return st;
    }
  }
  qsort(vs, count, sizeof *vs, cmp_builtin);
  *out = vs;
  *n = count;
  return ST_OK;
}

/* st_builtin_choose's fit: the launcher's plan on a device of *ctx
 * multiprocessors. */
static st_status fit_on(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args, st_err *err) {
  st_op_plan plan;
  st_plan_info info;
  return st_op_desc_of(op)->plan(&v->cfg, args, *(const int *)ctx, &plan, &info, err);
}

st_status st_builtin_choose(st_op_id op, const void *args, int sm_count, st_dispatch_variant *out, st_err *err) {
  const st_op_desc *d = st_op_desc_of(op);
  if (!d) return st_fail(err, ST_ERR_INVALID_ARG, "unknown op %d", (int)op);
  if (sm_count < 1) return st_fail(err, ST_ERR_INVALID_ARG, "%d multiprocessors: a device has at least one", sm_count);
  st_dispatch_variant *v = NULL;
  size_t n = 0;
  st_status st = st_builtin_variants(op, &v, &n, err);
  if (st != ST_OK) return st;
  if (n == 0) return st_fail(err, ST_ERR_NO_VARIANT, "op %s has no built-in variants", d->name);
  st_dispatch_candidate *c = calloc(n, sizeof *c);
  if (!c) {
    free(v);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory listing %zu built-in variants", n);
  }
  const st_dispatch_table t = {.op = op, .defaults = v, .n_defaults = n, .source = "no database"};
  st_dispatch_hooks hooks = {.fit = fit_on, .fit_ctx = &sm_count};
  st_dispatch_call_hooks(op, args, &sm_count, &hooks);
  const st_params no_fields = {0};
  size_t fit = 0;
  st_err why = {{0}};
  st_dispatch_candidates(&t, &no_fields, args, &hooks, c, &fit, &why);
  if (fit > 0 && c[0].v)
    *out = *c[0].v;
  else
    st = st_fail(err, ST_ERR_NO_VARIANT, "no built-in %s variant fits the call%s%s", d->name, why.msg[0] ? ": " : "",
                 why.msg);
  free(c);
  free(v);
  return st;
}

st_status st_builtin_source(const st_dispatch_variant *v, char **text, size_t *len, st_err *err) {
  if (v->builtin < 1 || v->builtin > st_builtin_entry_count)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant %s is not built in", v->name);
  return join_source(&st_builtin_entries[v->builtin - 1], text, len, err);
}
