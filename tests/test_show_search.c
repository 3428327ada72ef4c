/* `show run ID --search model` (tuner/show_search.c): a tune run replayed
 * through the search model, from a database it only reads. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "generator.h"
#include "search_model.h"
#include "show_search.h"
#include "test_db_fixture.h"

/* Three index_decode shapes of m3-decode within the model's radius of each
 * other (batch and context the same; the lengths or qlen differ). */
static const char *const near_keys[] = {
    "index_decode:B=32,D=128,H=2,ctx=32768,dtype=bf16,init=1,lens=full,local=2,qlen=1,topk=16",
    "index_decode:B=32,D=128,H=2,ctx=32768,dtype=bf16,init=1,lens=mixed,local=2,qlen=1,topk=16",
    "index_decode:B=32,D=128,H=2,ctx=32768,dtype=bf16,init=1,lens=full,local=2,qlen=2,topk=16",
};

/* The suite positions of near_keys, in the order tune runs them. */
static void suite_order(const char **ordered) {
  st_gen *gen = NULL;
  st_shape *shapes = NULL;
  int n = 0, k = 0;
  st_err err = {{0}};
  assert_int_equal(st_gen_open(NULL, NULL, &gen, &err), ST_OK);
  assert_int_equal(st_gen_suite(gen, "m3-decode", "index_decode", &shapes, &n, &err), ST_OK);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 3; j++)
      if (strcmp(shapes[i].key, near_keys[j]) == 0) ordered[k++] = near_keys[j];
  assert_int_equal(k, 3);
  free(shapes);
  st_gen_close(gen);
}

/* Runs the replay with stdout in a file; returns the file's text. */
static char *replay(const char *db_path, st_db *db, int64_t run_id, int json, st_status *status, st_err *err) {
  char out[256];
  st_test_temp_path(out, sizeof out, ".json");
  st_cli cli;
  memset(&cli, 0, sizeof cli);
  cli.cmd = "show";
  cli.db_path = db_path;
  cli.json = json;
  cli.search_model = 1;
  fflush(stdout);
  const int saved = dup(1);
  const int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, 1);
  close(fd);
  *status = st_show_search_replay(&cli, db, run_id, err);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  size_t size = 0;
  unsigned char *text = fx_read_file(out, &size);
  text[size] = '\0'; /* fx_read_file leaves room for it */
  unlink(out);
  return (char *)text;
}

