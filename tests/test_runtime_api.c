/* test_runtime_api.c - the public C ABI on a machine without a GPU.
 *
 * st_open reports a missing driver plainly; every entry point rejects NULL
 * and invalid arguments with a message naming the argument; a handle made
 * without a device (st_handle_alloc, with a stand-in loader) runs the
 * st_index_decode* calls through validation, dispatch, plan and workspace
 * checks up to the launch. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "handle.h"
#include "testutil.h"

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("expected \"%s\" in \"%s\"", part, text);
}

/* ---- arguments
 * --------------------------------------------------------------- */

/* A fake device address: never dereferenced, aligned as the launcher wants. */
#define FAKE_PTR(n) ((void *)(uintptr_t)(0x100000u * (n)))

static st_index_decode_args make_args(int R, int H, int D, st_dtype dt, int qlen, int topk, int max_blocks) {
  st_index_decode_args a;
  st_index_decode_args_init(&a);
  a.q = st_test_tensor(dt, 3, (int64_t[]){(int64_t)R * qlen, H, D}, FAKE_PTR(1));
  a.k_cache = st_test_tensor(dt, 3, (int64_t[]){1024, 128, D}, FAKE_PTR(2));
  a.block_table = st_test_tensor(ST_DTYPE_INT32, 2, (int64_t[]){R, max_blocks}, FAKE_PTR(3));
  a.seq_lens = st_test_tensor(ST_DTYPE_INT32, 1, (int64_t[]){R}, FAKE_PTR(4));
  a.topk_idx = st_test_tensor(ST_DTYPE_INT32, 3, (int64_t[]){H, (int64_t)R * qlen, topk}, FAKE_PTR(5));
  a.qlen = qlen;
  a.topk = topk;
  a.init_blocks = 1;
  a.local_blocks = 2;
  a.max_context = max_blocks * 128;
  return a;
}

/* ---- a handle without a device
 * ------------------------------------------------ */

typedef struct fake_loader {
  int loads;
  int reserves;
  st_module module; /* what a load returns: never launched */
} fake_loader;

static st_status fake_load(void *ctx, st_op_id op, const st_dispatch_variant *v, void **loaded, st_err *err) {
  (void)op;
  (void)v;
  (void)err;
  fake_loader *f = ctx;
  f->loads++;
  *loaded = &f->module;
  return ST_OK;
}

static st_status fake_reserve(void *ctx, void *loaded, unsigned main_bytes, unsigned merge_bytes, st_err *err) {
  (void)loaded;
  (void)main_bytes;
  (void)merge_bytes;
  (void)err;
  ((fake_loader *)ctx)->reserves++;
  return ST_OK;
}

static st_dispatch_variant variant(const char *id, int topk_cap, st_index_decode_algo algo) {
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", id);
  snprintf(v.name, sizeof v.name, "index_decode_%s", id);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s", id);
  v.cfg.index_decode = (st_index_decode_config){.dtype = ST_DTYPE_BF16,
                                                .head_dim = 128,
                                                .topk_cap = topk_cap,
                                                .heads_per_cta = 1,
                                                .max_qlen = 1,
                                                .threads = 128,
                                                .units_in_flight = 2,
                                                .algo = algo};
  v.rank = topk_cap;
  return v;
}

/* A handle whose defaults are `defs` and whose module loads are `f`'s. The
 * fit check (the launcher's, planned for 132 multiprocessors) stays. */
static st_handle *bare_handle(const st_dispatch_variant *defs, size_t n, fake_loader *f) {
  st_handle *h = NULL;
  st_err err = {{0}};
  assert_int_equal(st_handle_alloc(&h, &err), ST_OK);
  h->dev.sm_count = 132;
  h->db_path = strdup("unit.db");
  if (n > 0) {
    st_op_tables *t = &h->ops[ST_OP_INDEX_DECODE];
    t->defaults = malloc(n * sizeof *defs);
    assert_non_null(t->defaults);
    memcpy(t->defaults, defs, n * sizeof *defs);
    t->n_defaults = n;
  }
  st_handle_bind_tables(h);
  h->load = fake_load;
  h->reserve_smem = fake_reserve;
  h->hook_ctx = f;
  return h;
}

