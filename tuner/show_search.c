#include "show_search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_stats.h"
#include "generator.h"
#include "search_model.h"

typedef struct pair_row {
  int shape;
  char variant_id[40];
  char name[160];
  char status[16];
  double us;
} pair_row;

typedef struct variant_kind {
  char id[40];
  int is_default;
} variant_kind;

typedef struct collect_ctx {
  st_db *db;
  const st_shape *shapes;
  int nshapes;
  pair_row *rows;
  int n, cap;
  variant_kind *kinds; /* every variant met, looked up once */
  int nkinds, kinds_cap;
  st_err *err;
  st_status status;
} collect_ctx;

static int shape_index(const collect_ctx *c, const char *key) {
  for (int i = 0; i < c->nshapes; i++)
    if (strcmp(c->shapes[i].key, key) == 0) return i;
  return -1;
}

static int note_kind(collect_ctx *c, const char *id) {
  for (int i = 0; i < c->nkinds; i++)
    if (strcmp(c->kinds[i].id, id) == 0) return 0;
  if (c->nkinds == c->kinds_cap) {
    const int cap = c->kinds_cap ? 2 * c->kinds_cap : 256;
    variant_kind *k = realloc(c->kinds, sizeof *k * (size_t)cap);
    if (!k) {
      c->status = st_fail(c->err, ST_ERR_NOMEM, "out of host memory");
      return -1;
    }
    c->kinds = k;
    c->kinds_cap = cap;
  }
  variant_kind *k = &c->kinds[c->nkinds++];
  snprintf(k->id, sizeof k->id, "%s", id);
  st_variant_row row;
  if ((c->status = st_db_get_variant(c->db, id, &row, c->err)) != ST_OK) return -1;
  k->is_default = row.is_default;
  return 0;
}

static int collect(void *ctx, const st_measurement *m, const char *name, const char *op) {
  (void)op;
  collect_ctx *c = ctx;
  const int s = shape_index(c, m->shape_key);
  if (s < 0) return 0; /* not a shape of the suite as the generator has it now */
  if (c->n == c->cap) {
    const int cap = c->cap ? 2 * c->cap : 1024;
    pair_row *r = realloc(c->rows, sizeof *r * (size_t)cap);
    if (!r) {
      c->status = st_fail(c->err, ST_ERR_NOMEM, "out of host memory");
      return 1;
    }
    c->rows = r;
    c->cap = cap;
  }
  pair_row *r = &c->rows[c->n++];
  r->shape = s;
  snprintf(r->variant_id, sizeof r->variant_id, "%s", m->variant_id);
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->status, sizeof r->status, "%s", m->status);
  r->us = m->median_us;
  return note_kind(c, m->variant_id) != 0;
}

static int kind_of(const collect_ctx *c, const char *id) {
  for (int i = 0; i < c->nkinds; i++)
    if (strcmp(c->kinds[i].id, id) == 0) return c->kinds[i].is_default;
  return 0;
}

typedef struct op_sum {
  char op[32];
  int shapes, pairs, left_out, best_kept, none_kept;
  double *regret;
  int nregret;
} op_sum;

/* A rule's options as JSON; an unbounded radius is null. */
static void print_rule_json(const char *name, const st_search_rule *r) {
  printf("\"%s\": {\"threshold\": %.2f, \"neighbours\": %d, \"radius\": ", name, r->threshold, r->neighbours);
  if (isinf(r->radius))
    printf("null}");
  else
    printf("%.2f}", r->radius);
}

/* "within distance 8.0" or "at any distance". */
static const char *radius_text(const st_search_rule *r, char *buf, size_t cap) {
  if (isinf(r->radius)) return "at any distance";
  snprintf(buf, cap, "within distance %.1f", r->radius);
  return buf;
}

static void print_ops(const st_cli *cli, const st_run_row *run, const st_search_opts *o, const op_sum *ops, int nops) {
  if (cli->json) {
    printf("{\"run\": %lld, \"suite\": \"%s\", ", (long long)run->id, run->suite);
    print_rule_json("by_struct", &o->by_struct);
    printf(", ");
    print_rule_json("by_family", &o->by_family);
    printf(", \"ops\": [");
    for (int i = 0; i < nops; i++) {
      const op_sum *s = &ops[i];
      st_regret_summary r;
      st_regret_summarize(s->regret, s->nregret, &r);
      printf("%s{\"op\": \"%s\", \"shapes\": %d, \"pairs\": %d, \"left_out\": %d, \"best_kept\": %d, "
             "\"no_time_kept\": %d, \"regret\": ",
             i ? ", " : "", s->op, s->shapes, s->pairs, s->left_out, s->best_kept, s->none_kept);
      st_regret_print_json(stdout, &r);
      printf("}");
    }
    printf("]}\n");
    return;
  }
  char rs[48], rf[48];
  printf("Run %lld (suite %s, %s) replayed with --search model: a variant left out of a shape when\n"
         "its struct (its family less kN and qN) was at least %.2fx the best on the %d nearest shapes before it\n"
         "where it ran (%s), or its family at least %.2fx on the %d nearest (%s),\n"
         "each against the best there of what also applies to the shape; defaults kept.\n",
         (long long)run->id, run->suite, run->device_name, o->by_struct.threshold, o->by_struct.neighbours,
         radius_text(&o->by_struct, rs, sizeof rs), o->by_family.threshold, o->by_family.neighbours,
         radius_text(&o->by_family, rf, sizeof rf));
  if (strstr(run->args, "search=model"))
    printf("Note: this run was itself a --search model run; what it left out has no time to judge by.\n");
  for (int i = 0; i < nops; i++) {
    const op_sum *s = &ops[i];
    printf("\n%s: %d shapes, %d of %d (variant, shape) pairs left out (%.0f%%); the best kept on %d shapes", s->op,
           s->shapes, s->left_out, s->pairs, s->pairs ? 100.0 * s->left_out / s->pairs : 0.0, s->best_kept);
    if (s->none_kept) printf("; %d shapes kept no variant that ran correctly", s->none_kept);
    printf("\n");
    st_regret_summary r;
    st_regret_summarize(s->regret, s->nregret, &r);
    st_regret_print(stdout, "  best kept against the best", &r);
  }
}

