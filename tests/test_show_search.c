/* `show run ID --search model` (tuner/show_search.c): a tune run replayed
 * through the search model, from a database it only reads. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "generator.h"
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
  char def[40], v[40];
  fx_variant(db, "index_decode", "a_default", 1, def);
  fx_variant(db, "index_decode", "v", 0, v);
  const int64_t run_id = fx_suite_run(db, "tune", "index_decode", "m3-decode", dev, NULL);
  st_err err = {{0}};
  const char *ordered[3] = {NULL, NULL, NULL};
  suite_order(ordered);
  /* v: twice the default's time on the first two, half of it on the last,
   * which the model (two neighbours, 1.3x) leaves it out of. */
  const double v_us[3] = {20.0, 20.0, 5.0};
  for (int i = 0; i < 3; i++) {
    fx_measure(db, run_id, def, ordered[i], "ok", 10.0, 0.01, NULL);
    fx_measure(db, run_id, v, ordered[i], "ok", v_us[i], 0.01, NULL);
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
  free(json);
  char *text = replay(path, db, run_id, 0, &s, &err);
  assert_int_equal(s, ST_OK);
  if (!strstr(text, "index_decode: 3 shapes, 1 of 6 (variant, shape) pairs left out (17%); the best kept on 2 shapes"))
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_variant_slow_on_two_near_shapes_is_left_out_of_the_third),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
