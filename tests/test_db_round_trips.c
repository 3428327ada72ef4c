/* What is written through st_db comes back the same: devices, sources,
 * variants (parameters via JSON), binaries, shapes, runs, measurements,
 * winners; the keyed replace rules; transactions; read-only handles refuse
 * writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_db_fixture.h"

static uint64_t g_seed;

typedef struct fixture {
  char path[256];
  st_db *db;
  int64_t device;
  char v1[40], v2[40], v3[40];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->db = fx_open_temp(f->path, sizeof f->path);
  f->device = fx_device(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", "00112233445566778899aabbccddeeff");
  fx_variant(f->db, "index_decode", "single_t128", 1, f->v1);
  fx_variant(f->db, "index_decode", "split_t256", 0, f->v2);
  fx_variant(f->db, "sparse_attn", "attn_d128", 1, f->v3);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  st_db_close(f->db);
  fx_remove(f->path);
  free(f);
  return 0;
}

static void test_device_upsert_keeps_id(void **state) {
  fixture *f = *state;
  int64_t again = fx_device(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", "00112233445566778899aabbccddeeff");
  assert_int_equal(again, f->device);
  int64_t other = fx_device(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", "ffeeddccbbaa99887766554433221100");
  assert_true(other != f->device);
  st_device_info bad = {0};
  int64_t id = 0;
  st_err err = {{0}};
  assert_int_equal(st_db_put_device(f->db, &bad, &id, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "uuid"));
}

static void test_source_round_trip(void **state) {
  fixture *f = *state;
  const char *text = "// \"quoted\" 'single' \xc3\xa9\n__global__ void k() {}\n";
  st_params kernel = {0};
  st_err err = {{0}};
  assert_int_equal(st_params_set_int(&kernel, "threads", 256, &err), ST_OK);
  assert_int_equal(st_db_put_source(f->db, "abc123", "index_decode", &kernel, text, &err), ST_OK);
  /* Same hash again: ignored, the first text stays. */
  assert_int_equal(st_db_put_source(f->db, "abc123", "index_decode", &kernel, "other", &err), ST_OK);
  char *back = NULL;
  assert_int_equal(st_db_get_source(f->db, "abc123", &back, &err), ST_OK);
  assert_string_equal(back, text);
  free(back);
  assert_int_equal(st_db_get_source(f->db, "nope", &back, &err), ST_ERR_NO_VARIANT);
  assert_null(back);
  assert_non_null(strstr(err.msg, "nope"));
}

static void test_variant_parameters_round_trip(void **state) {
  fixture *f = *state;
  uint64_t rng = g_seed;
  st_variant_row v, back;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "rt_variant");
  snprintf(v.op, sizeof v.op, "index_decode");
  snprintf(v.name, sizeof v.name, "rt \"name\"");
  snprintf(v.source_hash, sizeof v.source_hash, "src_single_t128");
  st_err err = {{0}};
  char val[64];
  for (int i = 0; i < 12; i++) {
    char key[32];
    snprintf(key, sizeof key, "k%02d", (int)st_rand_int(&rng, 0, 99));
    if (i % 3 == 0)
      snprintf(val, sizeof val, "%lld", (long long)st_rand_int(&rng, -100000, 100000));
    else if (i % 3 == 1)
      snprintf(val, sizeof val, "s\"q\\%d", i);
    else
      snprintf(val, sizeof val, "%.3f", st_rand_uniform(&rng, 0, 1));
    assert_int_equal(st_params_set(&v.kernel, key, val, &err), ST_OK);
  }
  assert_int_equal(st_params_set(&v.launch, "leading_zero", "007", &err), ST_OK);
  assert_int_equal(st_params_set(&v.launch, "empty", "", &err), ST_OK);
  assert_int_equal(st_db_put_variant(f->db, &v, &err), ST_OK);
  assert_int_equal(st_db_put_variant(f->db, &v, &err), ST_OK); /* same id: ignored */
  assert_int_equal(st_db_get_variant(f->db, v.id, &back, &err), ST_OK);
  assert_string_equal(back.name, v.name);
  assert_string_equal(back.source_hash, v.source_hash);
  assert_int_equal(back.kernel.n, v.kernel.n);
  for (int i = 0; i < v.kernel.n; i++) {
    const char *got = st_params_get(&back.kernel, v.kernel.p[i].key);
    assert_non_null(got);
    assert_string_equal(got, v.kernel.p[i].val);
  }
  assert_int_equal(back.launch.n, 2);
  assert_string_equal(st_params_get(&back.launch, "leading_zero"), "007");
  assert_string_equal(st_params_get(&back.launch, "empty"), "");

  assert_int_equal(st_db_get_variant(f->db, "missing", &back, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "missing"));
  /* A variant over a source that was never stored breaks a foreign key. */
  snprintf(v.id, sizeof v.id, "orphan");
  snprintf(v.source_hash, sizeof v.source_hash, "no_such_source");
  assert_int_equal(st_db_put_variant(f->db, &v, &err), ST_ERR_DB);
  assert_non_null(strstr(err.msg, "FOREIGN KEY"));
}

