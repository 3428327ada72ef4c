/* runs.env as the tuner writes it: on a machine without a GPU it is a JSON
 * object with the project version, the NVRTC version, the generator and
 * template hashes, the suite and the seed (the driver null: it is the
 * card's, as its probe read it), and it round-trips through the database; the tree hash changes
 * when one template file changes (and back when it is restored), but not
 * for a dot-file; st_run_env_get reads the flat object back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_env.h"
#include "test_db_fixture.h"

static void write_text(const char *path, const char *text) { fx_write_file(path, text, strlen(text)); }

static int is_hex32(const char *s) {
  if (strlen(s) != ST_HASH_HEX_LEN) return 0;
  for (; *s; s++)
    if (!strchr("0123456789abcdef", *s)) return 0;
  return 1;
}

static void test_env_of_a_run_without_gpu_is_json_with_its_fields(void **state) {
  (void)state;
  char env[ST_RUN_ENV_CAP];
  st_err err = {{0}};
  const st_run_env_in in = {NULL, ST_SOURCE_DIR "/generator", ST_SOURCE_DIR "/templates", "quick", 12345};
  if (st_run_env_json(&in, env, sizeof env, &err) != ST_OK) fail_msg("st_run_env_json: %s", err.msg);
  printf("env: %s\n", env);
  assert_true(fx_json_valid(env));

  /* Through the database, read back as the row and checked by SQLite. */
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  st_run_row run;
  memset(&run, 0, sizeof run);
  snprintf(run.kind, sizeof run.kind, "tune");
  snprintf(run.op, sizeof run.op, "index_decode");
  snprintf(run.suite, sizeof run.suite, "quick");
  run.device_id = fx_device(db, "NVIDIA H100", "sm_90a", "GPU-1");
  memcpy(run.env, env, sizeof env);
  int64_t id = 0;
  int found = 0;
  assert_int_equal(st_db_run_begin(db, &run, &id, &err), ST_OK);
  st_run_row back;
  assert_int_equal(st_db_get_run(db, id, &back, &found, &err), ST_OK);
  assert_true(found);
  st_db_close(db);
  fx_remove(path);

  char *v = fx_json_get(back.env, "$.tool_version");
  assert_string_equal(v, ST_VERSION);
  free(v);
  v = fx_json_get(back.env, "$.nvrtc");
  assert_non_null(strchr(v, '.')); /* "13.0" */
  free(v);
  static const char *const hashes[] = {"$.generator_hash", "$.templates_hash"};
  for (int i = 0; i < 2; i++) {
    v = fx_json_get(back.env, hashes[i]);
    if (!is_hex32(v)) fail_msg("%s = '%s' is not 32 hex digits", hashes[i], v);
    free(v);
  }
  v = fx_json_get(back.env, "$.suite");
  assert_string_equal(v, "quick");
  free(v);
  assert_int_equal(fx_json_int(back.env, "$.seed"), 12345);
  /* No card was given: none of its fields are there. */
  v = fx_json_query("SELECT json_type(?1, '$.gpu_uuid') IS NULL", back.env, NULL);
  assert_string_equal(v, "1");
  free(v);
  /* The driver is a key always: the card's, so null without one. */
  v = fx_json_query("SELECT json_type(?1, '$.driver')", back.env, NULL);
  assert_string_equal(v, "null");
  free(v);
}