static void close_bare(st_handle *h) { st_close(h); }

/* ---- st_open and NULL handles
 * -------------------------------------------------- */

static void open_without_driver_says_so(void **state) {
  (void)state;
  const st_cu *cu = NULL;
  if (st_cu_load(&cu, NULL) == ST_OK) skip(); /* this machine has a driver */
  st_handle *h = (st_handle *)FAKE_PTR(7);
  assert_int_equal(st_open("/nonexistent/sparsetune.db", 0, &h), ST_ERR_NO_DRIVER);
  assert_null(h);
  printf("# st_open: %s\n", st_last_error(NULL));
  assert_contains(st_last_error(NULL), "no CUDA driver on this machine");
  assert_contains(st_last_error(NULL), "libcuda.so.1");
  h = (st_handle *)FAKE_PTR(7); /* no database: the same */
  assert_int_equal(st_open(NULL, 0, &h), ST_ERR_NO_DRIVER);
  assert_null(h);
  assert_contains(st_last_error(NULL), "libcuda.so.1");
}

static void open_rejects_bad_arguments_by_name(void **state) {
  (void)state;
  st_handle *h = (st_handle *)FAKE_PTR(7);
  assert_int_equal(st_open("x.db", 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "out is NULL");
  assert_int_equal(st_open("", 0, &h), ST_ERR_INVALID_ARG);
  assert_null(h);
  assert_contains(st_last_error(NULL), "db_path is empty");
  assert_int_equal(st_open("x.db", -3, &h), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "device_ordinal=-3");
}

static void every_call_rejects_a_null_handle(void **state) {
  (void)state;
  st_index_decode_args a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 64);
  size_t bytes = 99;
  assert_int_equal(st_workspace_clear(NULL, FAKE_PTR(1), 64, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  st_open(NULL, 0, NULL); /* overwrite, so each check below sees its own message */
  assert_int_equal(st_index_decode_workspace_size(NULL, &a, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  st_open(NULL, 0, NULL);
  assert_int_equal(st_index_decode_prepare(NULL, &a), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  st_open(NULL, 0, NULL);
  assert_int_equal(st_index_decode(NULL, &a, FAKE_PTR(9), 1 << 20, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  st_close(NULL);
  assert_string_equal(st_last_variant(NULL), "");
}

static void status_names_are_never_null(void **state) {
  (void)state;
  assert_string_equal(st_status_name(ST_OK), "ST_OK");
  assert_string_equal(st_status_name(ST_ERR_WORKSPACE), "ST_ERR_WORKSPACE");
  for (int s = -2; s < 20; s++) assert_non_null(st_status_name((st_status)s));
}

/* The library says the version of the header it was built with; the
 * header's three numbers spell its string. */
static void version_is_the_headers(void **state) {
  (void)state;
  assert_string_equal(st_version(), SPARSETUNE_VERSION_STRING);
  char spelled[32];
  snprintf(spelled, sizeof spelled, "%d.%d.%d", SPARSETUNE_VERSION_MAJOR, SPARSETUNE_VERSION_MINOR,
           SPARSETUNE_VERSION_PATCH);
  assert_string_equal(st_version(), spelled);
  assert_int_equal(st_version_number(), SPARSETUNE_VERSION_NUMBER);
  assert_int_equal(SPARSETUNE_VERSION_NUMBER,
                   SPARSETUNE_VERSION_MAJOR * 10000 + SPARSETUNE_VERSION_MINOR * 100 + SPARSETUNE_VERSION_PATCH);
}

/* An argument block that st_<op>_args_init did not set up, or one of
 * another size, is refused by every entry point, before anything else. */
static void argument_blocks_must_be_initialized(void **state) {
  (void)state;
  fake_loader f = {0};
  st_handle *h = bare_handle(NULL, 0, &f);
  size_t bytes = 0;
  st_index_decode_args a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 64);
  assert_int_equal(a.struct_size, sizeof a);
  a.struct_size = 0; /* as a block filled without the init */
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "st_index_decode_args_init");
  assert_int_equal(st_index_decode_prepare(h, &a), ST_ERR_INVALID_ARG);
  assert_int_equal(st_index_decode(h, &a, FAKE_PTR(9), 64, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "struct_size=0");
  a.struct_size = sizeof a + 8; /* a block of a later version */
  assert_int_equal(st_index_decode_prepare(h, &a), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "in this library");
  assert_int_equal(f.loads, 0);
  /* The init zeroes everything else. */
  st_sparse_attn_args b;
  memset(&b, 0x5a, sizeof b);
  st_sparse_attn_args_init(&b);
  assert_int_equal(b.struct_size, sizeof b);
  assert_null(b.q.data);
  assert_null(b.lse.data);
  assert_int_equal(b.scale_mode, ST_KV_SCALE_NONE);
  st_index_topk_args_init(NULL); /* accepted, does nothing */
  close_bare(h);
}

/* ---- calls on a handle
 * ------------------------------------------------------------ */

static void null_arguments_are_named(void **state) {
  (void)state;
  fake_loader f = {0};
  st_handle *h = bare_handle(NULL, 0, &f);
  st_index_decode_args a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 64);
  size_t bytes = 0;
  assert_int_equal(st_index_decode_workspace_size(h, NULL, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_index_decode_workspace_size(h, &a, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "bytes is NULL");
  assert_int_equal(st_index_decode_prepare(h, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_index_decode(h, NULL, FAKE_PTR(9), 64, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_workspace_clear(h, NULL, 64, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "workspace is NULL");
  assert_int_equal(st_workspace_clear(h, NULL, 0, NULL), ST_OK); /* nothing to clear */
  assert_int_equal(f.loads, 0);
  close_bare(h);
}

static void invalid_arguments_carry_the_launcher_message(void **state) {
  (void)state;
  fake_loader f = {0};
  st_handle *h = bare_handle(NULL, 0, &f);
  size_t bytes = 0;
  st_index_decode_args a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 64);
  a.topk = 80;
  assert_int_equal(st_index_decode(h, &a, FAKE_PTR(9), 64, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "topk=80");
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "topk=80");
  a = make_args(8, 2, 128, ST_DTYPE_BF16, 5, 16, 64);
  assert_int_equal(st_index_decode_prepare(h, &a), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "qlen=5");
  /* The launch needs real pointers; the size query and prepare read none. */
  a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 64);
  a.q.data = NULL;
  assert_int_equal(st_index_decode(h, &a, FAKE_PTR(9), 64, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "q.data is NULL");
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_ERR_NO_VARIANT); /* past validation */
  close_bare(h);
}

static void no_variant_names_the_shape(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant d = variant("bf16_128", 64, ST_INDEX_DECODE_SPLIT);
  st_handle *h = bare_handle(&d, 1, &f);
  st_index_decode_args a = make_args(8, 2, 64, ST_DTYPE_FP8_E4M3, 1, 40, 64);
  size_t bytes = 7;
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_ERR_NO_VARIANT);
  assert_int_equal(bytes, 0);
  printf("# no variant: %s\n", st_last_error(h));
  assert_contains(st_last_error(h), "no compiled index_decode variant for");
  assert_contains(st_last_error(h), "dtype=fp8");
  assert_contains(st_last_error(h), "D=64");
  assert_contains(st_last_error(h), "topk=40");
  assert_contains(st_last_error(h), "unit.db");
  assert_int_equal(f.loads, 0);
  close_bare(h);
}

static void workspace_is_sized_checked_and_named(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant d[] = {variant("split16", 16, ST_INDEX_DECODE_SPLIT)};
  st_handle *h = bare_handle(d, 1, &f);
  st_index_decode_args a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 512);
  size_t bytes = 0;
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_OK);
  assert_true(bytes > 0);
  assert_int_equal(st_index_decode_prepare(h, &a), ST_OK);
  assert_int_equal(f.loads, 1); /* remembered */

  assert_int_equal(st_index_decode(h, &a, NULL, 0, NULL), ST_ERR_WORKSPACE);
  printf("# workspace: %s\n", st_last_error(h));
  assert_contains(st_last_error(h), "workspace is NULL");
  char needed[64];
  snprintf(needed, sizeof needed, "needs %zu bytes", bytes);
  assert_contains(st_last_error(h), needed);
  assert_int_equal(st_index_decode(h, &a, FAKE_PTR(9), bytes - 1, NULL), ST_ERR_WORKSPACE);
  assert_contains(st_last_error(h), needed);
  char given[64];
  snprintf(given, sizeof given, "workspace_bytes=%zu", bytes - 1);
  assert_contains(st_last_error(h), given);
  assert_int_equal(f.loads, 1);
  assert_string_equal(st_last_variant(h), ""); /* nothing was launched */

  /* With enough workspace the call gets to the launch, which a handle
   * without a device refuses plainly. */
  assert_int_equal(st_index_decode(h, &a, FAKE_PTR(9), bytes, NULL), ST_ERR_NO_DRIVER);
  assert_contains(st_last_error(h), "no CUDA device");
  close_bare(h);
}

static void a_plan_that_cannot_be_made_does_not_fit(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant d = variant("wide", 64, ST_INDEX_DECODE_SINGLE);
  d.cfg.index_decode.heads_per_cta = 4;
  d.cfg.index_decode.max_qlen = 4;
  d.cfg.index_decode.threads = 256;
  st_handle *h = bare_handle(&d, 1, &f);
  st_index_decode_args a = make_args(1, 4, 128, ST_DTYPE_BF16, 4, 64, 16 * 1024 * 1024 - 1);
  size_t bytes = 0;
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_ERR_NO_VARIANT);
  printf("# plan: %s\n", st_last_error(h));
  assert_contains(st_last_error(h), "shared memory");
  close_bare(h);
}

/* ---- per-thread records
 * ------------------------------------------------------------- */

typedef struct thread_arg {
  st_handle *h;
  char seen[ST_ERR_MSG_MAX];
} thread_arg;

static void *fail_on_other_thread(void *p) {
  thread_arg *t = p;
  st_index_decode_prepare(t->h, NULL);
  snprintf(t->seen, sizeof t->seen, "%s", st_last_error(t->h));
  return NULL;
}

static void last_error_is_per_thread_and_per_handle(void **state) {
  (void)state;
  fake_loader f = {0};
  st_handle *h = bare_handle(NULL, 0, &f);
  st_handle *h2 = bare_handle(NULL, 0, &f);
  assert_string_equal(st_last_error(h), "");
  st_index_decode_args a = make_args(8, 2, 128, ST_DTYPE_BF16, 1, 16, 64);
  a.topk = 0;
  assert_int_equal(st_index_decode_prepare(h, &a), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "topk=0");

  thread_arg t = {.h = h};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fail_on_other_thread, &t), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_contains(t.seen, "args is NULL");
  assert_contains(st_last_error(h), "topk=0"); /* this thread's record is untouched */
  assert_string_equal(st_last_error(h2), "");

  /* A success does not clear the last failure; a failure on another handle
   * replaces the thread's record. */
  assert_int_equal(st_workspace_clear(h, NULL, 0, NULL), ST_OK);
  assert_contains(st_last_error(h), "topk=0");
  assert_int_equal(st_index_decode_prepare(h2, NULL), ST_ERR_INVALID_ARG);
  assert_string_equal(st_last_error(h), "");
  assert_contains(st_last_error(h2), "args is NULL");
  close_bare(h2);
  close_bare(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(open_without_driver_says_so),
      cmocka_unit_test(open_rejects_bad_arguments_by_name),
      cmocka_unit_test(every_call_rejects_a_null_handle),
      cmocka_unit_test(status_names_are_never_null),
      cmocka_unit_test(version_is_the_headers),
      cmocka_unit_test(argument_blocks_must_be_initialized),
      cmocka_unit_test(null_arguments_are_named),
      cmocka_unit_test(invalid_arguments_carry_the_launcher_message),
      cmocka_unit_test(no_variant_names_the_shape),
      cmocka_unit_test(workspace_is_sized_checked_and_named),
      cmocka_unit_test(a_plan_that_cannot_be_made_does_not_fit),
      cmocka_unit_test(last_error_is_per_thread_and_per_handle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
