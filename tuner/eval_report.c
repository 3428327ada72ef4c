/* eval_report.c - what `sparsetune eval` prints of its rows
 * (eval_report.h). */
#include "eval_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_stats.h"
#include "ops/op.h"
#include "report.h"

double st_eval_regret(const st_bench_time *t, const st_bench_time *oracle) {
  if (strcmp(t->status, "ok") != 0 || strcmp(oracle->status, "ok") != 0 || oracle->us <= 0) return NAN;
  return t->us / oracle->us - 1.0;
}

static void json_time(FILE *f, const char *name, const st_bench_time *t) {
  fprintf(f, ",\"%s_us\":", name);
  if (strcmp(t->status, "ok") == 0)
    fprintf(f, "%.3f", t->us);
  else
    fputs("null", f);
  fprintf(f, ",\"%s_variant\":", name);
  st_json_str(f, t->variant);
}

/* The regrets of the rows of `kind` and `op` (NULL: any), the database's
 * (ours) or the built-in variants'. */
static void summarize(const st_eval_row *rows, int n, const char *kind, const char *op, int ours,
                      st_regret_summary *out) {
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  int m = 0;
  for (int i = 0; v && i < n; i++)
    if ((!kind || strcmp(rows[i].kind, kind) == 0) && (!op || strcmp(rows[i].shape->op, op) == 0))
      v[m++] = ours ? rows[i].regret_ours : rows[i].regret_builtin;
  st_regret_summarize(v, m, out);
  free(v);
}

/* The ops of the rows, each once, in the order they first come. */
static int distinct_ops(const st_eval_row *rows, int n, const char *ops[ST_OP_COUNT]) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < m && !seen; j++) seen = strcmp(ops[j], rows[i].shape->op) == 0;
    if (!seen && m < ST_OP_COUNT) ops[m++] = rows[i].shape->op;
  }
  return m;
}

static int count_kind(const st_eval_row *rows, int n, const char *kind) {
  int m = 0;
  for (int i = 0; i < n; i++) m += !kind || strcmp(rows[i].kind, kind) == 0;
  return m;
}

/* The database's regrets, then the built-in variants', of the rows of
 * `kind` and `op` (NULL: any), named by `of`. */
static void print_pair(FILE *f, const st_cli *cli, const st_eval_row *rows, int n, const char *kind, const char *op,
                       const char *of) {
  char what[96];
  st_regret_summary s;
  summarize(rows, n, kind, op, 1, &s);
  snprintf(what, sizeof what, "regret of the database%s, %s", cli->leave_one_out ? " less each key" : "", of);
  st_regret_print(f, what, &s);
  summarize(rows, n, kind, op, 0, &s);
  snprintf(what, sizeof what, "regret of the built-in variants, %s", of);
  st_regret_print(f, what, &s);
}

/* Per kind with shapes, then all, then per op. */
static void print_summaries(FILE *f, const st_cli *cli, const st_eval_row *rows, int n) {
  static const char *const kinds[] = {"decode", "prefill", NULL};
  for (int k = 0; k < 3; k++)
    if (count_kind(rows, n, kinds[k]) > 0) print_pair(f, cli, rows, n, kinds[k], NULL, kinds[k] ? kinds[k] : "all");
  const char *ops[ST_OP_COUNT];
  const int m = distinct_ops(rows, n, ops);
  for (int j = 0; j < m; j++) print_pair(f, cli, rows, n, NULL, ops[j], ops[j]);
}

/* A regret beyond which the text names what ran and what the oracle ran. */
#define MISS_REGRET 0.05

/* The name part of a st_bench_time variant ("id name"). */
static const char *variant_name(const st_bench_time *t) {
  const char *space = strchr(t->variant, ' ');
  return space ? space + 1 : t->variant;
}

/* Every choice more than MISS_REGRET slower than the oracle, with the two
 * variants: what to look at first. */
static void print_misses(FILE *f, const st_cli *cli, const st_eval_row *rows, int n) {
  int shown = 0;
  for (int i = 0; i < n; i++) {
    const st_eval_row *r = &rows[i];
    const st_bench_time *t[2] = {&r->ours, &r->builtin};
    const double g[2] = {r->regret_ours, r->regret_builtin};
    const char *who[2] = {cli->leave_one_out ? "held out" : "database", "built-in"};
    /* The same variant both ways (no winner for the key): one line. */
    const int same = strcmp(t[0]->variant, t[1]->variant) == 0;
    if (same) who[0] = cli->leave_one_out ? "held out = built-in" : "database = built-in";
    for (int k = 0; k < 2 - same; k++) {
      if (!(g[k] > MISS_REGRET)) continue;
      if (!shown++)
        fprintf(f, "choices more than %.0f%% slower than the oracle, and what each ran:\n", 100 * MISS_REGRET);
      const char *key = strchr(r->shape->key, ':') ? strchr(r->shape->key, ':') + 1 : r->shape->key;
      fprintf(f, "  %s %s: %s +%.1f%% %s; oracle %s\n", r->shape->op, key, who[k], 100 * g[k], variant_name(t[k]),
              variant_name(&r->oracle));
    }
  }
}