static void test_a_variant_slow_on_two_near_shapes_is_left_out_of_the_third(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  const int64_t dev = fx_device(db, "GPU X", "sm_90a", "GPU-1");
  char def[40], vid[40];
  fx_variant(db, "index_decode", "a_default", 1, def);
  fx_variant(db, "index_decode", "v", 0, vid);
  const int64_t run_id = fx_suite_run(db, "tune", "index_decode", "m3-decode", dev, NULL);
  st_err err = {{0}};
  const char *ordered[3] = {NULL, NULL, NULL};
  suite_order(ordered);
  /* v: twice the default's time on the first two, half of it on the last,
   * which the model (its struct slow on the two nearest shapes) leaves it
   * out of. */
  const double v_us[3] = {20.0, 20.0, 5.0};
  for (int i = 0; i < 3; i++) {
    fx_measure(db, run_id, def, ordered[i], "ok", 10.0, 0.01, NULL);
    fx_measure(db, run_id, vid, ordered[i], "ok", v_us[i], 0.01, NULL);
  }
  assert_int_equal(st_db_run_finish(db, run_id, "done", &err), ST_OK);

  st_status s = ST_OK;
  char *json = replay(path, db, run_id, 1, &s, &err);
  assert_int_equal(s, ST_OK);
  assert_non_null(json);
  if (!fx_json_valid(json)) fail_msg("not JSON: %s", json);
  assert_int_equal(fx_json_int(json, "$.ops[0].shapes"), 3);
  assert_int_equal(fx_json_int(json, "$.ops[0].pairs"), 6);
  assert_int_equal(fx_json_int(json, "$.ops[0].left_out"), 1);
  assert_int_equal(fx_json_int(json, "$.ops[0].best_kept"), 2);
  char *max = fx_json_get(json, "$.ops[0].regret.max");
  assert_non_null(max);
  assert_float_equal(atof(max), 1.0, 1e-9); /* 10 us kept against 5 */
  free(max);
  char *v = fx_json_get(json, "$.by_struct.threshold");
  assert_float_equal(atof(v), ST_SEARCH_STRUCT_THRESHOLD, 1e-9);
  free(v);
  v = fx_json_query("SELECT json_type(?1, ?2)", json, "$.by_family.radius"); /* any distance */
  assert_string_equal(v, "null");
  free(v);
  free(json);
  char *text = replay(path, db, run_id, 0, &s, &err);
  assert_int_equal(s, ST_OK);
  if (!strstr(text,
              "index_decode: 3 shapes, 1 of 6 (variant, shape) pairs left out (17%); the best kept on 2 shapes") ||
      !strstr(text, "at least 1.15x the best on the 2 nearest shapes before it\n") ||
      !strstr(text, "(within distance 8.0), or its family at least 1.50x on the 2 nearest (at any distance)"))
    fail_msg("unexpected report:\n%s", text);
  free(text);

  /* Not a tune, or no such run: refused, nothing printed. */
  char *none = replay(path, db, run_id + 7, 1, &s, &err);
  assert_int_equal(s, ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no run"));
  free(none);
  st_db_close(db);
  fx_remove(path);
}

/* Variants of three structs; DEF the default. Names differ within their
 * first 30 characters (fx_variant's ids). */
#define DEF "index_decode.def.k16.q1/auto"
#define FAST "index_decode.fast.k16.q1/s1"
#define SLOW "index_decode.slow.k16.q1/s1"
#define SLOW_K32 "index_decode.slow.k32.q2/s4"

typedef struct timed_pair {
  int shape; /* 0, 1, 2: near_keys in suite order */
  const char *name, *status;
  double us;
} timed_pair;

/* A tune run of `pairs` replayed: the pairs left out of index_decode. */
static int left_out_of(const timed_pair *pairs, int n) {
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  const int64_t dev = fx_device(db, "GPU X", "sm_90a", "GPU-1");
  static const char *const names[] = {DEF, FAST, SLOW, SLOW_K32};
  char ids[4][40];
  for (int i = 0; i < 4; i++) fx_variant(db, "index_decode", names[i], i == 0, ids[i]);
  const int64_t run_id = fx_suite_run(db, "tune", "index_decode", "m3-decode", dev, NULL);
  const char *ordered[3] = {NULL, NULL, NULL};
  suite_order(ordered);
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (strcmp(names[k], pairs[i].name)) k++;
    fx_measure(db, run_id, ids[k], ordered[pairs[i].shape], pairs[i].status, pairs[i].us, 0.01, NULL);
  }
  st_err err = {{0}};
  assert_int_equal(st_db_run_finish(db, run_id, "done", &err), ST_OK);
  st_status s = ST_OK;
  char *json = replay(path, db, run_id, 1, &s, &err);
  assert_int_equal(s, ST_OK);
  const int left_out = (int)fx_json_int(json, "$.ops[0].left_out");
  free(json);
  st_db_close(db);
  fx_remove(path);
  return left_out;
}

static void test_the_replay_judges_a_variant_against_what_applies_to_each_shape(void **state) {
  (void)state;
  /* SLOW is 1.6x FAST on the first two shapes. FAST has no pair on the
   * third: there SLOW meets only DEF, which it beat, and is kept; with
   * FAST there, it is left out. DEF, 4x FAST, is never left out. */
  timed_pair pairs[] = {
      {0, DEF, "ok", 20.0}, {0, FAST, "ok", 5.0},     {0, SLOW, "ok", 8.0},
      {1, DEF, "ok", 20.0}, {1, FAST, "ok", 5.0},     {1, SLOW_K32, "ok", 8.0},
      {2, DEF, "ok", 20.0}, {2, SLOW_K32, "ok", 8.0}, {2, FAST, "ok", 5.0},
  };
  assert_int_equal(left_out_of(pairs, 8), 0);
  assert_int_equal(left_out_of(pairs, 9), 1);
}

static void test_the_replay_counts_a_pruned_variant_as_slow(void **state) {
  (void)state;
  /* Stopped by the probe on both shapes before, however close its probe's
   * time: left out of the third, where it would have been the best. */
  const timed_pair pairs[] = {
      {0, DEF, "ok", 10.0},      {0, SLOW, "pruned", 10.5}, {1, DEF, "ok", 10.0},
      {1, SLOW, "pruned", 10.5}, {2, DEF, "ok", 10.0},      {2, SLOW, "ok", 5.0},
  };
  assert_int_equal(left_out_of(pairs, 6), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_variant_slow_on_two_near_shapes_is_left_out_of_the_third),
      cmocka_unit_test(test_the_replay_judges_a_variant_against_what_applies_to_each_shape),
      cmocka_unit_test(test_the_replay_counts_a_pruned_variant_as_slow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