static void test_env_names_the_card_when_there_is_one(void **state) {
  (void)state;
  st_device_info dev;
  memset(&dev, 0, sizeof dev);
  snprintf(dev.name, sizeof dev.name, "NVIDIA \"H100\" 80GB");
  snprintf(dev.uuid, sizeof dev.uuid, "0123456789abcdef0123456789abcdef");
  dev.sm_count = 132;
  dev.driver_version = 13000;
  char env[ST_RUN_ENV_CAP];
  st_err err = {{0}};
  const st_run_env_in in = {&dev, ST_SOURCE_DIR "/generator", ST_SOURCE_DIR "/templates", "quick", 1};
  assert_int_equal(st_run_env_json(&in, env, sizeof env, &err), ST_OK);
  char *v = fx_json_get(env, "$.gpu_name");
  assert_string_equal(v, dev.name);
  free(v);
  assert_int_equal(fx_json_int(env, "$.sm_count"), 132);
  assert_int_equal(fx_json_int(env, "$.driver"), 13000); /* as the probe read it: never asked in this process */
  char got[160];
  assert_true(st_run_env_get(env, "gpu_name", got, sizeof got));
  assert_string_equal(got, dev.name);
  assert_true(st_run_env_get(env, "sm_count", got, sizeof got));
  assert_string_equal(got, "132");
  assert_true(st_run_env_get(env, "seed", got, sizeof got));
  assert_string_equal(got, "1");
  assert_false(st_run_env_get(env, "sm_clock_mhz", got, sizeof got));
  assert_false(st_run_env_get("{}", "seed", got, sizeof got));
  assert_false(st_run_env_get("not json", "seed", got, sizeof got));
  assert_false(st_run_env_get("[1,2]", "seed", got, sizeof got)); /* not an object */
  const char *kinds = "{\"s\":\"a\\\"b\",\"t\":true,\"n\":null,\"v\":[1,2],\"x\":1.5}";
  assert_true(st_run_env_get(kinds, "s", got, sizeof got));
  assert_string_equal(got, "a\"b"); /* unescaped */
  assert_true(st_run_env_get(kinds, "t", got, sizeof got));
  assert_string_equal(got, "true");
  assert_true(st_run_env_get(kinds, "n", got, sizeof got));
  assert_string_equal(got, "null");
  assert_true(st_run_env_get(kinds, "v", got, sizeof got));
  assert_string_equal(got, "[1,2]");
  assert_true(st_run_env_get(kinds, "x", got, sizeof got));
  assert_string_equal(got, "1.5");
  assert_false(st_run_env_get(kinds, "s\"", got, sizeof got)); /* a key with a quote: never there */
  /* Too small a buffer is refused, not cut. */
  char small[64];
  assert_int_equal(st_run_env_json(&in, small, sizeof small, &err), ST_ERR_INVALID_ARG);
}

static void hash_of(const char *dir, char out[ST_HASH_HEX_LEN + 1]) {
  st_err err = {{0}};
  if (st_run_env_tree_hash(dir, out, &err) != ST_OK) fail_msg("st_run_env_tree_hash(%s): %s", dir, err.msg);
}

static void test_changing_one_template_changes_the_template_hash(void **state) {
  (void)state;
  uint64_t rng = st_test_seed("test_changing_one_template_changes_the_template_hash");
  char dir[] = "/tmp/st_run_env_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[300], files[3][320];
  snprintf(sub, sizeof sub, "%s/common", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  snprintf(files[0], sizeof files[0], "%s/index_decode.cu", dir);
  snprintf(files[1], sizeof files[1], "%s/sparse_attn.cu", dir);
  snprintf(files[2], sizeof files[2], "%s/common/math.cuh", dir);
  for (int i = 0; i < 3; i++) write_text(files[i], "// template\n__global__ void k() {}\n");

  char h0[ST_HASH_HEX_LEN + 1], h1[ST_HASH_HEX_LEN + 1], h2[ST_HASH_HEX_LEN + 1], h3[ST_HASH_HEX_LEN + 1];
  hash_of(dir, h0);
  const int which = (int)st_rand_int(&rng, 0, 2);
  write_text(files[which], "// template\n__global__ void k() { }\n"); /* one byte more */
  hash_of(dir, h1);
  if (strcmp(h0, h1) == 0) fail_msg("editing %s left the tree hash at %s", files[which], h0);
  write_text(files[which], "// template\n__global__ void k() {}\n");
  hash_of(dir, h2);
  assert_string_equal(h0, h2);
  char dot[320];
  snprintf(dot, sizeof dot, "%s/.clang-format", dir);
  write_text(dot, "BasedOnStyle: LLVM\n");
  hash_of(dir, h3);
  assert_string_equal(h0, h3); /* an installed tree has no dot-files */
  /* Same bytes under another name is another tree. */
  char moved[320];
  snprintf(moved, sizeof moved, "%s/common/other.cuh", dir);
  assert_int_equal(rename(files[2], moved), 0);
  hash_of(dir, h3);
  assert_string_not_equal(h0, h3);

  unlink(dot);
  unlink(moved);
  unlink(files[0]);
  unlink(files[1]);
  rmdir(sub);
  rmdir(dir);
  st_err err = {{0}};
  assert_int_equal(st_run_env_tree_hash(dir, h3, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, dir));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_env_of_a_run_without_gpu_is_json_with_its_fields),
      cmocka_unit_test(test_env_names_the_card_when_there_is_one),
      cmocka_unit_test(test_changing_one_template_changes_the_template_hash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
