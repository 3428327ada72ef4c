/* gpu_db.c - the database the runtime's GPU tests open (gpu_db.h). */
#include "gpu_db.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "cuda_driver.h"
#include "st_db_write.h"
#include "testutil.h"

static const st_variant_row *pick_winner(const st_gen_variant *v, int nv, const char *algo, const char *splits) {
  for (int i = 0; i < nv; i++) {
    const char *a = st_params_get(&v[i].row.kernel, "algo");
    const char *s = st_params_get(&v[i].row.launch, "splits");
    if (!v[i].row.is_default && a && !strcmp(a, algo) && s && !strcmp(s, splits)) return &v[i].row;
  }
  return NULL;
}

static void record_winner(st_db *db, const st_device_info *dev, const char *op, const char *dispatch_key,
                          const st_variant_row *winner) {
  st_err err = {{0}};
  int64_t device_id = 0, run_id = 0;
  assert_int_equal(st_db_put_device(db, dev, &device_id, &err), ST_OK);
  st_run_row run;
  memset(&run, 0, sizeof run);
  snprintf(run.kind, sizeof run.kind, "tune");
  snprintf(run.op, sizeof run.op, "%s", op);
  snprintf(run.suite, sizeof run.suite, "test");
  snprintf(run.arch, sizeof run.arch, "%s", dev->arch);
  run.device_id = device_id;
  assert_int_equal(st_db_run_begin(db, &run, &run_id, &err), ST_OK);
  st_winner_row w;
  memset(&w, 0, sizeof w);
  w.device_id = device_id;
  snprintf(w.op, sizeof w.op, "%s", op);
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "%s", dispatch_key);
  assert_int_equal(st_params_parse_key(w.dispatch_key, &w.dispatch, &err), ST_OK);
  snprintf(w.variant_id, sizeof w.variant_id, "%s", winner->id);
  snprintf(w.variant_name, sizeof w.variant_name, "%s", winner->name);
  w.run_id = run_id;
  w.median_us = 5;
  w.regret = 1;
  assert_int_equal(st_db_put_winner(db, &w, &err), ST_OK);
}

void st_test_make_db(const char *op, const st_shape *shape, const char *dispatch_key, const char *algo,
                     const char *splits, char *path, size_t cap, char *winner_id) {
  st_err err = {{0}};
  st_gen *gen = NULL;
  assert_int_equal(st_gen_open(NULL, NULL, &gen, &err), ST_OK);
  st_gen_variant *v = NULL;
  int nv = 0;
  if (st_gen_variants(gen, op, shape, 1, &v, &nv, &err) != ST_OK) fail_msg("%s", err.msg);
  const st_cu *cu = NULL;
  st_device_info dev;
  assert_int_equal(st_cu_load(&cu, &err), ST_OK);
  assert_int_equal(st_cu_device_info(cu, 0, &dev, &err), ST_OK);
  st_test_temp_path(path, cap, ".db");
  st_db *db = NULL;
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_int_equal(st_db_begin(db, &err), ST_OK);
  for (int i = 0; i < nv; i++) {
    assert_int_equal(st_db_put_source(db, v[i].row.source_hash, op, &v[i].row.kernel, v[i].source, &err), ST_OK);
    assert_int_equal(st_db_put_variant(db, &v[i].row, &err), ST_OK);
  }
  const st_variant_row *winner = pick_winner(v, nv, algo, splits);
  if (!winner) fail_msg("no non-default %s variant with algo=%s, splits=%s", op, algo, splits);
  assert_int_equal(st_db_commit(db, &err), ST_OK);
  st_compile_stats stats;
  if (st_compile_all(db, v, nv, dev.arch, 0, NULL, NULL, NULL, &stats, &err) != ST_OK) fail_msg("%s", err.msg);
  assert_int_equal(stats.failed, 0);
  record_winner(db, &dev, op, dispatch_key, winner);
  snprintf(winner_id, 40, "%s", winner->id);
  printf("# winner %s\n", winner->name);
  st_db_close(db);
  st_gen_free_variants(v, nv);
  st_gen_close(gen);
}

void st_test_remove_db(const char *path) {
  char side[300];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
}