void st_eval_print_table(FILE *f, const st_cli *cli, const st_eval_row *rows, int n) {
  fprintf(f, "%-18s %-62s %10s %10s %7s %10s %7s\n", "op", "shape", cli->leave_one_out ? "tuned us" : "oracle us",
          cli->leave_one_out ? "held out" : "db us", "regret", "built-in", "regret");
  for (int i = 0; i < n; i++) {
    const st_eval_row *r = &rows[i];
    const char *key = strchr(r->shape->key, ':') ? strchr(r->shape->key, ':') + 1 : r->shape->key;
    fprintf(f, "%-18s %-62s", r->shape->op, key);
    const st_bench_time *t[3] = {&r->oracle, &r->ours, &r->builtin};
    const double g[3] = {NAN, r->regret_ours, r->regret_builtin};
    for (int k = 0; k < 3; k++) {
      if (strcmp(t[k]->status, "ok") == 0)
        fprintf(f, " %10.2f", t[k]->us);
      else
        fprintf(f, " %10s", t[k]->status);
      if (k > 0 && isnan(g[k]))
        fprintf(f, " %7s", "-");
      else if (k > 0)
        fprintf(f, " %6.1f%%", 100 * g[k]);
    }
    fprintf(f, "\n");
    for (int k = 0; k < 3; k++)
      if (strcmp(t[k]->status, "ok") != 0)
        fprintf(f, "    %s: %s\n", k == 0 ? "oracle" : k == 1 ? "database" : "built-in", t[k]->error);
  }
  print_misses(f, cli, rows, n);
  print_summaries(f, cli, rows, n);
}

/* {"db": summary, "builtin": summary} of the rows of `kind` and `op`. */
static void json_pair(FILE *f, const st_eval_row *rows, int n, const char *kind, const char *op) {
  st_regret_summary s;
  fprintf(f, "{\"db\":");
  summarize(rows, n, kind, op, 1, &s);
  st_regret_print_json(f, &s);
  fprintf(f, ",\"builtin\":");
  summarize(rows, n, kind, op, 0, &s);
  st_regret_print_json(f, &s);
  fprintf(f, "}");
}

void st_eval_print_json(FILE *f, const st_cli *cli, const char *oracle, const st_eval_row *rows, int n) {
  fprintf(f, "{\"db\":");
  st_json_str(f, cli->db_path);
  fprintf(f, ",\"oracle_db\":");
  st_json_str(f, oracle);
  if (cli->leave_one_out) {
    fprintf(f, ",\"leave_one_out\":");
    st_json_str(f, cli->suite);
    fprintf(f, ",\"seed\":%llu,\"shapes\":[", cli->seed);
  } else {
    fprintf(f, ",\"seed\":%llu,\"decode\":%d,\"prefill\":%d,\"oracle_search\":\"%s\",\"shapes\":[", cli->seed,
            cli->eval_decode, cli->eval_prefill, cli->search_model ? "model" : "full");
  }
  for (int i = 0; i < n; i++) {
    const st_eval_row *r = &rows[i];
    fprintf(f, "%s{\"op\":", i ? "," : "");
    st_json_str(f, r->shape->op);
    fprintf(f, ",\"shape\":");
    st_json_str(f, r->shape->key);
    json_time(f, "oracle", &r->oracle);
    json_time(f, "db", &r->ours);
    json_time(f, "builtin", &r->builtin);
    fprintf(f, "}");
  }
  fprintf(f, "],\"summary\":{");
  static const char *const kinds[] = {"decode", "prefill", NULL};
  for (int k = 0; k < 3; k++) {
    fprintf(f, "%s\"%s\":", k ? "," : "", kinds[k] ? kinds[k] : "all");
    json_pair(f, rows, n, kinds[k], NULL);
  }
  const char *ops[ST_OP_COUNT];
  const int m = distinct_ops(rows, n, ops);
  fprintf(f, ",\"by_op\":{");
  for (int j = 0; j < m; j++) {
    fprintf(f, "%s", j ? "," : "");
    st_json_str(f, ops[j]);
    fputc(':', f);
    json_pair(f, rows, n, NULL, ops[j]);
  }
  fprintf(f, "}}}\n");
}
