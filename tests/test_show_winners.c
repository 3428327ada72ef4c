/* `sparsetune show winners [DEVICE]`, run as the command runs it: the
 * winners of the device model named exactly DEVICE (text and JSON), of
 * every model without a name (however many there are), and an unknown name
 * refused with exit 2 and the names the database has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "test_db_fixture.h"

typedef struct fixture {
  char path[256];
  st_db *db;
  char variant[40];
} fixture;

/* A winner of `device` from a run of its own; the variant's name is
 * "<name>_best" so that a report shows whose winner it lists. */
static void device_with_winner(st_db *db, const char *name, const char *uuid) {
  const int64_t device = fx_device(db, name, "sm_90a", uuid);
  const int64_t run = fx_run(db, "tune", "index_decode", device, "done");
  char variant_name[160], id[40];
  snprintf(variant_name, sizeof variant_name, "%s_best", name);
  fx_variant(db, "index_decode", variant_name, 0, id);
  st_winner_row w;
  memset(&w, 0, sizeof w);
  w.device_id = device;
  snprintf(w.op, sizeof w.op, "index_decode");
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "B=1,dtype=bf16");
  snprintf(w.variant_id, sizeof w.variant_id, "%s", id);
  w.run_id = run;
  w.median_us = 10;
  w.regret = 1;
  st_err err = {{0}};
  if (st_db_put_winner(db, &w, &err) != ST_OK) fail_msg("put_winner: %s", err.msg);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->db = fx_open_temp(f->path, sizeof f->path);
  device_with_winner(f->db, "NVIDIA H100 80GB HBM3", "uuid-h100");
  device_with_winner(f->db, "NVIDIA H200", "uuid-h200");
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

typedef struct result {
  int rc;
  char *out, *err; /* what the command wrote to stdout and stderr */
} result;

static char *read_all(FILE *f) {
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  const long n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  char *text = calloc((size_t)n + 1, 1);
  assert_non_null(text);
  assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
  assert_int_equal(fclose(f), 0);
  return text;
}

/* `sparsetune show ARGS... --db PATH` in this process, stdout and stderr
 * captured. */
static result run_show(const char *path, const char *const *args, int nargs) {
  char *argv[16];
  int argc = 0;
  argv[argc++] = (char *)"show";
  for (int i = 0; i < nargs; i++) argv[argc++] = (char *)args[i];
  argv[argc++] = (char *)"--db";
  argv[argc++] = (char *)path;
  argv[argc] = NULL;
  FILE *out = tmpfile(), *err = tmpfile();
  assert_non_null(out);
  assert_non_null(err);
  fflush(stdout);
  fflush(stderr);
  const int saved_out = dup(1), saved_err = dup(2);
  assert_true(saved_out >= 0 && saved_err >= 0);
  assert_true(dup2(fileno(out), 1) >= 0 && dup2(fileno(err), 2) >= 0);
  result r = {.rc = st_cmd_show(argc, argv)};
  fflush(stdout);
  fflush(stderr);
  assert_true(dup2(saved_out, 1) >= 0 && dup2(saved_err, 2) >= 0);
  close(saved_out);
  close(saved_err);
  r.out = read_all(out);
  r.err = read_all(err);
  printf("# show");
  for (int i = 0; i < nargs; i++) printf(" '%s'", args[i]);
  printf(": exit %d\n%s%s", r.rc, r.out, r.err);
  return r;
}

static void result_free(result *r) {
  free(r->out);
  free(r->err);
}

static int count(const char *text, const char *part) {
  int n = 0;
  for (const char *p = strstr(text, part); p; p = strstr(p + 1, part)) n++;
  return n;
}

static void test_winners_of_the_named_device_only(void **state) {
  fixture *f = *state;
  const char *const args[] = {"winners", "NVIDIA H200"};
  result r = run_show(f->path, args, 2);
  assert_int_equal(r.rc, ST_EXIT_OK);
  assert_int_equal(count(r.out, "winners for "), 1);
  assert_non_null(strstr(r.out, "winners for NVIDIA H200 (any arch)"));
  assert_non_null(strstr(r.out, "NVIDIA H200_best"));
  assert_null(strstr(r.out, "H100"));
  assert_string_equal(r.err, "");
  result_free(&r);
}