typedef struct names {
  char name[8][160];
  int n, stop_after;
} names;

static int collect_name(void *ctx, const st_variant_row *v) {
  names *n = ctx;
  snprintf(n->name[n->n++], sizeof n->name[0], "%s", v->name);
  assert_int_equal(v->is_default, 1);
  assert_string_equal(st_params_get(&v->kernel, "threads"), "128");
  return n->stop_after && n->n == n->stop_after;
}

static void test_each_default_filters_by_op(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  names n = {0};
  assert_int_equal(st_db_each_default(f->db, "index_decode", collect_name, &n, &err), ST_OK);
  assert_int_equal(n.n, 1);
  assert_string_equal(n.name[0], "single_t128");
  memset(&n, 0, sizeof n);
  assert_int_equal(st_db_each_default(f->db, NULL, collect_name, &n, &err), ST_OK);
  assert_int_equal(n.n, 2);
  memset(&n, 0, sizeof n);
  n.stop_after = 1;
  assert_int_equal(st_db_each_default(f->db, NULL, collect_name, &n, &err), ST_OK);
  assert_int_equal(n.n, 1);
}

static void test_binary_round_trip_and_newest(void **state) {
  fixture *f = *state;
  uint64_t rng = g_seed ^ 0xb1;
  unsigned char cubin[5000];
  for (size_t i = 0; i < sizeof cubin; i++) cubin[i] = (unsigned char)st_rand_next(&rng);
  st_binary_row b;
  memset(&b, 0, sizeof b);
  snprintf(b.source_hash, sizeof b.source_hash, "src_single_t128");
  snprintf(b.arch, sizeof b.arch, "sm_90a");
  snprintf(b.compiler, sizeof b.compiler, "12.8");
  b.ok = 1;
  b.cubin = cubin;
  b.cubin_size = sizeof cubin;
  b.registers = 96;
  b.spill_bytes = 8;
  b.shared_bytes = 49152;
  b.local_bytes = 16;
  b.compile_ms = 812.5;
  b.log = "ptxas info: Used 96 registers";
  st_err err = {{0}};
  int found = -1;
  assert_int_equal(st_db_has_binary(f->db, b.source_hash, "sm_90a", NULL, &found, &err), ST_OK);
  assert_int_equal(found, 0);
  assert_int_equal(st_db_put_binary(f->db, &b, &err), ST_OK);
  b.ok = 0;
  b.cubin = NULL;
  b.cubin_size = 0;
  snprintf(b.compiler, sizeof b.compiler, "13.0");
  b.log = "error: too many resources";
  assert_int_equal(st_db_put_binary(f->db, &b, &err), ST_OK);

  assert_int_equal(st_db_has_binary(f->db, b.source_hash, "sm_90a", "12.8", &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_int_equal(st_db_has_binary(f->db, b.source_hash, "sm_100a", NULL, &found, &err), ST_OK);
  assert_int_equal(found, 0);

  st_binary_row back;
  assert_int_equal(st_db_get_binary(f->db, b.source_hash, "sm_90a", "12.8", &back, &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_int_equal(back.ok, 1);
  assert_int_equal(back.cubin_size, sizeof cubin);
  assert_memory_equal(back.cubin, cubin, sizeof cubin);
  assert_int_equal(back.registers, 96);
  assert_int_equal(back.spill_bytes, 8);
  assert_int_equal(back.shared_bytes, 49152);
  assert_int_equal(back.local_bytes, 16);
  assert_true(back.compile_ms == 812.5);
  assert_string_equal(back.log, "ptxas info: Used 96 registers");
  st_db_binary_free(&back);
  assert_null(back.cubin);

  /* Stored again (a resumed or repeated compile): the first row stays. */
  b.ok = 1;
  b.cubin = cubin + 1;
  b.cubin_size = sizeof cubin - 1;
  snprintf(b.compiler, sizeof b.compiler, "12.8");
  b.log = "another log";
  assert_int_equal(st_db_put_binary(f->db, &b, &err), ST_OK);
  assert_int_equal(st_db_get_binary(f->db, b.source_hash, "sm_90a", "12.8", &back, &found, &err), ST_OK);
  assert_int_equal(back.cubin_size, sizeof cubin);
  assert_memory_equal(back.cubin, cubin, sizeof cubin);
  assert_string_equal(back.log, "ptxas info: Used 96 registers");
  st_db_binary_free(&back);

  /* compiler NULL: the newest row, here the failed 13.0 compile. */
  assert_int_equal(st_db_get_binary(f->db, b.source_hash, "sm_90a", NULL, &back, &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_string_equal(back.compiler, "13.0");
  assert_int_equal(back.ok, 0);
  assert_null(back.cubin);
  assert_string_equal(back.log, "error: too many resources");
  st_db_binary_free(&back);

  assert_int_equal(st_db_get_binary(f->db, "nope", "sm_90a", NULL, &back, &found, &err), ST_OK);
  assert_int_equal(found, 0);
}

static void test_shape_upsert(void **state) {
  fixture *f = *state;
  st_params p = {0};
  st_err err = {{0}};
  assert_int_equal(st_params_set_int(&p, "B", 8, &err), ST_OK);
  assert_int_equal(st_db_put_shape(f->db, "B=8,ctx=4096", "index_decode", &p, "B=8", &err), ST_OK);
  assert_int_equal(st_db_put_shape(f->db, "B=8,ctx=4096", "index_decode", &p, "B=8,qlen=1", &err), ST_OK);
  assert_int_equal(st_db_put_shape(f->db, "", "index_decode", &p, "B=8", &err), ST_ERR_INVALID_ARG);
}

typedef struct run_ids {
  int64_t id[16];
  int n;
} run_ids;

static int collect_run_id(void *ctx, const st_run_row *r) {
  run_ids *ids = ctx;
  ids->id[ids->n++] = r->id;
  return 0;
}

static void test_runs_resume_and_list(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  int64_t a = fx_run(f->db, "tune", "index_decode", f->device, NULL);
  st_run_row like, got;
  int found = 0;
  assert_int_equal(st_db_get_run(f->db, a, &got, &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_string_equal(got.status, "running");
  assert_string_equal(got.device_name, "NVIDIA H100 80GB HBM3");
  assert_string_equal(got.arch, "sm_90a");
  assert_string_equal(got.finished, "");
  assert_int_equal(strlen(got.started), 24); /* 2025-01-31T12:00:00.000Z */
  like = got;

  int64_t r = -1;
  assert_int_equal(st_db_run_find_resumable(f->db, &like, &r, &err), ST_OK);
  assert_int_equal(r, a);
  assert_int_equal(st_db_run_finish(f->db, a, "done", &err), ST_OK);
  assert_int_equal(st_db_run_find_resumable(f->db, &like, &r, &err), ST_OK);
  assert_int_equal(r, 0);
  int64_t b = fx_run(f->db, "tune", "index_decode", f->device, "interrupted");
  assert_int_equal(st_db_run_find_resumable(f->db, &like, &r, &err), ST_OK);
  assert_int_equal(r, b);
  snprintf(like.args, sizeof like.args, "suite=other");
  assert_int_equal(st_db_run_find_resumable(f->db, &like, &r, &err), ST_OK);
  assert_int_equal(r, 0);

  assert_int_equal(st_db_get_run(f->db, a, &got, &found, &err), ST_OK);
  assert_string_equal(got.status, "done");
  assert_true(got.finished[0] != '\0');

  int64_t c = fx_run(f->db, "bench", "sparse_attn", f->device, "failed");
  run_ids ids = {0};
  assert_int_equal(st_db_each_run(f->db, 0, collect_run_id, &ids, &err), ST_OK);
  assert_int_equal(ids.n, 3);
  assert_int_equal(ids.id[0], c);
  assert_int_equal(ids.id[2], a);
  memset(&ids, 0, sizeof ids);
  assert_int_equal(st_db_each_run(f->db, 2, collect_run_id, &ids, &err), ST_OK);
  assert_int_equal(ids.n, 2);

  assert_int_equal(st_db_run_finish(f->db, 999, "done", &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "999"));
  assert_int_equal(st_db_run_finish(f->db, a, "exploded", &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_get_run(f->db, 999, &got, &found, &err), ST_OK);
  assert_int_equal(found, 0);
  like.device_id = 4242;
  assert_int_equal(st_db_run_begin(f->db, &like, &r, &err), ST_ERR_DB);
  assert_non_null(strstr(err.msg, "device_id=4242"));
}

typedef struct seen {
  st_measurement m[8];
  char name[8][160], op[8][32];
  int n;
} seen;

static int collect_measurement(void *ctx, const st_measurement *m, const char *name, const char *op) {
  seen *s = ctx;
  s->m[s->n] = *m;
  snprintf(s->name[s->n], sizeof s->name[0], "%s", name);
  snprintf(s->op[s->n], sizeof s->op[0], "%s", op);
  s->n++;
  return 0;
}

static void test_measurements_replace_by_key(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  int64_t run = fx_run(f->db, "tune", "index_decode", f->device, NULL);
  fx_measure(f->db, run, f->v1, "B=8", "ok", 10.0, 0.02, NULL);
  fx_measure(f->db, run, f->v1, "B=8", "ok", 12.5, 0.01, NULL); /* replaces */
  fx_measure(f->db, run, f->v2, "B=8", "wrong", 0, 0, "max_err 0.5 > 0.02");
  int found = 0;
  assert_int_equal(st_db_has_measurement(f->db, run, f->v1, "B=8", &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_int_equal(st_db_has_measurement(f->db, run, f->v1, "B=16", &found, &err), ST_OK);
  assert_int_equal(found, 0);

  seen s = {0};
  assert_int_equal(st_db_each_measurement(f->db, run, collect_measurement, &s, &err), ST_OK);
  assert_int_equal(s.n, 2);
  assert_string_equal(s.name[0], "single_t128");
  assert_string_equal(s.op[0], "index_decode");
  assert_true(s.m[0].median_us == 12.5);
  assert_true(s.m[0].spread == 0.01);
  assert_int_equal(s.m[0].reps, 5);
  assert_int_equal(s.m[0].iters, 20);
  assert_true(s.m[0].samples[0] == '[');
  assert_string_equal(s.m[1].status, "wrong");
  assert_string_equal(s.m[1].error, "max_err 0.5 > 0.02");

  st_run_counts c;
  assert_int_equal(st_db_run_counts(f->db, run, &c, &err), ST_OK);
  assert_int_equal(c.ok, 1);
  assert_int_equal(c.wrong, 1);
  assert_int_equal(c.failed + c.pruned, 0);

  st_measurement bad = s.m[0];
  snprintf(bad.status, sizeof bad.status, "great");
  assert_int_equal(st_db_put_measurement(f->db, &bad, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "great"));
  bad = s.m[0];
  bad.median_us = 0;
  assert_int_equal(st_db_put_measurement(f->db, &bad, &err), ST_ERR_INVALID_ARG);
  bad = s.m[0];
  snprintf(bad.samples, sizeof bad.samples, "[1,2");
  assert_int_equal(st_db_put_measurement(f->db, &bad, &err), ST_ERR_DB);
  bad = s.m[0];
  bad.run_id = 777;
  assert_int_equal(st_db_put_measurement(f->db, &bad, &err), ST_ERR_DB);
  assert_non_null(strstr(err.msg, "run_id=777"));
}

typedef struct winners {
  st_winner_row w[8];
  int n;
} winners;

static int collect_winner(void *ctx, const st_winner_row *w) {
  winners *ws = ctx;
  ws->w[ws->n++] = *w;
  return 0;
}

static void put_winner(fixture *f, int64_t device, const char *key, const char *variant, double us) {
  st_winner_row w;
  memset(&w, 0, sizeof w);
  w.device_id = device;
  snprintf(w.op, sizeof w.op, "index_decode");
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "%s", key);
  st_err err = {{0}};
  assert_int_equal(st_params_set(&w.dispatch, "B", key + 2, &err), ST_OK);
  assert_int_equal(st_params_set(&w.dispatch, "dtype", "bf16", &err), ST_OK);
  snprintf(w.variant_id, sizeof w.variant_id, "%s", variant);
  w.median_us = us;
  w.regret = 1.05;
  snprintf(w.default_variant_id, sizeof w.default_variant_id, "%s", f->v1);
  w.default_us = 2 * us;
  if (st_db_put_winner(f->db, &w, &err) != ST_OK) fail_msg("put_winner: %s", err.msg);
}

static void test_winners_newest_per_model(void **state) {
  fixture *f = *state;
  int64_t twin = fx_device(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", "twin-card-uuid");
  int64_t other = fx_device(f->db, "NVIDIA H200", "sm_90a", "h200-uuid");
  put_winner(f, f->device, "B=8", f->v1, 10);
  put_winner(f, twin, "B=8", f->v2, 9); /* newer, other card of the model */
  put_winner(f, f->device, "B=16", f->v2, 20);
  put_winner(f, f->device, "B=16", f->v1, 19); /* replaces the row above */
  put_winner(f, other, "B=32", f->v1, 5);

  winners ws = {0};
  st_err err = {{0}};
  assert_int_equal(st_db_each_winner(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", collect_winner, &ws, &err), ST_OK);
  assert_int_equal(ws.n, 2);
  assert_string_equal(ws.w[0].dispatch_key, "B=16");
  assert_string_equal(ws.w[0].variant_id, f->v1);
  assert_true(ws.w[0].median_us == 19);
  assert_string_equal(ws.w[1].dispatch_key, "B=8");
  assert_string_equal(ws.w[1].variant_id, f->v2);
  assert_int_equal(ws.w[1].device_id, twin);
  assert_string_equal(ws.w[1].variant_name, "split_t256");
  assert_string_equal(ws.w[1].default_variant_id, f->v1);
  assert_true(ws.w[1].default_us == 18);
  assert_true(ws.w[1].regret == 1.05);
  assert_int_equal(ws.w[1].run_id, 0);
  assert_string_equal(st_params_get(&ws.w[1].dispatch, "B"), "8");
  assert_string_equal(st_params_get(&ws.w[1].dispatch, "dtype"), "bf16");

  memset(&ws, 0, sizeof ws);
  assert_int_equal(st_db_each_winner(f->db, "NVIDIA H100 80GB HBM3", "sm_100a", collect_winner, &ws, &err), ST_OK);
  assert_int_equal(ws.n, 0);
  assert_int_equal(st_db_each_winner(f->db, "NVIDIA H200", NULL, collect_winner, &ws, &err), ST_OK);
  assert_int_equal(ws.n, 1);
  assert_string_equal(ws.w[0].dispatch_key, "B=32");
}

static void test_transactions_commit_and_roll_back(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  int64_t run = fx_run(f->db, "tune", "index_decode", f->device, NULL);
  assert_int_equal(st_db_begin(f->db, &err), ST_OK);
  assert_int_equal(st_db_begin(f->db, &err), ST_ERR_INVALID_ARG);
  fx_measure(f->db, run, f->v1, "B=1", "ok", 3, 0.01, NULL);
  st_db_rollback(f->db);
  int found = 1;
  assert_int_equal(st_db_has_measurement(f->db, run, f->v1, "B=1", &found, &err), ST_OK);
  assert_int_equal(found, 0);

  assert_int_equal(st_db_begin(f->db, &err), ST_OK);
  fx_measure(f->db, run, f->v1, "B=1", "ok", 3, 0.01, NULL);
  fx_measure(f->db, run, f->v2, "B=1", "ok", 4, 0.01, NULL);
  assert_int_equal(st_db_commit(f->db, &err), ST_OK);
  assert_int_equal(st_db_has_measurement(f->db, run, f->v2, "B=1", &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_int_equal(st_db_commit(f->db, &err), ST_ERR_INVALID_ARG);
  st_db_rollback(f->db); /* no transaction: nothing happens */
}

static void test_read_only_handle_refuses_writes(void **state) {
  fixture *f = *state;
  st_db *ro = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &ro, &err), ST_OK);
  st_variant_row v;
  assert_int_equal(st_db_get_variant(ro, f->v1, &v, &err), ST_OK);
  assert_string_equal(v.name, "single_t128");
  st_device_info dev = {0};
  snprintf(dev.uuid, sizeof dev.uuid, "x");
  snprintf(dev.name, sizeof dev.name, "x");
  snprintf(dev.arch, sizeof dev.arch, "x");
  int64_t id = 0;
  assert_int_equal(st_db_put_device(ro, &dev, &id, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "read-only"));
  assert_int_equal(st_db_put_variant(ro, &v, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_run_finish(ro, 1, "done", &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_begin(ro, &err), ST_OK); /* a read snapshot */
  assert_int_equal(st_db_commit(ro, &err), ST_OK);
  st_db_close(ro);
}

int main(void) {
  g_seed = st_test_seed("test_db_round_trips");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_device_upsert_keeps_id, setup, teardown),
      cmocka_unit_test_setup_teardown(test_source_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_variant_parameters_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_each_default_filters_by_op, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binary_round_trip_and_newest, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shape_upsert, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runs_resume_and_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_measurements_replace_by_key, setup, teardown),
      cmocka_unit_test_setup_teardown(test_winners_newest_per_model, setup, teardown),
      cmocka_unit_test_setup_teardown(test_transactions_commit_and_roll_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_only_handle_refuses_writes, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
