/* test_eval_report.c - what `sparsetune eval` prints of its rows, on rows
 * made up here (no GPU): the regret of a choice, the table with the misses
 * naming the variants that ran, once where the database's choice is the
 * built-in one, the summaries per kind and per op, and one JSON document
 * with every text escaped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_report.h"
#include "testutil.h"

static st_shape shapes[3];

static st_bench_time timed(const char *variant, double us) {
  st_bench_time t;
  memset(&t, 0, sizeof t);
  snprintf(t.status, sizeof t.status, "ok");
  snprintf(t.variant, sizeof t.variant, "%s", variant);
  t.us = us;
  return t;
}

/* Three decode rows: index_decode at +0% and +40% (the database's choice
 * the built-in one), sparse_attn_decode whose database choice (+2%) is
 * not the built-in one (+20%). */
static void make_rows(st_eval_row rows[3]) {
  snprintf(shapes[0].op, sizeof shapes[0].op, "index_decode");
  snprintf(shapes[0].key, sizeof shapes[0].key, "index_decode:B=1,note=\"q\"");
  snprintf(shapes[1].op, sizeof shapes[1].op, "sparse_attn_decode");
  snprintf(shapes[1].key, sizeof shapes[1].key, "sparse_attn_decode:B=1");
  snprintf(shapes[2].op, sizeof shapes[2].op, "index_decode");
  snprintf(shapes[2].key, sizeof shapes[2].key, "index_decode:B=2");
  const double db_us[3] = {10, 10.2, 14}, builtin_us[3] = {10, 12, 14};
  for (int i = 0; i < 3; i++) {
    st_eval_row *r = &rows[i];
    memset(r, 0, sizeof *r);
    r->shape = &shapes[i];
    r->kind = "decode";
    r->oracle = timed("o1 oracle.variant", 10);
    r->ours = timed(i == 1 ? "d1 tuned.winner" : "b1 builtin.variant", db_us[i]);
    r->builtin = timed("b1 builtin.variant", builtin_us[i]);
    r->regret_ours = st_eval_regret(&r->ours, &r->oracle);
    r->regret_builtin = st_eval_regret(&r->builtin, &r->oracle);
  }
}

/* What `print` writes, as a malloc'ed string. */
static char *captured(void (*print)(FILE *, const st_cli *, const st_eval_row *, int), const st_cli *cli,
                      const st_eval_row *rows, int n) {
  FILE *f = tmpfile();
  assert_non_null(f);
  print(f, cli, rows, n);
  const long len = ftell(f);
  char *out = calloc((size_t)len + 1, 1);
  assert_non_null(out);
  rewind(f);
  assert_int_equal(fread(out, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  return out;
}

static void json_with_oracle(FILE *f, const st_cli *cli, const st_eval_row *rows, int n) {
  st_eval_print_json(f, cli, "oracle \"o\".db", rows, n);
}

static void expect_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("missing '%s' in:\n%s", part, text);
}

static void regret_is_time_over_oracle_or_nan(void **state) {
  (void)state;
  st_bench_time o = timed("o", 8), t = timed("t", 10);
  assert_true(fabs(st_eval_regret(&t, &o) - 0.25) < 1e-12);
  snprintf(t.status, sizeof t.status, "failed");
  assert_true(isnan(st_eval_regret(&t, &o)));
  t = timed("t", 10);
  o.us = 0;
  assert_true(isnan(st_eval_regret(&t, &o)));
}

static void table_names_the_misses_and_summarizes_per_op(void **state) {
  (void)state;
  st_eval_row rows[3];
  make_rows(rows);
  st_cli cli;
  memset(&cli, 0, sizeof cli);
  char *text = captured(st_eval_print_table, &cli, rows, 3);
  expect_contains(text, "choices more than 5% slower than the oracle, and what each ran:");
  /* the same variant both ways: one line; another: the built-in's alone
   * (the database's +2% is no miss); none for the +0% row */
  expect_contains(text, "  index_decode B=2: database = built-in +40.0% builtin.variant; oracle oracle.variant\n");
  expect_contains(text, "  sparse_attn_decode B=1: built-in +20.0% builtin.variant; oracle oracle.variant\n");
  assert_null(strstr(text, "index_decode B=2: built-in"));
  assert_null(strstr(text, "sparse_attn_decode B=1: database"));
  assert_null(strstr(text, "B=1,note=\"q\": database"));
  expect_contains(text, "regret of the built-in variants, decode, 3 shapes: median 20.0%, p95 40.0%, max 40.0%");
  expect_contains(text, "regret of the database, sparse_attn_decode, 1 shapes: median 2.0%");
  expect_contains(text, "regret of the built-in variants, index_decode, 2 shapes: median 20.0%");
  free(text);
  cli.leave_one_out = 1;
  text = captured(st_eval_print_table, &cli, rows, 3);
  expect_contains(text, "held out = built-in +40.0%");
  expect_contains(text, "regret of the database less each key, decode");
  free(text);
}

static void json_is_one_document_with_the_summaries_by_op(void **state) {
  (void)state;
  st_eval_row rows[3];
  make_rows(rows);
  st_cli cli;
  memset(&cli, 0, sizeof cli);
  cli.db_path = "my \"db\".db";
  cli.seed = 7;
  cli.eval_decode = 3;
  char *text = captured(json_with_oracle, &cli, rows, 3);
  expect_contains(text, "{\"db\":\"my \\\"db\\\".db\",\"oracle_db\":\"oracle \\\"o\\\".db\",\"seed\":7,\"decode\":3,");
  expect_contains(text, "\"shape\":\"index_decode:B=1,note=\\\"q\\\"\"");
  expect_contains(text, "\"builtin_us\":12.000,\"builtin_variant\":\"b1 builtin.variant\"");
  expect_contains(text, ",\"by_op\":{\"index_decode\":{\"db\":{\"n\":2,");
  expect_contains(text, "\"sparse_attn_decode\":{\"db\":{\"n\":1,");
  const size_t len = strlen(text);
  assert_true(len > 4 && strcmp(text + len - 4, "}}}\n") == 0);
  int depth = 0, in_string = 0;
  for (size_t i = 0; i < len; i++) { /* braces and brackets balance outside strings */
    if (in_string) {
      if (text[i] == '\\')
        i++;
      else if (text[i] == '"')
        in_string = 0;
      continue;
    }
    if (text[i] == '"') in_string = 1;
    depth += (text[i] == '{' || text[i] == '[') - (text[i] == '}' || text[i] == ']');
    assert_true(depth >= 0);
  }
  assert_int_equal(depth, 0);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(regret_is_time_over_oracle_or_nan),
      cmocka_unit_test(table_names_the_misses_and_summarizes_per_op),
      cmocka_unit_test(json_is_one_document_with_the_summaries_by_op),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