static st_status summarize(const st_cli *cli, const st_run_row *run, const st_shape *shapes, int nshapes,
                           const st_search_replayed *r, st_err *err) {
  op_sum *ops = calloc((size_t)nshapes + 1, sizeof *ops);
  double *regret = calloc((size_t)nshapes + 1, sizeof *regret);
  if (!ops || !regret) {
    free(ops);
    free(regret);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  }
  int nops = 0, used = 0;
  /* Ops in the suite's order, each op's regrets consecutive in `regret`. */
  for (int i = 0; i < nshapes; i++) {
    int k = 0;
    while (k < nops && strcmp(ops[k].op, shapes[i].op)) k++;
    if (k < nops) continue;
    op_sum *s = &ops[nops++];
    snprintf(s->op, sizeof s->op, "%s", shapes[i].op);
    s->regret = regret + used;
    for (int j = i; j < nshapes; j++) {
      if (strcmp(shapes[j].op, s->op) || r[j].pairs == 0) continue;
      s->shapes++;
      s->pairs += r[j].pairs;
      s->left_out += r[j].left_out;
      if (r[j].best_us <= 0) continue;
      if (r[j].kept_us <= 0) { /* no kept variant ran correctly: counted apart, no finite regret */
        s->none_kept++;
        continue;
      }
      if (r[j].kept_us <= r[j].best_us) s->best_kept++;
      s->regret[s->nregret++] = r[j].kept_us / r[j].best_us - 1.0;
    }
    used += s->nregret;
  }
  const st_search_opts o = st_search_default_opts();
  print_ops(cli, run, &o, ops, nops);
  free(ops);
  free(regret);
  return ST_OK;
}

st_status st_show_search_replay(const st_cli *cli, st_db *db, int64_t run_id, st_err *err) {
  st_run_row run;
  int found = 0;
  st_status s = st_db_get_run(db, run_id, &run, &found, err);
  if (s != ST_OK) return s;
  if (!found) return st_fail(err, ST_ERR_INVALID_ARG, "no run %lld in %s", (long long)run_id, cli->db_path);
  if (strcmp(run.kind, "tune"))
    return st_fail(err, ST_ERR_INVALID_ARG, "run %lld is a %s run: only a tune's measurements can be replayed",
                   (long long)run_id, run.kind);
  st_gen *gen = NULL;
  st_shape *shapes = NULL;
  int nshapes = 0;
  collect_ctx c = {.db = db, .err = err, .status = ST_OK};
  st_search_pair *pairs = NULL;
  st_search_replayed *r = NULL;
  if ((s = st_gen_open(NULL, NULL, &gen, err)) != ST_OK) goto done;
  if ((s = st_gen_suite(gen, run.suite, strcmp(run.op, "*") ? run.op : NULL, &shapes, &nshapes, err)) != ST_OK)
    goto done;
  c.shapes = shapes;
  c.nshapes = nshapes;
  if ((s = st_db_each_measurement(db, run_id, collect, &c, err)) != ST_OK) goto done;
  if (c.status != ST_OK) {
    s = c.status;
    goto done;
  }
  pairs = calloc((size_t)c.n + 1, sizeof *pairs);
  r = calloc((size_t)nshapes + 1, sizeof *r);
  if (!pairs || !r) {
    s = st_fail(err, ST_ERR_NOMEM, "out of host memory");
    goto done;
  }
  for (int i = 0; i < c.n; i++)
    pairs[i] = (st_search_pair){.shape = c.rows[i].shape,
                                .name = c.rows[i].name,
                                .status = c.rows[i].status,
                                .us = c.rows[i].us,
                                .is_default = kind_of(&c, c.rows[i].variant_id)};
  const st_search_opts o = st_search_default_opts();
  if (st_search_replay(&o, shapes, nshapes, pairs, c.n, r) != 0) {
    s = st_fail(err, ST_ERR_NOMEM, "out of host memory");
    goto done;
  }
  s = summarize(cli, &run, shapes, nshapes, r, err);
done:
  free(r);
  free(pairs);
  free(c.rows);
  free(c.kinds);
  free(shapes);
  st_gen_close(gen);
  return s;
}