static void test_winners_of_the_named_device_as_json(void **state) {
  fixture *f = *state;
  const char *const args[] = {"winners", "--json", "NVIDIA H100 80GB HBM3"};
  result r = run_show(f->path, args, 3);
  assert_int_equal(r.rc, ST_EXIT_OK);
  assert_true(fx_json_valid(r.out));
  char *device = fx_json_get(r.out, "$.device");
  assert_string_equal(device, "NVIDIA H100 80GB HBM3");
  free(device);
  char *variant = fx_json_get(r.out, "$.winners[0].variant");
  assert_string_equal(variant, "NVIDIA H100 80GB HBM3_best");
  free(variant);
  char *n = fx_json_query("SELECT json_array_length(?1, '$.winners')", r.out, NULL);
  assert_string_equal(n, "1");
  free(n);
  result_free(&r);
}

/* The name is matched exactly: a prefix, another case or a name with a
 * space more is another device. */
static void test_an_unknown_device_is_refused_with_the_names_there_are(void **state) {
  fixture *f = *state;
  static const char *const names[] = {"NVIDIA H20", "nvidia h200", "NVIDIA H200 ", "NVIDIA B200"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *const args[] = {"winners", names[i]};
    result r = run_show(f->path, args, 2);
    assert_int_equal(r.rc, ST_EXIT_USAGE);
    assert_string_equal(r.out, "");
    char want[200];
    snprintf(want, sizeof want, "no device named '%s'", names[i]);
    assert_non_null(strstr(r.err, want));
    assert_non_null(strstr(r.err, "'NVIDIA H100 80GB HBM3'"));
    assert_non_null(strstr(r.err, "'NVIDIA H200'"));
    result_free(&r);
  }
}

/* Without a name, every model's winners: more models than a short fixed
 * list would hold are all there. */
static void test_every_device_without_a_name(void **state) {
  fixture *f = *state;
  enum { MORE = 20 };
  for (int i = 0; i < MORE; i++) {
    char name[64], uuid[64];
    snprintf(name, sizeof name, "GPU model %02d", i);
    snprintf(uuid, sizeof uuid, "uuid-model-%02d", i);
    device_with_winner(f->db, name, uuid);
  }
  const char *const text[] = {"winners"};
  result r = run_show(f->path, text, 1);
  assert_int_equal(r.rc, ST_EXIT_OK);
  assert_int_equal(count(r.out, "winners for "), MORE + 2);
  assert_non_null(strstr(r.out, "winners for GPU model 19 "));
  assert_non_null(strstr(r.out, "winners for NVIDIA H200 "));
  result_free(&r);
  const char *const json[] = {"winners", "--json"};
  r = run_show(f->path, json, 2);
  assert_int_equal(r.rc, ST_EXIT_OK);
  assert_int_equal(count(r.out, "{\"device\":"), MORE + 2);
  result_free(&r);
}

/* A device name belongs to `winners` only; an empty one is no name. */
static void test_other_reports_take_no_device_name(void **state) {
  fixture *f = *state;
  static const struct {
    const char *args[3];
    int nargs;
    const char *message;
  } cases[] = {
      {{"runs", "NVIDIA H200"}, 2, "unexpected argument 'NVIDIA H200'"},
      {{"run", "1", "NVIDIA H200"}, 3, "unexpected argument 'NVIDIA H200'"},
      {{"winners", "NVIDIA H200", "NVIDIA H100 80GB HBM3"}, 3, "unexpected argument 'NVIDIA H100 80GB HBM3'"},
      {{"winners", ""}, 2, "show winners needs a device name"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    result r = run_show(f->path, cases[i].args, cases[i].nargs);
    assert_int_equal(r.rc, ST_EXIT_USAGE);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, cases[i].message));
    result_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_winners_of_the_named_device_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_winners_of_the_named_device_as_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_an_unknown_device_is_refused_with_the_names_there_are, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_device_without_a_name, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_reports_take_no_device_name, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
