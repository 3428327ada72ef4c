/* One writer and readers at once (WAL): a read-only handle opens while a
 * writer holds the file, sees what was committed and not what is still in
 * an open transaction, is never blocked by it, and never changes the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_db_fixture.h"

typedef struct fixture {
  char path[256];
  st_db *writer;
  int64_t device, run;
  char v1[40], v2[40];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->writer = fx_open_temp(f->path, sizeof f->path);
  f->device = fx_device(f->writer, "NVIDIA H100 80GB HBM3", "sm_90a", "uuid-writer");
  fx_variant(f->writer, "index_decode", "v1", 1, f->v1);
  fx_variant(f->writer, "index_decode", "v2", 0, f->v2);
  f->run = fx_run(f->writer, "tune", "index_decode", f->device, NULL);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  st_db_close(f->writer);
  fx_remove(f->path);
  free(f);
  return 0;
}

static int has(st_db *db, const fixture *f, const char *variant, const char *shape) {
  int found = -1;
  st_err err = {{0}};
  if (st_db_has_measurement(db, f->run, variant, shape, &found, &err) != ST_OK) fail_msg("%s", err.msg);
  return found;
}

static void test_reader_sees_committed_data_while_writer_is_open(void **state) {
  fixture *f = *state;
  fx_measure(f->writer, f->run, f->v1, "B=1", "ok", 5, 0.01, NULL);
  st_db *reader = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &reader, &err), ST_OK);
  assert_int_equal(has(reader, f, f->v1, "B=1"), 1);

  /* An open write transaction: the reader keeps its view and is not blocked. */
  assert_int_equal(st_db_begin(f->writer, &err), ST_OK);
  fx_measure(f->writer, f->run, f->v2, "B=1", "ok", 6, 0.01, NULL);
  assert_int_equal(has(f->writer, f, f->v2, "B=1"), 1);
  assert_int_equal(has(reader, f, f->v2, "B=1"), 0);
  st_db *late = NULL;
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &late, &err), ST_OK);
  assert_int_equal(has(late, f, f->v2, "B=1"), 0);
  assert_int_equal(st_db_commit(f->writer, &err), ST_OK);
  assert_int_equal(has(reader, f, f->v2, "B=1"), 1);
  assert_int_equal(has(late, f, f->v2, "B=1"), 1);

  /* Autocommit writes show up at once. */
  fx_measure(f->writer, f->run, f->v2, "B=2", "ok", 7, 0.01, NULL);
  assert_int_equal(has(reader, f, f->v2, "B=2"), 1);
  st_db_close(late);
  st_db_close(reader);
}

static void test_reader_snapshot_is_stable_within_its_transaction(void **state) {
  fixture *f = *state;
  st_db *reader = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &reader, &err), ST_OK);
  assert_int_equal(st_db_begin(reader, &err), ST_OK);
  assert_int_equal(has(reader, f, f->v1, "B=4"), 0);
  fx_measure(f->writer, f->run, f->v1, "B=4", "ok", 5, 0.01, NULL); /* the writer is not blocked */
  assert_int_equal(has(reader, f, f->v1, "B=4"), 0);
  assert_int_equal(st_db_commit(reader, &err), ST_OK);
  assert_int_equal(has(reader, f, f->v1, "B=4"), 1);
  st_db_close(reader);
}

static void test_read_only_open_leaves_the_file_unchanged(void **state) {
  fixture *f = *state;
  fx_measure(f->writer, f->run, f->v1, "B=16", "ok", 5, 0.01, NULL);
  st_db_close(f->writer); /* last connection: checkpointed into the main file */
  f->writer = NULL;
  size_t n0 = 0;
  unsigned char *before = fx_read_file(f->path, &n0);
  st_db *reader = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &reader, &err), ST_OK);
  assert_int_equal(has(reader, f, f->v1, "B=16"), 1);
  st_variant_row v;
  assert_int_equal(st_db_get_variant(reader, f->v1, &v, &err), ST_OK);
  st_db_close(reader);
  fx_expect_unchanged(f->path, before, n0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_reader_sees_committed_data_while_writer_is_open, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reader_snapshot_is_stable_within_its_transaction, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_only_open_leaves_the_file_unchanged, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
